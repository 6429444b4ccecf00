"""A real Prometheus server (Debian's ``prometheus`` package) scraping every broker of a 3-broker
LocalCluster (``LocalCluster.metrics_urls``) every 0.5 s; PromQL through its HTTP API:

* ``increase`` / ``rate`` of ``kafka_server_brokertopicmetrics_messagesin_total`` over the
  window of the leader's samples equal the records a confluent-kafka producer sent;
* ``kafka_consumergroup_lag`` per partition equals the lag from ListOffsets (the producer-side
  high watermarks confluent-kafka reads) minus the offsets confluent-kafka committed, with the
  group's coordinator leading only some of the partitions (the others' end offsets come from
  their leaders);
* ``kafka_server_replicamanager_underreplicatedpartitions`` summed over the brokers is > 0 while
  one broker is down (killed) and back to 0 once it restarted and caught up; exactly one active
  controller throughout;
* every query of the Grafana dashboard in ``conf/grafana/`` returns data.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from fault.replication_helpers import create_topic, start_cluster

from spark_kafkalite.local_cluster import LocalCluster, free_port

PROMETHEUS = shutil.which("prometheus")
DASHBOARD = Path(__file__).resolve().parents[2] / "conf" / "grafana" / "kafkalite-dashboard.json"
pytestmark = [
    pytest.mark.skipif(
        PROMETHEUS is None, reason="Prometheus is not installed (Debian: apt-get install prometheus)"
    ),
    pytest.mark.timeout(120),
]

SCRAPE_INTERVAL_S = 0.5
RECORDS = 2000
T = TypeVar("T")


class PrometheusServer:
    """``prometheus`` scraping ``targets`` (host:port) at ``SCRAPE_INTERVAL_S``, on a free port."""

    def __init__(self, work_dir: Path, targets: list[str]) -> None:
        work_dir.mkdir(parents=True, exist_ok=True)
        interval = f"{int(SCRAPE_INTERVAL_S * 1000)}ms"
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval},
            "scrape_configs": [{"job_name": "kafkalite", "static_configs": [{"targets": targets}]}],
        }
        (work_dir / "prometheus.yml").write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
        self.url = f"http://127.0.0.1:{free_port()}"
        assert PROMETHEUS is not None
        self.log = open(work_dir / "prometheus.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={work_dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={work_dir / 'data'}",
                f"--web.listen-address={self.url.removeprefix('http://')}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_for(lambda: self._ready(), 30, "Prometheus ready")

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            assert self.process.poll() is None, "prometheus exited"
            return False

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """The result of an instant query (vector or matrix entries)."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        with urllib.request.urlopen(
            f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=10
        ) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def scalar(self, promql: str) -> float | None:
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        self.log.close()


def wait_for(check: Callable[[], T | None | bool], timeout_s: float, what: str) -> T:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = start_cluster(tmp_path_factory.mktemp("prometheus-cluster"))
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture(scope="module")
def prometheus(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    targets = [url.removeprefix("http://").removesuffix("/metrics") for url in cluster.metrics_urls]
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), targets)
    try:
        wait_for(lambda: server.scalar("count(up == 1)") == 3, 20, "every broker scraped")
        yield server
    finally:
        server.stop()


