"""What ``kafkalite top`` shows, read once per refresh: :func:`take_snapshot` asks any Kafka
broker through the admin API (brokers, controller, partitions with ISR, high watermarks, consumer
groups' lag) and, when given, the brokers' Prometheus endpoints (``/metrics``: records in per
topic, request rates, Produce p99, under-replicated partitions per broker); :func:`rates` turns
two snapshots into per-second figures and lag trends.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BrokerMetrics", "Snapshot", "fetch_metrics", "take_snapshot"]


@dataclass
class BrokerMetrics:
    """Figures from one broker's ``/metrics`` (counters are totals since it started)."""

    url: str
    error: str | None = None
    messages_in: dict[str, float] = field(default_factory=dict)  # topic -> records
    requests: dict[str, float] = field(default_factory=dict)  # request name -> count
    produce_buckets: list[tuple[float, float]] = field(default_factory=list)  # (le, cumulative count)
    under_replicated: float = 0.0
    active_controller: float = 0.0


@dataclass
class Snapshot:
    """One refresh: ``taken_s`` is ``time.monotonic()``."""

    taken_s: float
    controller_id: int
    brokers: list[tuple[int, str, int]]
    partitions: dict[str, list[Any]]  # topic -> PartitionInfo (partition, leader, replicas, isr)
    end_offsets: dict[tuple[str, int], int]
    lags: dict[str, dict[tuple[str, int], int | None]]  # group -> (topic, partition) -> lag
    group_states: dict[str, str | None]
    metrics: list[BrokerMetrics]


def fetch_metrics(url: str, timeout_s: float = 2.0) -> BrokerMetrics:
    """Parse a broker's ``/metrics`` (prometheus_client's parser); ``error`` set when unreachable."""
    from prometheus_client.parser import text_string_to_metric_families

    out = BrokerMetrics(url)
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            text = response.read().decode()
    except OSError as exc:
        out.error = str(exc)
        return out
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, float(sample.value)
            if name == "kafka_server_brokertopicmetrics_messagesin_total" and "topic" in labels:
                out.messages_in[labels["topic"]] = value
            elif name == "kafka_network_requestmetrics_requests_total":
                out.requests[labels["request"]] = out.requests.get(labels["request"], 0.0) + value
            elif (
                name == "kafka_network_requestmetrics_totaltimems_bucket"
                and labels.get("request") == "Produce"
            ):
                out.produce_buckets.append((float(labels["le"]), value))
            elif name == "kafka_server_replicamanager_underreplicatedpartitions":
                out.under_replicated = value
            elif name == "kafka_controller_kafkacontroller_activecontrollercount":
                out.active_controller = value
    return out


def take_snapshot(admin: Any, metrics_urls: Sequence[str]) -> Snapshot:
    """Read everything :class:`Snapshot` holds through ``admin`` (a ``KafkaAdminClient``; the
    topics it lists, internal ones left out) and the ``metrics_urls``.

    Raises:
        KafkaError: the cluster did not answer the admin requests.
    """
    from spark_kafkalite.client import TopicPartition

    cluster = admin.describe_cluster()
    names = admin.list_topics()
    partitions = admin.describe_topics(names) if names else {}
    specs = {TopicPartition(t, p.partition): -1 for t, infos in partitions.items() for p in infos}
    found = admin.list_offsets(specs) if specs else {}
    end_offsets = {(tp.topic, tp.partition): value.offset for tp, value in found.items()}
    lags: dict[str, dict[tuple[str, int], int | None]] = {}
    states: dict[str, str | None] = {}
    for listing in admin.list_consumer_groups():
        states[listing.group_id] = listing.state
        lag = admin.consumer_group_lag(listing.group_id)
        lags[listing.group_id] = {(tp.topic, tp.partition): value.lag for tp, value in lag.items()}
    return Snapshot(
        time.monotonic(),
        cluster["controller_id"],
        cluster["brokers"],
        partitions,
        end_offsets,
        lags,
        states,
        [fetch_metrics(url) for url in metrics_urls],
    )


def produce_p99_ms(before: BrokerMetrics, after: BrokerMetrics) -> float | None:
    """The p99 Produce time (ms) between two scrapes of a broker: the upper bound of the first
    histogram bucket that holds 99 % of the requests in between (None: no request)."""
    previous = dict(before.produce_buckets)
    deltas = [(le, count - previous.get(le, 0.0)) for le, count in sorted(after.produce_buckets)]
    if not deltas or deltas[-1][1] <= 0:
        return None
    total = deltas[-1][1]
    return next(le for le, count in deltas if count >= 0.99 * total)
