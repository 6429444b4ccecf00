"""The broker's own metrics under the names the Prometheus JMX exporter gives Kafka's MBeans
(``prometheus/jmx_exporter`` ``example_configs/kafka-2_0_0.yml``, ``lowercaseOutputName: true``):

* a ``…PerSec`` meter ``kafka.<domain>:type=<Type>,name=<Name>PerSec[,k=v]`` becomes the counter
  ``kafka_<domain>_<type>_<name>_total{k=v}``;
* a gauge ``kafka.<domain>:type=<Type>,name=<Name>[,k=v]`` becomes ``kafka_<domain>_<type>_<name>``;
* an MBean no rule matches keeps the exporter's default name (domain, type and attribute, each
  non-alphanumeric character an underscore), as ``socket-server-metrics`` ``connection-count``.

Kafka's request-time histograms are exported by the JMX exporter as quantile gauges plus
``_count``; here they are Prometheus histograms with the same base names
(``kafka_network_requestmetrics_totaltimems_bucket{request,le}``, ``_sum``, ``_count``), so
``histogram_quantile`` computes any quantile over any window and instances aggregate.

Everything is read at scrape time, from the endpoint's thread: counters from
:mod:`broker.metrics.meters`, gauges over the hosted partitions by one pass over them (a scrape
costs O(partitions hosted); requests pay nothing for the gauges). Containers the event loop
mutates are copied with one C-level call (``list(d.values())``) before they are iterated.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from broker.metrics.meters import TIME_BUCKETS_MS, ControllerStats, RequestTimes, request_name
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.context import BrokerContext
    from broker.apis.kafka_apis import KafkaApis
    from broker.log.log_cleaner import LogCleaner
    from broker.network.socket_server import SocketServer

__all__ = ["BrokerCollector", "BrokerSources"]

_TOPIC_METERS = ("messagesin", "bytesin", "bytesout", "failedproducerequests", "failedfetchrequests")
_TOPIC_HELP = (
    "Records appended by clients (Kafka's BrokerTopicMetrics MessagesInPerSec)",
    "Bytes of record batches appended by clients (BytesInPerSec)",
    "Bytes of records returned to consumer fetches (BytesOutPerSec)",
    "Partitions of produce requests that failed (FailedProduceRequestsPerSec)",
    "Partitions of consumer fetch requests that failed (FailedFetchRequestsPerSec)",
)
_LE = [str(b) for b in TIME_BUCKETS_MS] + ["+Inf"]
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # hasattr: POSIX only


@dataclass
class BrokerSources:
    """What the collector reads. ``socket_server`` / ``log_cleaner`` may be None (not running)."""

    node_id: int
    ctx: Callable[[], BrokerContext | None]
    apis: KafkaApis
    socket_server: Callable[[], SocketServer | None]
    log_cleaner: Callable[[], LogCleaner | None]
    controller_stats: ControllerStats
    loop_thread_id: int  # the event loop's native thread id (its CPU time gives the idle ratio)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)


class BrokerCollector(Collector):
    """Collects the broker metrics listed in the module docstring."""

    def __init__(self, sources: BrokerSources) -> None:
        self.sources = sources
        self._loop_cpu: tuple[float, float] | None = None  # (wall s, loop thread CPU s) at the last scrape
        self._idle = 1.0

    def _loop_idle_ratio(self) -> float | None:
        """1 - the event loop thread's CPU time over wall time since the previous scrape (at
        least 0.5 s apart; a closer scrape repeats the last figure); None without /proc."""
        stat = f"/proc/self/task/{self.sources.loop_thread_id}/stat"
        try:
            with open(stat, encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        cpu = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
        now = time.monotonic()
        last = self._loop_cpu
        if last is None or now - last[0] >= 0.5:
            if last is not None:
                self._idle = min(1.0, max(0.0, 1.0 - (cpu - last[1]) / (now - last[0])))
            self._loop_cpu = (now, cpu)
        return self._idle

    def collect(self) -> Iterator[Metric]:
        ctx = self.sources.ctx()
        if ctx is None:
            return
        yield from self._topic_metrics(ctx)
        yield from self._request_metrics()
        yield from self._replica_manager_metrics(ctx)
        yield from self._controller_metrics(ctx)
        yield from self._network_metrics(ctx)
        yield from self._log_metrics(ctx)

    # -- BrokerTopicMetrics -----------------------------------------------------------------------
    def _topic_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        stats = ctx.replica_manager.broker_topic_stats
        topics = list(stats.topics.items())
        total = list(stats.all_topics)
        for slot, (name, doc) in enumerate(zip(_TOPIC_METERS, _TOPIC_HELP, strict=True)):
            family = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{name}",
                doc + "; the series without a topic label counts all topics",
                labels=["topic"],
            )
            # The all-topics meter: its MBean has no topic key, so its series has no topic label.
            family.samples.append(Sample(f"kafka_server_brokertopicmetrics_{name}_total", {}, total[slot]))
            for topic, counts in topics:
                family.add_metric([topic], counts[slot])
            yield family

    # -- RequestMetrics -----------------------------------------------------------------------------
    def _request_metrics(self) -> Iterator[Metric]:
        metrics = self.sources.apis.request_metrics
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests served by API and version (Kafka's RequestMetrics RequestsPerSec)",
            labels=["request", "version"],
        )
        for (api_key, version), count in list(metrics.requests.items()):
            requests.add_metric([request_name(api_key), str(version)], count)
        yield requests
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes in responses by API (Kafka's RequestMetrics ErrorsPerSec; NONE included)",
            labels=["request", "error"],
        )
        for (api_key, code), count in list(metrics.errors.items()):
            errors.add_metric([request_name(api_key), _error_name(code)], count)
        yield errors
        # one copy of each name's histograms (a C-level list copy each), so the parts and the
        # total of one scrape count the same requests while the loop keeps recording
        times = [(name, RequestTimes.copy_of(recorded)) for name, recorded in list(metrics.times.items())]
        for part, base in enumerate(RequestTimes.PARTS):
            family = HistogramMetricFamily(
                f"kafka_network_requestmetrics_{base}",
                f"Request {base[:-2]} in ms by request (Kafka's RequestMetrics; a histogram)",
                labels=["request"],
            )
            for name, recorded in times:
                counts = recorded.histogram(part)
                cumulative = 0
                buckets = []
                for le, count in zip(_LE, counts, strict=True):
                    cumulative += count
                    buckets.append((le, cumulative))
                family.add_metric([name], buckets, recorded.sums[part])
            yield family

    # -- ReplicaManager, ReplicaFetcherManager, purgatories --------------------------------------
    def _replica_manager_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        replica_manager = ctx.replica_manager
        partitions = list(replica_manager.partitions().values())
        leaders = under_replicated = under_min_isr = 0
        for p in partitions:
            if p.is_leader:
                leaders += 1
                if len(p.isr) < len(p.replicas):
                    under_replicated += 1
                if p.is_under_min_isr:
                    under_min_isr += 1
        yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions hosted here", len(partitions))
        yield _gauge("kafka_server_replicamanager_leadercount", "Partitions led here", leaders)
        yield _gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led here whose ISR is smaller than their replicas",
            under_replicated,
        )
        yield _gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions led here whose ISR is smaller than min.insync.replicas",
            under_min_isr,
        )
        meters = replica_manager.isr_change_meters
        yield _counter(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks committed (IsrShrinksPerSec)",
            meters.shrinks,
        )
        yield _counter(
            "kafka_server_replicamanager_isrexpands",
            "ISR expansions committed (IsrExpandsPerSec)",
            meters.expands,
        )
        max_lag = 0
        for fetcher in list(replica_manager.fetcher_manager.fetchers.values()):
            for state in list(fetcher.partitions.values()):
                max_lag = max(max_lag, state.lag)
        lag = GaugeMetricFamily(
            "kafka_server_replicafetchermanager_maxlag",
            "Largest leader high watermark minus local log end offset over the partitions followed here",
            labels=["clientId"],
        )
        lag.add_metric(["Replica"], max_lag)
        yield lag
        purgatory = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests parked in a purgatory, counted once per partition they watch",
            labels=["delayedOperation"],
        )
        purgatory.add_metric(["Produce"], replica_manager.produce_purgatory.watch_count())
        purgatory.add_metric(["Fetch"], ctx.fetch_purgatory.watch_count())
        yield purgatory

    # -- KafkaController ----------------------------------------------------------------------------
    def _controller_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        active = ctx.controller.controller_id == self.sources.node_id
        offline = 0
        if active:  # only the active controller reports it, as in Kafka
            for topic in list(ctx.image.topics.values()):
                offline += sum(1 for r in list(topic.partitions.values()) if r.leader < 0)
        yield _gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller, else 0 (exactly 1 over the cluster)",
            int(active),
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader (reported by the active controller)",
            offline,
        )
        if active:  # the JMX exporter's `<>Count` rule: a counter named ..._count (no quantiles here)
            yield UnknownMetricFamily(
                "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
                "Leader changes of existing partitions committed (ControllerStats LeaderElectionRateAndTimeMs)",
                value=self.sources.controller_stats.leader_elections,
            )

    # -- RequestChannel, SocketServer ------------------------------------------------------------
    def _network_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        server = self.sources.socket_server()
        if server is None:
            return
        idle = self._loop_idle_ratio()
        if idle is not None:  # one event loop is both Kafka's network processors and handler threads
            yield _gauge(
                "kafka_network_socketserver_networkprocessoravgidlepercent",
                "Fraction of time the broker's event loop was idle since the previous scrape (0-1)",
                idle,
            )
            yield _gauge(
                "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
                "Fraction of time the broker's event loop was idle since the previous scrape (0-1)",
                idle,
            )
        yield _gauge(
            "kafka_network_requestchannel_requestqueuesize",
            "Requests read and waiting for a queued.max.requests slot",
            server.request_queue_size(),
        )
        connections = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open client connections per listener (socket-server-metrics connection-count)",
            labels=["listener"],
        )
        for listener, count in server.connection_counts().items():
            connections.add_metric([listener], count)
        yield connections

    # -- LogManager, Log, LogCleanerManager ----------------------------------------------------------
    def _log_metrics(self, ctx: BrokerContext) -> Iterator[Metric]:
        log_manager = ctx.log_manager
        yield _gauge(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log dirs taken offline by an I/O error",
            len(log_manager.offline_log_dirs),
        )
        sizes = GaugeMetricFamily(
            "kafka_log_log_size",
            "Bytes of a partition's log on disk (Kafka's Log Size)",
            labels=["topic", "partition"],
        )
        for (topic, index), log in list(log_manager.all_logs().items()):
            sizes.add_metric([topic, str(index)], _size(log))
        yield sizes
        cleaner = self.sources.log_cleaner()
        uncleanable = GaugeMetricFamily(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "Partitions the log cleaner gave up on, per log dir",
            labels=["logDirectory"],
        )
        if cleaner is not None:
            for log_dir, count in cleaner.uncleanable_counts().items():
                uncleanable.add_metric([log_dir], count)
        yield uncleanable


def _size(log: Any) -> int:
    try:
        return int(log.size_bytes)
    except (OSError, ValueError):  # a segment deleted between listing and reading
        return 0


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)
