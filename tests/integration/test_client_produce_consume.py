"""Our producer -> our consumer against a real broker process: exact round trips, partitioning,
batching, acks levels and producer errors."""

from __future__ import annotations

import time

import pytest

from spark_kafkalite.client import (
    ConsumerRecord,
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    NewTopic,
    TopicPartition,
)
from spark_kafkalite.client.producer.partitioner import partition_for_key
from spark_kafkalite.protocol.errors import InvalidPartitionsError, MessageTooLargeError

pytestmark = pytest.mark.timeout(60)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def consume_all(
    bootstrap: str, topic: str, partitions: int, expected: int, **config: object
) -> dict[int, list[ConsumerRecord]]:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", **config})
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    out: dict[int, list[ConsumerRecord]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + 20
    got = 0
    try:
        while got < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                out[tp.partition].extend(records)
                got += len(records)
        assert consumer.poll(200) == {}  # nothing more than expected
    finally:
        consumer.close()
    return out


def test_round_trip_keys_values_headers_timestamps_in_order(
    bootstrap_servers: str, unique_topic: str
) -> None:
    create(bootstrap_servers, unique_topic, 3)
    base_ts = int(time.time() * 1000) - 60_000
    sent = []
    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 10}) as producer:
        futures = []
        for i in range(300):
            key = None if i % 10 == 0 else f"key-{i % 17}".encode()
            value = None if i % 31 == 7 else f"value-{i}".encode() * (i % 5)
            headers = [("n", str(i).encode()), ("null", None)] if i % 2 else []
            partition = i % 3
            futures.append(
                producer.send(
                    unique_topic,
                    value=value,
                    key=key,
                    partition=partition,
                    timestamp_ms=base_ts + i,
                    headers=headers,
                )
            )
            sent.append((partition, key, value, base_ts + i, headers))
        producer.flush(20)
        metadata = [f.result(timeout=0) for f in futures]
    by_partition: dict[int, list[tuple]] = {}
    for s in sent:
        by_partition.setdefault(s[0], []).append(s)
    received = consume_all(bootstrap_servers, unique_topic, 3, 300)
    for partition, records in received.items():
        expected = by_partition[partition]
        assert [(r.key, r.value, r.timestamp_ms, r.headers) for r in records] == [s[1:] for s in expected]
        assert [r.offset for r in records] == list(range(len(expected)))
        assert all(r.timestamp_type == 0 and r.topic == unique_topic for r in records)
    # RecordMetadata agrees with what was read
    for md, s in zip(metadata, sent, strict=True):
        assert md.partition == s[0] and md.timestamp_ms == s[3] and md.topic == unique_topic
    offsets_p0 = [md.offset for md in metadata if md.partition == 0]
    assert offsets_p0 == list(range(len(offsets_p0)))


def test_keyed_records_use_java_murmur2_partitioning(bootstrap_servers: str, unique_topic: str) -> None:
    create(bootstrap_servers, unique_topic, 5)
    keys = [f"user-{i}".encode() for i in range(50)]
    with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as producer:
        futures = [producer.send(unique_topic, value=b"v", key=k) for k in keys]
        partitions = [f.result(timeout=20).partition for f in futures]
    assert partitions == [partition_for_key(k, 5) for k in keys]
    assert len(set(partitions)) > 1


def test_linger_batches_many_records_into_few_requests(bootstrap_servers: str, unique_topic: str) -> None:
    create(bootstrap_servers, unique_topic, 2)
    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 50}) as producer:
        futures = [producer.send(unique_topic, value=b"x" * 20) for _ in range(1000)]
        producer.flush(20)
        assert all(f.result(timeout=0).offset >= 0 for f in futures)
        metrics = producer.metrics()["producer-metrics"]
        assert 1 <= metrics["request-total"] < 20
        assert metrics["record-send-total"] == 1000  # Kafka's producer metric names
        assert metrics["records-per-request-avg"] == 1000 / metrics["request-total"]
        assert metrics["record-send-rate"] > 0 and metrics["request-latency-avg"] >= 0
        assert metrics["record-error-total"] == 0
    assert sum(len(r) for r in consume_all(bootstrap_servers, unique_topic, 2, 1000).values()) == 1000


def test_null_keys_stick_to_a_partition_per_batch(bootstrap_servers: str, unique_topic: str) -> None:
    create(bootstrap_servers, unique_topic, 4)
    with KafkaProducer(
        {"bootstrap.servers": bootstrap_servers, "batch.size": 1000, "linger.ms": 100}
    ) as producer:
        futures = [producer.send(unique_topic, value=b"y" * 50) for _ in range(200)]
        partitions = [f.result(timeout=20).partition for f in futures]
    # sticky: long runs on one partition, yet more than one partition overall
    switches = sum(1 for a, b in zip(partitions, partitions[1:], strict=False) if a != b)
    assert 1 <= switches < 40


