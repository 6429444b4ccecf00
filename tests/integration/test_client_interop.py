"""Interop with an independent client (confluent-kafka / librdkafka) through a real broker:
our producer -> confluent consumer, confluent producer -> our consumer, and keyed partitioning
equal to librdkafka's ``murmur2_random`` (the Java client's partitioner)."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.client.producer.partitioner import partition_for_key

pytestmark = pytest.mark.timeout(60)

Row = tuple[int, bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]


def create(bootstrap: str, topic: str, partitions: int) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def rows(count: int, partitions: int) -> list[Row]:
    base_ts = int(time.time() * 1000) - 3_600_000
    out: list[Row] = []
    for i in range(count):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        value = None if i % 13 == 5 else bytes([i % 256]) * (i % 300)
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 0:
            headers = [("h1", f"v{i}".encode()), ("empty", b""), ("null", None)]
        elif i % 3 == 1:
            headers = [("dup", b"a"), ("dup", b"b")]
        out.append((i % partitions, key, value, base_ts + i * 3, headers))
    return out


def ck_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Row]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "interop-" + topic, "enable.auto.commit": False}
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    out: list[Row] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            ts_type, ts = msg.timestamp()
            assert ts_type == confluent_kafka.TIMESTAMP_CREATE_TIME
            out.append((msg.partition(), msg.key(), msg.value(), ts, list(msg.headers() or [])))
    finally:
        consumer.close()
    return out


def our_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Row]:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    out: list[Row] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                for r in records:
                    assert r.timestamp_type == 0 and tp.partition == r.partition
                    out.append((r.partition, r.key, r.value, r.timestamp_ms, r.headers))
    finally:
        consumer.close()
    return out


def per_partition(items: list[Row]) -> dict[int, list[Row]]:
    result: dict[int, list[Row]] = {}
    for row in items:
        result.setdefault(row[0], []).append(row)
    return result


def test_our_producer_to_confluent_consumer(bootstrap_servers: str, unique_topic: str) -> None:
    create(bootstrap_servers, unique_topic, 3)
    sent = rows(500, 3)
    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5}) as producer:
        for partition, key, value, ts, headers in sent:
            producer.send(
                unique_topic, value=value, key=key, partition=partition, timestamp_ms=ts, headers=headers
            )
        producer.flush(20)
    received = ck_consume(bootstrap_servers, unique_topic, 3, len(sent))
    assert per_partition(received) == per_partition(sent)


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_producer_to_our_consumer(
    bootstrap_servers: str, unique_topic: str, compression: str
) -> None:
    if compression in ("snappy", "lz4", "zstd"):
        pytest.importorskip("cramjam")
    create(bootstrap_servers, unique_topic, 3)
    sent = rows(500, 3)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "linger.ms": 5,
            "compression.type": compression,
            "acks": "all",
        }
    )
    errors: list[object] = []
    for partition, key, value, ts, headers in sent:
        producer.produce(
            unique_topic,
            value=value,
            key=key,
            partition=partition,
            timestamp=ts,
            headers=headers or None,
            on_delivery=lambda err, msg: err and errors.append(err),
        )
    assert producer.flush(20) == 0 and not errors
    received = our_consume(bootstrap_servers, unique_topic, 3, len(sent))
    assert per_partition(received) == per_partition(sent)


def test_keyed_partitioning_matches_librdkafka_murmur2(bootstrap_servers: str, unique_topic: str) -> None:
    create(bootstrap_servers, unique_topic, 3)
    keys = [b"foo", b"bar", b"21"] + [f"customer-{i}".encode() for i in range(60)]
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap_servers, "partitioner": "murmur2_random"}
    )
    ck_partitions: dict[bytes, int] = {}
    for key in keys:
        producer.produce(
            unique_topic,
            value=b"ck",
            key=key,
            on_delivery=lambda err, msg: ck_partitions.__setitem__(msg.key(), msg.partition()),
        )
    assert producer.flush(20) == 0
    with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as ours:
        our_partitions = {
            key: ours.send(unique_topic, value=b"ours", key=key).result(timeout=20).partition for key in keys
        }
    assert our_partitions == ck_partitions
    assert ck_partitions[b"foo"] == partition_for_key(b"foo", 3)
