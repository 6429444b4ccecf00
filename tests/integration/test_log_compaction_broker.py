"""Compaction on a real broker: compressed keyed batches from confluent-kafka (all four codecs)
are compacted in the background; confluent-kafka and kafka-python consumers read the latest
value per key at the original offsets; a batch with keyless records is refused with
INVALID_RECORD and per-record errors (KIP-467), as is one with a timestamp out of range; a
tombstone produced with an old CreateTime is read by kafka-python after the first clean, with
its timestamp, and is gone once its KIP-534 delete horizon has passed; a partition whose
cleaning raises (a batch corrupted on disk) is marked uncleanable and does not starve another.

A broker that refuses ``cleanup.policy=compact`` or lacks ``log.cleaner.backoff.ms`` fails
these tests (compaction is a supported feature)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import confluent_kafka
import kafka
import kafka.codec
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.server_configs import CONFIG_DEF
from spark_kafkalite.client import KafkaProducer
from spark_kafkalite.client.producer.sender import INVALID_DIFFERENT_RECORD_MESSAGE
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.errors import InvalidRecordError, KafkaError
from spark_kafkalite.protocol.record_batch import iter_batch_headers

pytestmark = pytest.mark.timeout(90)

KEYS = 25


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One broker for the module; every test has a topic of its own."""
    assert "log.cleaner.backoff.ms" in CONFIG_DEF
    cluster = LocalCluster(
        data_dir=tmp_path_factory.mktemp("compaction"),
        config_overrides={
            "log.segment.bytes": "3000",
            "log.cleaner.backoff.ms": "100",
            "log.initial.task.delay.ms": "0",
        },
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def create_compacted(bootstrap: str, topic: str, delete_retention_ms: int = 3_600_000) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "compact", "delete.retention.ms": str(delete_retention_ms)}
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(timeout=15)


def consume_ck(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "compaction", "enable.auto.commit": False}
    )
    out = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append((int(msg.offset()), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out


def consume_kp(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = kafka.TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            for records in consumer.poll(timeout_ms=500).values():
                out.extend((r.offset, r.key, r.value) for r in records)
    finally:
        consumer.close()
    return out


def test_compaction_of_compressed_batches_from_every_codec(local: LocalCluster) -> None:
    bootstrap = local.bootstrap_servers
    topic = "compacted"
    create_compacted(bootstrap, topic)
    latest: dict[bytes, tuple[int, bytes]] = {}
    offset = 0
    for round_ in range(4):
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            producer = confluent_kafka.Producer(
                {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, "acks": "all"}
            )
            for i in range(KEYS):
                key = b"key-%02d" % ((i * 7 + round_) % KEYS)
                value = b"%s-%d-%d" % (codec.encode(), round_, i) * 10
                producer.produce(topic, key=key, value=value, partition=0)
                latest[key] = (offset, value)
                offset += 1
            assert producer.flush(15) == 0
    end = offset
    deadline = time.monotonic() + 30
    got = consume_ck(bootstrap, topic, end)
    while len(got) >= end and time.monotonic() < deadline:
        time.sleep(0.2)
        got = consume_ck(bootstrap, topic, end)
    assert len(got) < end, "nothing was compacted"
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)) and offsets[-1] == end - 1
    final = {k: (o, v) for o, k, v in got}
    assert final == latest  # every key's latest value, at its original offset
    if kafka.codec.has_zstd():  # kafka-python reads zstd batches only with python-zstandard
        assert consume_kp(bootstrap, topic, end) == got


def test_compacted_gzip_lz4_batches_read_by_kafka_python(local: LocalCluster) -> None:
    bootstrap = local.bootstrap_servers
    topic = "compacted-kp"
    create_compacted(bootstrap, topic)
    offset = 0
    for round_ in range(6):
        codec = ("gzip", "lz4")[round_ % 2]
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, "acks": "all"}
        )
        for i in range(KEYS):
            producer.produce(
                topic,
                key=b"k%d" % (i % 10),
                value=b"%d-%d-" % (round_, i) + os.urandom(40).hex().encode(),
                partition=0,
            )
            offset += 1
        assert producer.flush(15) == 0
    deadline = time.monotonic() + 30
    got = consume_ck(bootstrap, topic, offset)
    while len(got) >= offset and time.monotonic() < deadline:
        time.sleep(0.2)
        got = consume_ck(bootstrap, topic, offset)
    assert len(got) < offset
    assert consume_kp(bootstrap, topic, offset) == got


