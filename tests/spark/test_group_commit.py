"""commitOffsetsToGroup=true: a streaming query's processed offsets show up as the committed
offsets of ``kafka.group.id``, read back by an independent client (confluent-kafka), by
``kafkalite groups describe`` and in the broker's kafka_exporter lag series on ``/metrics``."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spark_kafkalite.client import KafkaAdminClient, KafkaProducer, NewTopic
from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(180)


def _committed_by_confluent(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
    finally:
        consumer.close()


def _wait_for(check: Any, expected: Any, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    got = None
    while time.monotonic() < deadline:
        got = check()
        if got == expected:
            return got
        time.sleep(0.5)
    return got


@pytest.fixture(scope="module")
def group_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A one-broker cluster whose ``__consumer_offsets`` can be created (replication factor 1;
    Kafka's default of 3 needs three brokers)."""
    data_dir: Path = tmp_path_factory.mktemp("group-cluster")
    with LocalCluster(
        data_dir=data_dir, config_overrides={"offsets.topic.replication.factor": "1"}
    ) as cluster:
        yield cluster


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes]]) -> None:
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        futures = [producer.send(topic, value=value, partition=p) for p, value in records]
        producer.flush()
        for future in futures:
            future.result(timeout=30)


def _group_series(metrics_url: str, group: str) -> dict[tuple[str, str], float]:
    """(sample name, partition) -> value of the ``kafka_consumergroup_*`` samples of ``group``."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, sample.labels.get("partition", "")): sample.value
        for family in text_string_to_metric_families(text)
        if family.name.startswith("kafka_consumergroup_")
        for sample in family.samples
        if sample.labels.get("consumergroup") == group
    }


def test_processed_offsets_are_committed_to_the_group(spark, group_cluster: LocalCluster) -> None:
    bootstrap_servers = group_cluster.bootstrap_servers
    topic = f"spark-group-{uuid.uuid4().hex[:8]}"
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    group = f"kafkalite-query-{uuid.uuid4().hex[:8]}"
    _produce(bootstrap_servers, topic, [(p, f"{p}-{i}".encode()) for p in (0, 1) for i in range(5 + 3 * p)])
    query = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.group.id", group)
        .option("commitOffsetsToGroup", "true")
        .load()
        .writeStream.format("memory")
        .queryName(f"mem_{uuid.uuid4().hex[:8]}")
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        assert _wait_for(
            lambda: _committed_by_confluent(bootstrap_servers, group, topic, 2), {0: 5, 1: 8}
        ) == {
            0: 5,
            1: 8,
        }
        _produce(bootstrap_servers, topic, [(1, b"more")] * 4)
        query.processAllAvailable()
        assert _wait_for(
            lambda: _committed_by_confluent(bootstrap_servers, group, topic, 2), {0: 5, 1: 12}
        ) == {
            0: 5,
            1: 12,
        }
        with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
            ours = admin.list_consumer_group_offsets(group)
        assert {tp.partition: off for tp, off in ours.items() if tp.topic == topic} == {0: 5, 1: 12}
    finally:
        query.stop()
    assert query.exception() is None
    # the query stopped; new records are the group's lag, as every Kafka lag tool computes it
    _produce(bootstrap_servers, topic, [(0, b"unread")] * 3)
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        lag = admin.consumer_group_lag(group)
    assert {tp.partition: info.lag for tp, info in lag.items()} == {0: 3, 1: 0}
    # and on the coordinator's /metrics, under kafka_exporter's names (what Prometheus scrapes)
    (metrics_url,) = group_cluster.metrics_urls
    assert _group_series(metrics_url, group) == {
        ("kafka_consumergroup_current_offset", "0"): 5,
        ("kafka_consumergroup_current_offset", "1"): 12,
        ("kafka_consumergroup_lag", "0"): 3,
        ("kafka_consumergroup_lag", "1"): 0,
        ("kafka_consumergroup_lag_sum", ""): 3,
        ("kafka_consumergroup_members", ""): 0,  # a query commits without joining the group
    }
    cli = Path(sys.executable).with_name("kafkalite")
    described = subprocess.run(
        [str(cli), "groups", "describe", group, "--bootstrap-server", bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert described.returncode == 0, described.stderr
    rows = [
        re.findall(r"\b\d+\b", line.split(topic, 1)[1])[:4]
        for line in described.stdout.splitlines()
        if topic in line
    ]
    assert ["0", "5", "8", "3"] in rows, described.stdout  # partition, committed, log end offset, lag
    assert ["1", "12", "12", "0"] in rows, described.stdout