@pytest.mark.parametrize("acks", ["all", "1", 0])
def test_acks_levels(bootstrap_servers: str, unique_topic: str, acks: object) -> None:
    create(bootstrap_servers, unique_topic, 1)
    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "acks": acks, "linger.ms": 0}) as producer:
        futures = [producer.send(unique_topic, value=str(i).encode()) for i in range(20)]
        producer.flush(20)
        offsets = [f.result(timeout=0).offset for f in futures]
    if acks == 0:
        assert offsets == [-1] * 20
    else:
        assert offsets == list(range(20))
    records = consume_all(bootstrap_servers, unique_topic, 1, 20)[0]
    assert [r.value for r in records] == [str(i).encode() for i in range(20)]


def test_callbacks_and_str_values(bootstrap_servers: str, unique_topic: str) -> None:
    create(bootstrap_servers, unique_topic, 1)
    done = []
    with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as producer:
        future = producer.send(unique_topic, value="héllo", key="k", headers={"a": "b"})
        future.add_done_callback(lambda f: done.append(f.result().offset))
        producer.flush(20)
    assert done == [0]
    (record,) = consume_all(bootstrap_servers, unique_topic, 1, 1)[0]
    assert (record.key, record.value, record.headers) == (b"k", "héllo".encode(), [("a", b"b")])


def test_invalid_partition_and_too_large_record_fail_the_future(
    bootstrap_servers: str, unique_topic: str
) -> None:
    create(bootstrap_servers, unique_topic, 2)
    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "max.request.size": 1000}) as producer:
        with pytest.raises(InvalidPartitionsError):
            producer.send(unique_topic, value=b"x", partition=2).result(timeout=10)
        with pytest.raises(MessageTooLargeError):
            producer.send(unique_topic, value=b"x" * 2000).result(timeout=10)
        with pytest.raises(TypeError):
            producer.send(unique_topic, value=12)  # type: ignore[arg-type]
        assert producer.partitions_for(unique_topic) == {0, 1}


def test_large_batches_and_small_fetch_sizes(bootstrap_servers: str, unique_topic: str) -> None:
    create(bootstrap_servers, unique_topic, 1)
    value = bytes(range(256)) * 40  # 10 KiB
    with KafkaProducer(
        {"bootstrap.servers": bootstrap_servers, "batch.size": 200_000, "linger.ms": 20}
    ) as producer:
        for _ in range(100):
            producer.send(unique_topic, value=value)
    # max.partition.fetch.bytes smaller than a batch: the broker still returns one whole batch (KIP-74)
    records = consume_all(
        bootstrap_servers,
        unique_topic,
        1,
        100,
        **{"max.partition.fetch.bytes": 4096, "fetch.max.bytes": 8192},
    )[0]
    assert len(records) == 100 and all(r.value == value for r in records)
    assert [r.offset for r in records] == list(range(100))


def test_consumer_pipelines_fetches_and_honours_max_poll_records(
    bootstrap_servers: str, unique_topic: str
) -> None:
    create(bootstrap_servers, unique_topic, 2)
    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 20}) as producer:
        for i in range(5000):
            producer.send(unique_topic, value=str(i).encode(), partition=i % 2)
    consumer = KafkaConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "auto.offset.reset": "earliest",
            "max.poll.records": 300,
            "max.partition.fetch.bytes": 20_000,
        }
    )
    consumer.assign([TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)])
    seen: dict[int, list[int]] = {0: [], 1: []}
    deadline = time.monotonic() + 20
    while sum(map(len, seen.values())) < 5000 and time.monotonic() < deadline:
        batch = consumer.poll(500)
        assert sum(map(len, batch.values())) <= 300
        for tp, records in batch.items():
            seen[tp.partition].extend(r.offset for r in records)
    consumer.close()
    assert seen == {0: list(range(2500)), 1: list(range(2500))}


def test_reassigned_consumer_does_not_wait_for_a_long_poll(bootstrap_servers: str, unique_topic: str) -> None:
    """A bounded reader (like a Spark task) that reads a partition to its end and is then
    reassigned to another partition gets data at once, not after fetch.max.wait.ms: no fetch is
    left waiting on the broker for a partition that is at its high watermark."""
    create(bootstrap_servers, unique_topic, 2)
    with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as producer:
        for i in range(20):
            producer.send(unique_topic, value=b"r", partition=i % 2)
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap_servers, "fetch.max.wait.ms": 4000})
    try:
        for partition in (0, 1):
            tp = TopicPartition(unique_topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            started = time.monotonic()
            got: list[int] = []
            while len(got) < 10:
                got.extend(r.offset for r in consumer.poll(6000).get(tp, []))
            assert got == list(range(10))
            assert time.monotonic() - started < 2.0
    finally:
        consumer.close()
