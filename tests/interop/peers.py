"""Produce / consume helpers for the interop tests, using independent Kafka clients only:
confluent-kafka (librdkafka) and kafka-python (api_version negotiated automatically)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import confluent_kafka
import kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic


@dataclass(frozen=True)
class Msg:
    """One record as the tests compare it."""

    partition: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...]


def make_messages(count: int, partitions: int, seed: int = 7, null_headers: bool = True) -> list[Msg]:
    """Deterministic records: null keys / values (never both) / header values sprinkled in, binary
    payloads of varied sizes, explicit partitions and increasing CreateTime timestamps.
    ``null_headers=False`` for kafka-python producers (they reject None header values)."""
    rng = random.Random(seed)
    base_ts = int(time.time() * 1000) - 3_600_000
    out = []
    for i in range(count):
        key = None if i % 7 == 0 else f"key-{i}".encode()
        value = None if i % 13 == 5 and key is not None else rng.randbytes(rng.choice((0, 1, 10, 100, 700)))
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if i % 3 == 0:
            headers = (("h1", f"v{i}".encode()), ("empty", b""), ("null", None if null_headers else b"-"))
        elif i % 3 == 1:
            headers = (("dup", b"a"), ("dup", b"b"))
        out.append(Msg(i % partitions, key, value, base_ts + i * 3, headers))
    return out


def by_partition(messages: list[Msg]) -> dict[int, list[Msg]]:
    result: dict[int, list[Msg]] = {}
    for m in messages:
        result.setdefault(m.partition, []).append(m)
    return result


def ck_create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([CkNewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)


# -- confluent-kafka -----------------------------------------------------------------------------
def ck_produce(bootstrap: str, topic: str, messages: list[Msg], acks: str, compression: str = "none") -> None:
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "compression.type": compression,
            "linger.ms": 5,
            "enable.idempotence": False,
        }
    )
    for m in messages:
        producer.produce(
            topic,
            value=m.value,
            key=m.key,
            partition=m.partition,
            timestamp=m.timestamp_ms,
            headers=list(m.headers) or None,
            on_delivery=on_delivery,
        )
        producer.poll(0)
    assert producer.flush(30) == 0, "messages left undelivered"
    assert not errors, errors[:5]


def ck_consume(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 30
) -> list[Msg]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "interop-unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    out: list[Msg] = []
    offsets: dict[int, list[int]] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=1000, timeout=0.1):
                assert m.error() is None, m.error()
                ts_type, ts = m.timestamp()
                assert ts_type == confluent_kafka.TIMESTAMP_CREATE_TIME
                headers = tuple((k, v) for k, v in (m.headers() or []))
                out.append(Msg(m.partition(), m.key(), m.value(), ts, headers))
                offsets.setdefault(m.partition(), []).append(m.offset())
    finally:
        consumer.close()
    for p, offs in offsets.items():
        assert offs == list(range(len(offs))), f"partition {p}: offsets not contiguous from 0"
    return out


# -- kafka-python ------------------------------------------------------------------------------
def kp_produce(
    bootstrap: str, topic: str, messages: list[Msg], acks: int | str, compression: str | None = None
) -> None:
    # kafka-python 3 enables idempotence for acks=all by default; that needs InitProducerId,
    # which the broker does not implement yet (idempotent producers are a later issue).
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap,
        acks=acks,
        linger_ms=5,
        compression_type=compression,
        enable_idempotence=False,
    )
    try:
        futures = [
            producer.send(
                topic,
                value=m.value,
                key=m.key,
                partition=m.partition,
                timestamp_ms=m.timestamp_ms,
                headers=list(m.headers),
            )
            for m in messages
        ]
        producer.flush(30)
        for f in futures:
            f.get(timeout=30)
    finally:
        producer.close(5)


def kp_consume(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 30
) -> list[Msg]:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    tps = [kafka.TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    out: list[Msg] = []
    offsets: dict[int, list[int]] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500, max_records=2000).items():
                for r in records:
                    assert r.timestamp_type == 0
                    out.append(
                        Msg(tp.partition, r.key, r.value, r.timestamp, tuple((k, v) for k, v in r.headers))
                    )
                    offsets.setdefault(tp.partition, []).append(r.offset)
    finally:
        consumer.close()
    for p, offs in offsets.items():
        assert offs == list(range(len(offs))), f"partition {p}: offsets not contiguous from 0"
    return out