def test_keyless_records_fail_per_record(local: LocalCluster) -> None:
    """KIP-467, as librdkafka's test 0011 ``test_message_single_partition_record_fail`` expects:
    a batch of 100 records, every tenth without a key, on a compacted topic is refused whole;
    the broker names the keyless records in ``record_errors``, so confluent-kafka fails those
    with INVALID_RECORD and the others with _INVALID_DIFFERENT_RECORD. Our producer fails them
    as Java's ``Sender.failBatch`` does. Then a keyed record is appended at offset 0."""
    bootstrap = local.bootstrap_servers
    topic = "compacted-keyless"
    create_compacted(bootstrap, topic)
    outcomes: dict[int, int] = {}
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 200, "compression.codec": "lz4"}
    )

    def on_delivery(index: int) -> Callable[[confluent_kafka.KafkaError | None, object], None]:
        return lambda err, _msg: outcomes.__setitem__(index, err.code() if err is not None else 0)

    for i in range(100):
        key = None if i % 10 == 0 else b"k%d" % i
        producer.produce(topic, key=key, value=b"v%d" % i, partition=0, on_delivery=on_delivery(i))
    assert producer.flush(15) == 0
    invalid_different = confluent_kafka.KafkaError._INVALID_DIFFERENT_RECORD
    assert outcomes == {
        i: confluent_kafka.KafkaError.INVALID_RECORD if i % 10 == 0 else invalid_different for i in range(100)
    }

    called_back: dict[int, BaseException | None] = {}
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 200}) as ours:
        futures = [
            ours.send(
                topic,
                b"v",
                key=None if i % 5 == 0 else b"k",
                partition=0,
                callback=lambda _metadata, exc, i=i: called_back.__setitem__(i, exc),
            )
            for i in range(20)
        ]
        ours.flush()
        errors = [future.exception(10) for future in futures]
    assert called_back == dict(enumerate(errors))  # send callbacks see each record's own error
    for i, error in enumerate(errors):
        if i % 5 == 0:
            assert isinstance(error, InvalidRecordError)
            assert (
                error.message
                == f"Compacted topic cannot accept message without key in topic partition {topic}-0."
            )
        else:
            assert type(error) is KafkaError and error.message == INVALID_DIFFERENT_RECORD_MESSAGE

    producer.produce(topic, key=b"k", value=b"keyed", partition=0, on_delivery=on_delivery(100))
    assert producer.flush(15) == 0
    assert outcomes[100] == 0
    assert [(offset, key) for offset, key, _value in consume_ck(bootstrap, topic, 1)] == [(0, b"k")]


def test_timestamp_out_of_range_fails_per_record(local: LocalCluster) -> None:
    """KIP-467 for ``LogValidator.validateTimestamp``: two records two hours ahead of the broker's
    clock (``message.timestamp.after.max.ms`` is one hour) in a batch of five. librdkafka fails
    the records named in ``record_errors`` with INVALID_RECORD when there are several (with only
    one, it gives every record of the batch the partition's error) and the other three with
    _INVALID_DIFFERENT_RECORD."""
    bootstrap = local.bootstrap_servers
    topic = "timestamps-per-record"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    outcomes: dict[int, int] = {}
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 200})
    now_ms = int(time.time() * 1000)
    for i in range(5):
        producer.produce(
            topic,
            value=b"v",
            partition=0,
            timestamp=now_ms + (2 * 3_600_000 if i in (1, 3) else 0),
            on_delivery=lambda err, _msg, i=i: outcomes.__setitem__(i, err.code() if err is not None else 0),
        )
    assert producer.flush(15) == 0
    invalid_different = confluent_kafka.KafkaError._INVALID_DIFFERENT_RECORD
    assert outcomes == {
        i: confluent_kafka.KafkaError.INVALID_RECORD if i in (1, 3) else invalid_different for i in range(5)
    }


