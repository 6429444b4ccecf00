"""Produce enforces the topic's own configs (the partition log's ``LogConfig``), not the broker-wide
values: ``max.message.bytes``, ``min.insync.replicas`` and ``message.timestamp.before.max.ms``,
checked with confluent-kafka against a real broker, including a live IncrementalAlterConfigs."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(60)


def create(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config or {})])[topic].result(timeout=15)


def produce_one(
    bootstrap: str, topic: str, value: bytes, *, acks: str = "1", timestamp_ms: int = 0
) -> confluent_kafka.KafkaError | None:
    """Produce one record without retries; returns the delivery error (None = delivered)."""
    results: list[confluent_kafka.KafkaError | None] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "retries": 0,
            "linger.ms": 0,
            "message.timeout.ms": 10000,
            "enable.idempotence": False,
        }
    )
    producer.produce(
        topic,
        value=value,
        partition=0,
        timestamp=timestamp_ms,
        on_delivery=lambda err, _msg: results.append(err),
    )
    assert producer.flush(15) == 0
    return results[0]


def test_max_message_bytes_per_topic(cluster: LocalCluster, unique_topic: str) -> None:
    small, big = f"{unique_topic}-small", f"{unique_topic}-big"
    create(cluster.bootstrap_servers, small, {"max.message.bytes": "200"})
    create(cluster.bootstrap_servers, big)
    error = produce_one(cluster.bootstrap_servers, small, b"x" * 1000)
    assert error is not None and error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE, error
    assert produce_one(cluster.bootstrap_servers, small, b"x" * 50) is None  # a small batch fits
    assert produce_one(cluster.bootstrap_servers, big, b"x" * 1000) is None


def test_max_message_bytes_alter_applies_live(cluster: LocalCluster, unique_topic: str) -> None:
    create(cluster.bootstrap_servers, unique_topic)
    assert produce_one(cluster.bootstrap_servers, unique_topic, b"x" * 1000) is None
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    resource = ConfigResource(
        "topic",
        unique_topic,
        incremental_configs=[
            ConfigEntry("max.message.bytes", "300", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    error = produce_one(cluster.bootstrap_servers, unique_topic, b"x" * 1000)
    assert error is not None and error.code() == confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE, error


def test_min_insync_replicas_per_topic(cluster: LocalCluster, unique_topic: str) -> None:
    strict, relaxed = f"{unique_topic}-strict", f"{unique_topic}-relaxed"
    create(cluster.bootstrap_servers, strict, {"min.insync.replicas": "2"})
    create(cluster.bootstrap_servers, relaxed)
    # Kafka 3.7+ caps the requirement at the replication factor (Partition.effectiveMinIsr), so a
    # single-replica topic with min.insync.replicas=2 still takes acks=all; the uncapped case
    # (NOT_ENOUGH_REPLICAS with a follower down) is in tests/fault/test_replication_failover.py.
    assert produce_one(cluster.bootstrap_servers, strict, b"v", acks="all") is None
    assert produce_one(cluster.bootstrap_servers, strict, b"v", acks="1") is None
    assert produce_one(cluster.bootstrap_servers, relaxed, b"v", acks="all") is None


def test_message_timestamp_before_max_ms_per_topic(cluster: LocalCluster, unique_topic: str) -> None:
    strict, relaxed = f"{unique_topic}-strict", f"{unique_topic}-relaxed"
    create(cluster.bootstrap_servers, strict, {"message.timestamp.before.max.ms": "60000"})
    create(cluster.bootstrap_servers, relaxed)
    old_ms = int(time.time() * 1000) - 3_600_000
    error = produce_one(cluster.bootstrap_servers, strict, b"v", timestamp_ms=old_ms)
    assert error is not None and error.code() == confluent_kafka.KafkaError.INVALID_TIMESTAMP, error
    assert produce_one(cluster.bootstrap_servers, strict, b"v") is None  # now is within range
    assert produce_one(cluster.bootstrap_servers, relaxed, b"v", timestamp_ms=old_ms) is None


def test_log_append_time_stamps_batches_with_the_broker_clock(
    cluster: LocalCluster, unique_topic: str
) -> None:
    """``message.timestamp.type=LogAppendTime``: the leader replaces the producer's timestamp
    with its own clock (no range check on the producer's), the delivery report and every reader
    see LogAppendTime; a CreateTime topic keeps the producer's (librdkafka's test 0052)."""
    from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer
    from spark_kafkalite.client.types import TopicPartition

    bootstrap = cluster.bootstrap_servers
    create(
        bootstrap,
        unique_topic,
        {"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": "60000"},
    )
    produced_ms = 1_000_000  # 1970: far outside before.max.ms, stamped anyway
    reports: list[tuple[int, int]] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    before_ms = int(time.time() * 1000)
    for i in range(5):  # one batch (linger), then one alone: two stamps
        producer.produce(
            unique_topic,
            value=b"v%d" % i,
            partition=0,
            timestamp=produced_ms,
            on_delivery=lambda err, msg: reports.append(msg.timestamp()) if err is None else None,
        )
    producer.flush(15)
    producer.produce(
        unique_topic,
        value=b"last",
        partition=0,
        timestamp=produced_ms,
        on_delivery=lambda err, msg: reports.append(msg.timestamp()) if err is None else None,
    )
    assert producer.flush(15) == 0
    after_ms = int(time.time() * 1000)
    assert len(reports) == 6
    assert {kind for kind, _ in reports} == {confluent_kafka.TIMESTAMP_LOG_APPEND_TIME}
    assert all(before_ms - 1000 <= ts <= after_ms + 1000 for _, ts in reports), reports

    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique_topic, "enable.auto.commit": False}
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(unique_topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        read: list[tuple[int, int]] = []
        deadline = time.monotonic() + 15
        while len(read) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                read.append(msg.timestamp())
    finally:
        consumer.close()
    assert read == reports  # the stored stamp is the one the producer was told

    ours = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    with ours:
        ours.assign([TopicPartition(unique_topic, 0)])
        records = []
        deadline = time.monotonic() + 15
        while len(records) < 6 and time.monotonic() < deadline:
            for batch in ours.poll(200).values():
                records.extend(batch)
    assert [(r.timestamp_type, r.timestamp_ms) for r in records] == [(1, ts) for _, ts in reports]

    from spark_kafkalite.client import KafkaProducer

    with KafkaProducer({"bootstrap.servers": bootstrap}) as ours_producer:
        before_ms = int(time.time() * 1000)
        metadata = ours_producer.send(
            unique_topic, value=b"ours", partition=0, timestamp_ms=produced_ms
        ).result(15)
        assert before_ms - 1000 <= metadata.timestamp_ms <= int(time.time() * 1000) + 1000, metadata
