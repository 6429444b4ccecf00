"""Kafka's windowed client stats (``spark_kafkalite.client.client_metrics``): rates over the
kept sample windows, never over less than one full window but the last; averages and maxima
over the kept samples."""

from __future__ import annotations

import math

from spark_kafkalite.client.client_metrics import NUM_SAMPLES, SAMPLE_WINDOW_S, WindowedStat, producer_metrics


def test_rate_avg_and_max_over_the_kept_windows() -> None:
    stat = WindowedStat(clock=lambda: 0.0)
    assert stat.rate(0.0) == 0.0 and math.isnan(stat.avg(0.0)) and math.isnan(stat.max(0.0))
    stat.record(10, now=0.0)
    stat.record(30, now=1.0)
    # one window so far: the rate spans at least (NUM_SAMPLES - 1) windows, as Kafka's Rate
    assert stat.rate(2.0) == 40 / (SAMPLE_WINDOW_S * (NUM_SAMPLES - 1))
    assert stat.avg(2.0) == 20 and stat.max(2.0) == 30
    stat.record(5, now=SAMPLE_WINDOW_S + 1)  # a second window
    assert stat.rate(SAMPLE_WINDOW_S * 1.5) == 45 / (SAMPLE_WINDOW_S * 1.5)
    later = SAMPLE_WINDOW_S * NUM_SAMPLES + 2  # the first window expired
    assert stat.avg(later) == 5 and stat.max(later) == 5
    assert stat.total == 45  # totals never expire


def test_producer_metrics_use_kafkas_names() -> None:
    metrics = producer_metrics()
    metrics.record("requests", 1)
    metrics.record("records_sent", 7)
    snapshot = metrics.snapshot()["producer-metrics"]
    assert snapshot["request-total"] == 1 and snapshot["record-send-total"] == 7
    assert {"request-latency-avg", "batch-size-avg", "record-error-rate", "outgoing-byte-rate"} <= set(
        snapshot
    )