def test_old_tombstone_kept_until_its_delete_horizon(local: LocalCluster) -> None:
    """KIP-534: the first clean keeps a tombstone whose CreateTime is a week old and stamps its
    batch with the delete horizon now + delete.retention.ms; a clean past that removes it."""
    bootstrap = local.bootstrap_servers
    topic = "compacted-tombstone"
    retention_ms = 500
    create_compacted(bootstrap, topic, delete_retention_ms=retention_ms)
    old_ms = int(time.time() * 1000) - 7 * 24 * 3_600_000
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})

    def send(key: bytes, value: bytes | None, count: int = 1, timestamp: int = 0) -> None:
        for _ in range(count):
            producer.produce(topic, key=key, value=value, partition=0, timestamp=timestamp)
        assert producer.flush(15) == 0

    send(b"gone", b"value")  # offset 0
    send(b"gone", None, timestamp=old_ms)  # offset 1: the tombstone, a week old
    before_clean_ms = int(time.time() * 1000)
    send(b"filler", b"f" * 700, count=5)  # > log.segment.bytes: the tombstone's segment rolls
    end = 7
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tp = kafka.TopicPartition(topic, 0)
    consumer.assign([tp])

    def read_all() -> list[tuple[int, bytes | None, bytes | None, int]]:
        consumer.seek_to_beginning(tp)
        out: list[tuple[int, bytes | None, bytes | None, int]] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            for records in consumer.poll(timeout_ms=200).values():
                out.extend((r.offset, r.key, r.value, r.timestamp) for r in records)
        return out

    try:
        deadline = time.monotonic() + 20
        got = read_all()
        while (not got or got[0][0] == 0) and time.monotonic() < deadline:  # until the first clean
            got = read_all()
        after_clean_ms = int(time.time() * 1000)
        # the old value went, the tombstone stayed with its own timestamp (no other clean can
        # run: nothing is dirty until the filler segment rolls)
        assert got[0] == (1, b"gone", None, old_ms), got[:2]
        partition_dir = local.log_dir(1) / f"{topic}-0"
        data = b"".join(p.read_bytes() for p in sorted(partition_dir.glob("*.log")))
        header = next(h for _, h in iter_batch_headers(data) if h.base_offset == 1)
        assert header.delete_horizon_ms is not None
        assert before_clean_ms + retention_ms <= header.delete_horizon_ms <= after_clean_ms + retention_ms
        # later cleans (each batch of filler rolls a segment and makes the log dirty) remove
        # the tombstone once the horizon has passed: it is seen gone only past the horizon
        deadline = time.monotonic() + 20
        while (not got or got[0][0] == 1) and time.monotonic() < deadline:
            send(b"filler", b"f" * 700, count=5)
            end += 5
            got = read_all()
        assert int(time.time() * 1000) >= header.delete_horizon_ms
        assert got[0][1] == b"filler" and [o for o, *_ in got] == sorted({o for o, *_ in got})
        assert got[-1][0] == end - 1
    finally:
        consumer.close()


def produce_rounds(bootstrap: str, topic: str, rounds: int, codec: str = "gzip") -> int:
    """``rounds`` x 10 keyed records (10 keys, incompressible ~100-byte values), one flush per
    round (a batch each); returns the log end offset."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 50, "acks": "all"}
    )
    for _ in range(rounds):
        for i in range(10):
            producer.produce(topic, key=b"k%d" % i, value=os.urandom(50).hex().encode(), partition=0)
        assert producer.flush(15) == 0
    return rounds * 10


def wait_compacted(
    bootstrap: str, topic: str, end: int, timeout_s: float = 15
) -> list[tuple[int, bytes | None, bytes | None]]:
    deadline = time.monotonic() + timeout_s
    got = consume_ck(bootstrap, topic, end)
    while len(got) >= end and time.monotonic() < deadline:
        time.sleep(0.2)
        got = consume_ck(bootstrap, topic, end)
    return got


def test_uncleanable_partition_does_not_starve_others(local: LocalCluster) -> None:
    """Kafka's ``markPartitionUncleanable``: the first gzip batch of one compacted partition is
    corrupted on disk (bit rot: nothing re-checks a CRC below the recovery point) before its
    segment rolls, so every clean of it raises. That partition is dirtier (and listed first), yet
    the other compacted topic is compacted; the failure is logged once; deleting and re-creating
    the topic makes it cleanable again."""
    bootstrap = local.bootstrap_servers
    bad, good = "uncleanable-bad", "uncleanable-good"
    create_compacted(bootstrap, bad)
    create_compacted(bootstrap, good)
    produce_rounds(bootstrap, bad, 1)  # the active segment: never cleaned before the corruption
    first = local.log_dir(1) / f"{bad}-0" / "00000000000000000000.log"
    with open(first, "r+b") as f:
        f.seek(61)  # the compressed records of batch 0, after its v2 header
        f.write(b"\xff\xff\xff\xff")
    produce_rounds(bootstrap, bad, 15)  # rolls segments: batch 0 becomes cleanable
    end = produce_rounds(bootstrap, good, 12)
    got = wait_compacted(bootstrap, good, end)
    assert len(got) < end, "the good topic was never compacted"
    assert {k for _, k, _ in got} == {b"k%d" % i for i in range(10)} and got[-1][0] == end - 1
    time.sleep(0.5)  # a few more cleaner passes (backoff 100 ms): the bad log is not retried
    marked = f"Marking its partition ({bad}-0) as uncleanable"
    output = local.output(1)
    assert output.count(marked) == 1, output[-3000:]
    assert "CORRUPT_MESSAGE" in output[output.index(marked) :]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([bad])[bad].result(timeout=15)
    deadline = time.monotonic() + 15
    while True:
        try:
            create_compacted(bootstrap, bad)
            break
        except confluent_kafka.KafkaException:  # still being deleted
            assert time.monotonic() < deadline
            time.sleep(0.1)
    end = produce_rounds(bootstrap, bad, 12)
    got = wait_compacted(bootstrap, bad, end)
    assert len(got) < end, "the re-created topic was never compacted"
    assert local.output(1).count(marked) == 1