def test_prometheus_sees_throughput_lag_and_under_replication(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    assert prometheus.scalar("sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1

    # -- messages in: rate / increase over the leader's samples --------------------------------
    topic = create_topic(cluster, partitions=1)
    series = f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}}'
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "acks": "all"})
    producer.produce(topic, b"first")  # the topic's series starts at 1, before the timed records
    assert producer.flush(15) == 0
    wait_for(lambda: len(_samples(prometheus, series, 1.0)) >= 2, 15, "two samples of the first record")
    for i in range(RECORDS):
        producer.produce(topic, b"record-%05d" % i)
    assert producer.flush(30) == 0
    wait_for(
        lambda: _samples(prometheus, series, 1.0 + RECORDS)[-2:] == [1.0 + RECORDS] * 2, 15, "all records"
    )
    samples = _raw(prometheus, series)
    first_ts = next(ts for ts, value in samples if value == 1.0)
    last_ts = samples[-1][0]
    window_ms = round((last_ts - first_ts) * 1000)  # both ends on samples: no extrapolation
    increase = prometheus.query(f"increase({series}[{window_ms}ms])", at=last_ts)
    rate = prometheus.query(f"rate({series}[{window_ms}ms])", at=last_ts)
    assert len(increase) == len(rate) == 1  # the leader's series only
    assert abs(float(increase[0]["value"][1]) - RECORDS) <= 0.05 * RECORDS
    assert abs(float(rate[0]["value"][1]) * window_ms / 1000 - RECORDS) <= 0.05 * RECORDS

    # -- request time split: the acks=all Produce requests waited for the followers in the
    # produce purgatory (remote time); every part counts each request once, as the total
    def produce(name: str) -> float | None:
        return prometheus.scalar(f'sum(kafka_network_requestmetrics_{name}{{request="Produce"}})')

    assert (produce("remotetimems_sum") or 0) > 0
    parts = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems")
    counts = {part: produce(f"{part}_count") for part in parts}
    assert set(counts.values()) == {produce("totaltimems_count")}, counts

    # -- consumer-group lag vs ListOffsets and committed offsets ---------------------------------
    lag_topic = create_topic(cluster, partitions=3)
    for i in range(300):
        producer.produce(lag_topic, b"v", partition=i % 3)
    assert producer.flush(15) == 0
    group = "prometheus-lag-" + lag_topic
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group})
    try:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(lag_topic, p), timeout=10)[1] for p in range(3)
        }
        consumer.commit(
            offsets=[TopicPartition(lag_topic, p, ends[p] // (p + 2)) for p in range(3)], asynchronous=False
        )
        committed = {
            tp.partition: tp.offset
            for tp in consumer.committed([TopicPartition(lag_topic, p) for p in range(3)])
        }
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(lag_topic, p), timeout=10)[1] for p in range(3)
        }
        # a fetch past the end: an OFFSET_OUT_OF_RANGE error response (librdkafka then resets)
        consumer.assign([TopicPartition(lag_topic, 0, 10**9)])
        consumer.poll(1.0)
    finally:
        consumer.close()
    expected = {str(p): float(ends[p] - committed[p]) for p in range(3)}
    assert all(v > 0 for v in expected.values())

    def lag_series() -> dict[str, float] | None:
        result = prometheus.query(f'kafka_consumergroup_lag{{consumergroup="{group}"}}')
        got = {r["metric"]["partition"]: float(r["value"][1]) for r in result}
        return got if got == expected else None

    wait_for(lag_series, 15, f"kafka_consumergroup_lag == {expected}")
    assert prometheus.scalar(f'kafka_consumergroup_lag_sum{{consumergroup="{group}"}}') == sum(
        expected.values()
    )
    assert (
        prometheus.scalar(f'count(kafka_consumergroup_members{{consumergroup="{group}"}})') == 1
    )  # one coordinator

    out_of_range = (
        'sum(kafka_network_requestmetrics_errors_total{request="Fetch",error="OFFSET_OUT_OF_RANGE"})'
    )
    wait_for(lambda: (prometheus.scalar(out_of_range) or 0) >= 1, 10, "the OFFSET_OUT_OF_RANGE error counted")

    # -- under-replicated partitions while a broker is down ---------------------------------------
    urp = "sum(kafka_server_replicamanager_underreplicatedpartitions)"
    assert prometheus.scalar(urp) == 0
    cluster.kill(3)
    wait_for(lambda: (prometheus.scalar(urp) or 0) > 0, 20, "under-replicated partitions > 0")
    elections = "sum(kafka_controller_controllerstats_leaderelectionrateandtimems_count)"
    wait_for(lambda: (prometheus.scalar(elections) or 0) > 0, 20, "leader elections counted")
    cluster.restart(3)
    wait_for(lambda: prometheus.scalar("count(up == 1)") == 3, 20, "the restarted broker scraped")
    wait_for(lambda: prometheus.scalar(urp) == 0, 30, "under-replicated partitions back to 0")
    assert prometheus.scalar("sum(kafka_controller_kafkacontroller_activecontrollercount)") == 1

    # -- the Grafana dashboard: every query returns data (the out-of-range fetch above made an
    # error response, the failover ISR changes, the group above has lag) ---------------------
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(queries) >= 15
    empty = [query for query in queries if not prometheus.query(query)]
    assert not empty, f"dashboard queries without data: {empty}"


def _raw(prometheus: PrometheusServer, series: str) -> list[tuple[float, float]]:
    """The samples of the series' one vector from the last minute: [(timestamp s, value)]."""
    result = prometheus.query(f"{series}[1m]")
    if not result:
        return []
    assert len(result) == 1, result
    return [(float(ts), float(value)) for ts, value in result[0]["values"]]


def _samples(prometheus: PrometheusServer, series: str, value: float) -> list[float]:
    """The values of the series' recent samples equal to ``value``."""
    return [v for _ts, v in _raw(prometheus, series) if v == value]
