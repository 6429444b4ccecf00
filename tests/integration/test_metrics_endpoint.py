"""The broker's Prometheus endpoint (``kafkalite.metrics.listener``, always on in LocalCluster):
/metrics of the session broker parsed with prometheus_client's own parser, after a
confluent-kafka producer and consumer group used a fresh topic."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import confluent_kafka
from prometheus_client.parser import text_string_to_metric_families

from spark_kafkalite.local_cluster import LocalCluster

RECORDS = 500


def _scrape(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {family.name: family for family in text_string_to_metric_families(text)}


def _value(families: dict[str, Any], sample_name: str, **labels: str) -> float:
    family_name = sample_name
    for suffix in ("_total", "_count", "_sum", "_bucket"):
        if sample_name.endswith(suffix) and sample_name not in families:
            family_name = sample_name.removesuffix(suffix)
    for sample in families[family_name].samples:
        if sample.name == sample_name and sample.labels == labels:
            return float(sample.value)
    raise AssertionError(f"no sample {sample_name}{labels}")


def test_metrics_endpoint_serves_kafkas_names(cluster: LocalCluster, unique_topic: str) -> None:
    (url,) = cluster.metrics_urls
    before = _scrape(url)
    all_in_before = _value(before, "kafka_server_brokertopicmetrics_messagesin_total")
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
    for i in range(RECORDS):
        producer.produce(unique_topic, value=b"v%05d" % i)
    assert producer.flush(15) == 0
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": unique_topic,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.subscribe([unique_topic])
        seen = 0
        deadline = time.monotonic() + 20
        while seen < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
        assert seen == RECORDS
        consumer.commit(asynchronous=False)
        assert consumer.poll(1.0) is None  # long-poll fetches at the end of the log: they park
    finally:
        consumer.close()

    families = _scrape(url)
    topic = {"topic": unique_topic}
    assert _value(families, "kafka_server_brokertopicmetrics_messagesin_total", **topic) == RECORDS
    bytes_in = _value(families, "kafka_server_brokertopicmetrics_bytesin_total", **topic)
    assert bytes_in > RECORDS * 6  # the batches' bytes, headers included
    assert _value(families, "kafka_server_brokertopicmetrics_bytesout_total", **topic) >= bytes_in
    assert _value(families, "kafka_server_brokertopicmetrics_failedproducerequests_total", **topic) == 0
    # the all-topics series (no topic label) counts this topic too
    assert _value(families, "kafka_server_brokertopicmetrics_messagesin_total") >= all_in_before + RECORDS
    assert _value(families, "kafka_log_log_size", topic=unique_topic, partition="0") >= bytes_in

    produce_versions = [
        s
        for s in families["kafka_network_requestmetrics_requests"].samples
        if s.labels["request"] == "Produce"
    ]
    assert produce_versions and all(s.labels["version"].isdigit() for s in produce_versions)
    assert (
        _value(families, "kafka_network_requestmetrics_errors_total", request="OffsetCommit", error="NONE")
        >= 1
    )
    # request times: Prometheus histograms (cumulative buckets, +Inf = _count)
    total_time = families["kafka_network_requestmetrics_totaltimems"]
    buckets = [
        s for s in total_time.samples if s.name.endswith("_bucket") and s.labels["request"] == "Produce"
    ]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts) and buckets[-1].labels["le"] == "+Inf"
    produce_count = _value(families, "kafka_network_requestmetrics_totaltimems_count", request="Produce")
    assert counts[-1] == produce_count == sum(s.value for s in produce_versions)
    assert _value(families, "kafka_network_requestmetrics_localtimems_count", request="FetchConsumer") >= 1
    # Kafka's split of the total (RequestChannel.Request.updateRequestMetrics): every part counted
    # once per request, and the parts' sums add up to the total's, for the acks=all Produce
    # requests and the consumer's long-poll fetches, which parked (remote time) in the purgatory
    parts = ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems", "responsesendtimems")
    for request in ("Produce", "FetchConsumer"):
        total_count = _value(families, "kafka_network_requestmetrics_totaltimems_count", request=request)
        total_sum = _value(families, "kafka_network_requestmetrics_totaltimems_sum", request=request)
        for part in parts:
            assert (
                _value(families, f"kafka_network_requestmetrics_{part}_count", request=request) == total_count
            )
        part_sums = [
            _value(families, f"kafka_network_requestmetrics_{part}_sum", request=request) for part in parts
        ]
        assert abs(sum(part_sums) - total_sum) <= 1e-6 * max(total_sum, 1.0)
    assert _value(families, "kafka_network_requestmetrics_remotetimems_sum", request="FetchConsumer") > 0

    assert _value(families, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert _value(families, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    partitions = _value(families, "kafka_server_replicamanager_partitioncount")
    assert partitions >= 2  # this topic and __consumer_offsets at least
    assert _value(families, "kafka_server_replicamanager_leadercount") == partitions
    assert _value(families, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert _value(families, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert _value(families, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert _value(families, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    for operation in ("Produce", "Fetch"):
        assert (
            _value(
                families, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation=operation
            )
            >= 0
        )
    for idle in (
        "kafka_network_socketserver_networkprocessoravgidlepercent",
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
    ):
        assert 0 <= _value(families, idle) <= 1
    assert _value(families, "kafka_controller_controllerstats_leaderelectionrateandtimems_count") >= 0
    assert "process_cpu_seconds" in families  # prometheus_client's process collector
