"""Client metrics under Kafka's client metric names (``KafkaProducer.metrics()`` /
``KafkaConsumer.metrics()``, as the Java client and kafka-python return them): windowed stats as
Kafka's ``org.apache.kafka.common.metrics`` computes them (``metrics.sample.window.ms`` 30 s,
``metrics.num.samples`` 2: a rate is the total over the kept samples divided by their span, never
less than one full window but the last; an average or maximum covers the kept samples).

Recording costs a lock and a few additions per request, batch or poll (never per record); the
sender / fetching thread records, any thread may read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["ClientMetrics", "WindowedStat", "SAMPLE_WINDOW_S", "NUM_SAMPLES"]

#: Kafka's ``metrics.sample.window.ms`` default, in seconds
SAMPLE_WINDOW_S = 30.0
#: Kafka's ``metrics.num.samples`` default
NUM_SAMPLES = 2


class WindowedStat:
    """Count, sum and maximum of recorded values in ``NUM_SAMPLES`` windows of
    ``SAMPLE_WINDOW_S`` (Kafka's ``SampledStat``), plus the all-time total."""

    __slots__ = ("_samples", "total", "_clock")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._samples: list[list[float]] = []  # [window start s, count, sum, max]
        self.total = 0.0

    def record(self, value: float, now: float | None = None) -> None:
        now = self._clock() if now is None else now
        samples = self._samples
        if not samples or now - samples[-1][0] >= SAMPLE_WINDOW_S:
            samples.append([now, 0, 0.0, float("-inf")])
            del samples[:-NUM_SAMPLES]
        sample = samples[-1]
        sample[1] += 1
        sample[2] += value
        if value > sample[3]:
            sample[3] = value
        self.total += value

    def _kept(self, now: float) -> list[list[float]]:
        return [s for s in self._samples if now - s[0] < SAMPLE_WINDOW_S * NUM_SAMPLES]

    def rate(self, now: float | None = None) -> float:
        """Sum per second over the kept samples (Kafka's ``Rate``)."""
        now = self._clock() if now is None else now
        kept = self._kept(now)
        if not kept:
            return 0.0
        elapsed = max(now - kept[0][0], SAMPLE_WINDOW_S * (NUM_SAMPLES - 1))
        return sum(s[2] for s in kept) / elapsed

    def avg(self, now: float | None = None) -> float:
        """Mean of the values recorded in the kept samples (NaN: none), as Kafka's ``Avg``."""
        kept = self._kept(self._clock() if now is None else now)
        count = sum(s[1] for s in kept)
        return sum(s[2] for s in kept) / count if count else float("nan")

    def max(self, now: float | None = None) -> float:
        """Largest value recorded in the kept samples (NaN: none), as Kafka's ``Max``."""
        kept = self._kept(self._clock() if now is None else now)
        return max((s[3] for s in kept if s[1]), default=float("nan"))


class ClientMetrics:
    """Named :class:`WindowedStat` s of one client, read as Kafka's metric names.

    Args:
        group: the metric group (``producer-metrics``, ``consumer-fetch-manager-metrics``).
        names: stat name -> the metric names it serves and how: ``(metric name, "rate" |
            "total" | "avg" | "max")``.
    """

    def __init__(self, group: str, names: dict[str, tuple[tuple[str, str], ...]]) -> None:
        self.group = group
        self._names = names
        self._stats = {name: WindowedStat() for name in names}
        self._lock = threading.Lock()

    def record(self, stat: str, value: float) -> None:
        """Record ``value`` in ``stat``."""
        with self._lock:
            self._stats[stat].record(value)

    def snapshot(self) -> dict[str, dict[str, float]]:
        """``{group: {metric name: value}}`` (kafka-python's ``metrics()`` shape)."""
        now = time.monotonic()
        out: dict[str, float] = {}
        with self._lock:
            for stat, metrics in self._names.items():
                stats = self._stats[stat]
                for metric, kind in metrics:
                    if kind == "rate":
                        out[metric] = stats.rate(now)
                    elif kind == "total":
                        out[metric] = stats.total
                    elif kind == "avg":
                        out[metric] = stats.avg(now)
                    else:
                        out[metric] = stats.max(now)
        return {self.group: out}


def producer_metrics() -> ClientMetrics:
    """The producer's ``producer-metrics`` group (Kafka's ``SenderMetricsRegistry`` names)."""
    return ClientMetrics(
        "producer-metrics",
        {
            "requests": (("request-rate", "rate"), ("request-total", "total")),
            "request_latency_ms": (("request-latency-avg", "avg"), ("request-latency-max", "max")),
            "records_sent": (("record-send-rate", "rate"), ("record-send-total", "total")),
            "records_per_request": (("records-per-request-avg", "avg"),),
            "batch_bytes": (("batch-size-avg", "avg"), ("batch-size-max", "max")),
            "bytes_sent": (("outgoing-byte-rate", "rate"), ("outgoing-byte-total", "total")),
            "record_retries": (("record-retry-rate", "rate"), ("record-retry-total", "total")),
            "record_errors": (("record-error-rate", "rate"), ("record-error-total", "total")),
        },
    )


def consumer_fetch_metrics() -> ClientMetrics:
    """The consumer's ``consumer-fetch-manager-metrics`` group (Kafka's ``FetchMetricsRegistry``)."""
    return ClientMetrics(
        "consumer-fetch-manager-metrics",
        {
            "fetches": (("fetch-rate", "rate"), ("fetch-total", "total")),
            "fetch_latency_ms": (("fetch-latency-avg", "avg"), ("fetch-latency-max", "max")),
            "fetch_bytes": (("fetch-size-avg", "avg"), ("fetch-size-max", "max")),
            "bytes_fetched": (("bytes-consumed-rate", "rate"), ("bytes-consumed-total", "total")),
            "records_consumed": (("records-consumed-rate", "rate"), ("records-consumed-total", "total")),
            "records_per_poll": (("records-per-request-avg", "avg"),),
            "records_lag": (("records-lag-max", "max"),),
        },
    )
