"""``KafkaProducer.send`` on both implementations (issue #10): the compiled ``_send_path`` and
its pure-Python reference ``send_path`` send the same corpus to a real broker process and must
give the same futures (partition, consecutive offsets, CreateTime), the same callbacks and the
same records read back; errors (record too large, bad partition, bad types, unknown topic,
closed producer, buffer.memory exhausted) are the same too."""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from concurrent.futures import Future, wait
from types import ModuleType
from typing import Any

import pytest

from spark_kafkalite.client import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    NewTopic,
    RecordMetadata,
    TopicPartition,
)
from spark_kafkalite.client.producer import kafka_producer
from spark_kafkalite.client.producer.partitioner import partition_for_key
from spark_kafkalite.protocol.errors import (
    InvalidPartitionsError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
)
from spark_kafkalite.protocol.native import pure_python_forced

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 3


def _module(name: str) -> ModuleType:
    if name == "native":
        if pure_python_forced():  # the producer's state classes are the pure-Python ones
            pytest.skip("KAFKALITE_PURE_PYTHON is set")
        try:
            return importlib.import_module("spark_kafkalite.client.producer._send_path")
        except ImportError as exc:  # .ci/run fails on an unbuilt module (protocol.native --require)
            pytest.skip(f"native _send_path not built: {exc}")
    return importlib.import_module("spark_kafkalite.client.producer.send_path")


@pytest.fixture(params=["native", "python"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    module = _module(request.param)
    monkeypatch.setattr(kafka_producer, "_send_path", module)
    yield module


def corpus(base_ts: int) -> list[dict[str, Any]]:
    """Every shape of record send() takes: bytes / str / bytearray / null keys and values,
    headers (list, dict, empty), explicit partitions and timestamps, 0-byte and larger values."""
    out: list[dict[str, Any]] = []
    for i in range(600):
        kind = i % 12
        rec: dict[str, Any] = {"value": f"value-{i}".encode() * (1 + i % 7)}
        if kind == 0:
            rec["key"] = None
        elif kind == 1:
            rec["key"] = f"str-key-{i % 13}"
        elif kind == 2:
            rec["key"] = bytearray(f"ba-{i % 5}".encode())
        else:
            rec["key"] = f"key-{i % 17}".encode()
        if kind == 3:
            rec["value"] = None
        elif kind == 4:
            rec["value"] = b""
        elif kind == 5:
            rec["value"] = "text value é"
        if kind == 6:
            rec["headers"] = [("h", b"1"), ("null", None)]
        elif kind == 7:
            rec["headers"] = {"k": "v"}
        elif kind == 8:
            rec["headers"] = []
        if kind == 9 or kind == 0 and i % 24 == 0:
            rec["partition"] = i % PARTITIONS
        if i % 5 == 0:
            rec["timestamp_ms"] = base_ts + i
        out.append(rec)
    return out


def _norm(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return value.encode() if isinstance(value, str) else bytes(value)


def _read(bootstrap: str, topic: str, expected: int) -> list[tuple[Any, ...]]:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    out: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                out.extend(
                    (tp.partition, r.offset, r.key, r.value, tuple(r.headers or ()), r.timestamp_ms)
                    for r in records
                )
    finally:
        consumer.close()
    return sorted(out)


def test_corpus_round_trip(impl: ModuleType, bootstrap_servers: str, unique_topic: str) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, PARTITIONS, 1)])
    base_ts = int(time.time() * 1000) - 60_000
    records = corpus(base_ts)
    called: list[tuple[int, RecordMetadata | None, BaseException | None]] = []
    config = {"bootstrap.servers": bootstrap_servers, "linger.ms": 20, "batch.size": 4096}
    with KafkaProducer(config) as producer:
        assert type(producer._send_path).__module__ == impl.__name__
        futures = []
        for i, rec in enumerate(records):
            cb = None
            if i % 3 == 0:

                def cb(md: RecordMetadata | None, exc: BaseException | None, i: int = i) -> None:
                    called.append((i, md, exc))

            futures.append(producer.send(unique_topic, callback=cb, **rec))
        producer.flush(30)
        metadata = [f.result(timeout=0) for f in futures]
    assert all(isinstance(f, Future) for f in futures)
    assert sorted(i for i, _md, _exc in called) == list(range(0, len(records), 3))
    assert all(exc is None and md == metadata[i] for i, md, exc in called)
    offsets: dict[int, list[int]] = {}
    for rec, md in zip(records, metadata, strict=True):
        assert md.topic == unique_topic
        key = _norm(rec.get("key"))
        if "partition" in rec:
            assert md.partition == rec["partition"]
        elif key is not None:
            assert md.partition == partition_for_key(key, PARTITIONS)
        if "timestamp_ms" in rec:
            assert md.timestamp_ms == rec["timestamp_ms"]
        else:
            assert abs(md.timestamp_ms - time.time() * 1000) < 60_000
        offsets.setdefault(md.partition, []).append(md.offset)
    for got in offsets.values():  # each partition: consecutive offsets in send order
        assert got == list(range(got[0], got[0] + len(got)))
    read = _read(bootstrap_servers, unique_topic, len(records))
    expected = []
    for rec, md in zip(records, metadata, strict=True):
        headers = rec.get("headers") or ()
        items = headers.items() if isinstance(headers, dict) else headers
        expected.append(
            (
                md.partition,
                md.offset,
                _norm(rec.get("key")),
                _norm(rec.get("value")),
                tuple((k, _norm(v)) for k, v in items),
                md.timestamp_ms,
            )
        )
    assert read == sorted(expected)


def test_errors(impl: ModuleType, bootstrap_servers: str, unique_topic: str) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, PARTITIONS, 1)])
    config = {
        "bootstrap.servers": bootstrap_servers,
        "max.request.size": 2000,
        "max.block.ms": 1500,
        "linger.ms": 0,
        "allow.auto.create.topics": False,
    }
    producer = KafkaProducer(config)
    try:
        assert producer.send(unique_topic, b"v", key=b"k").result(timeout=20).offset == 0
        errors: list[BaseException | None] = []
        too_large = producer.send(
            unique_topic, b"x" * 2000, key=b"k", callback=lambda md, e: errors.append(e)
        )
        with pytest.raises(MessageTooLargeError):
            too_large.result(timeout=5)
        assert len(errors) == 1 and isinstance(errors[0], MessageTooLargeError)
        with pytest.raises(InvalidPartitionsError):
            producer.send(unique_topic, b"v", key=b"k", partition=-1).result(timeout=5)
        with pytest.raises(KafkaError):  # partition 7 of a 3-partition topic never shows up
            producer.send(unique_topic, b"v", key=b"k", partition=7).result(timeout=10)
        with pytest.raises(TypeError):
            producer.send(unique_topic, 12345, key=b"k")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            producer.send(unique_topic, b"v", key=3.5)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="header keys"):
            producer.send(unique_topic, b"v", key=b"k", headers=[(1, b"x")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="header value"):
            producer.send(unique_topic, b"v", key=b"k", headers={"h": 5})  # type: ignore[dict-item]
        with pytest.raises((KafkaTimeoutError, KafkaError)):
            producer.send(unique_topic + "-missing", b"v", key=b"k").result(timeout=10)
        ok = producer.send(unique_topic, b"v", key=b"k")
        producer.flush(10)
        assert ok.result(timeout=0).offset >= 1
    finally:
        producer.close(10)
    with pytest.raises(KafkaError, match="closed"):
        producer.send(unique_topic, b"v", key=b"k")


def test_buffer_memory_back_pressure(impl: ModuleType, bootstrap_servers: str, unique_topic: str) -> None:
    """A tiny buffer.memory and a long linger: appends that do not fit wait for space (which
    makes the queued batches sendable at once, as Java's exhausted pool does) and then succeed;
    a record larger than buffer.memory fails at once."""
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, 1, 1)])
    config = {
        "bootstrap.servers": bootstrap_servers,
        "buffer.memory": 4000,
        "batch.size": 1_000_000,
        "linger.ms": 60_000,
        "max.block.ms": 10_000,
    }
    with KafkaProducer(config) as producer:
        producer.partitions_for(unique_topic)
        started = time.monotonic()
        futures = [producer.send(unique_topic, b"v" * 100, key=b"key-%d" % i) for i in range(100)]
        assert time.monotonic() - started < 8  # waited for space, not for linger.ms
        with pytest.raises(MessageTooLargeError, match="buffer.memory"):
            producer.send(unique_topic, b"v" * 5000, key=b"k").result(timeout=5)
        producer.flush(20)
        assert [f.result(timeout=0).offset for f in futures] == list(range(100))
        done, _ = wait(futures, timeout=0)
        assert len(done) == 100


def test_native_takes_the_common_record_itself(
    bootstrap_servers: str, unique_topic: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled path handles bytes/str/null keys and headers itself: the reference ``send``
    is called only for what it does not handle (here: a bytearray key)."""
    native = _module("native")
    reference = importlib.import_module("spark_kafkalite.client.producer.send_path")
    monkeypatch.setattr(kafka_producer, "_send_path", native)
    calls: list[str] = []
    original = reference.SendPath.send

    def counting(self: Any, topic: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(topic)
        return original(self, topic, *args, **kwargs)

    monkeypatch.setattr(reference.SendPath, "send", counting)
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, PARTITIONS, 1)])
    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5}) as producer:
        producer.partitions_for(unique_topic)
        futures = [producer.send(unique_topic, b"v", key=b"k%d" % i) for i in range(200)]
        futures += [producer.send(unique_topic, "text", key=None if i % 2 else "str") for i in range(50)]
        futures += [
            producer.send(unique_topic, b"v", key=b"k", partition=1, timestamp_ms=1) for _ in range(5)
        ]
        assert calls == []
        futures.append(producer.send(unique_topic, b"v", key=b"k", headers={"h": b"1"}))
        futures.append(producer.send(unique_topic, b"v", key=b"k", headers=[("h", "s"), ("n", None)]))
        assert calls == []
        futures.append(producer.send(unique_topic, b"v", key=bytearray(b"k")))
        assert calls == [unique_topic]
        producer.flush(20)
    assert all(f.exception(timeout=0) is None for f in futures)


def test_subclass_send_override_is_called(bootstrap_servers: str, unique_topic: str) -> None:
    """send is bound on the instance for speed, but never over a subclass's own send."""
    seen: list[bytes | None] = []

    class Audited(KafkaProducer):
        def send(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> Any:  # type: ignore[override]
            seen.append(key)
            return super().send(topic, value, key, **kwargs)

    with Audited({"bootstrap.servers": bootstrap_servers}) as producer:
        assert producer.send(unique_topic, b"v", key=b"k").result(timeout=20).offset == 0
    assert seen == [b"k"]


def test_callbacks_on_failure_and_raising_callbacks(
    impl: ModuleType, bootstrap_servers: str, unique_topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Records failed by a forced close call their callbacks with (None, error) in send order;
    a callback that raises is logged and the following ones still run."""
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, 1, 1)])
    producer = KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 60_000})
    producer.partitions_for(unique_topic)
    got: list[tuple[int, RecordMetadata | None, BaseException | None]] = []

    def record(i: int) -> Any:
        def cb(md: RecordMetadata | None, exc: BaseException | None) -> None:
            got.append((i, md, exc))
            if i == 3:
                raise RuntimeError("callback bug")

        return cb

    futures = [producer.send(unique_topic, b"v", key=b"k", callback=record(i)) for i in range(10)]
    producer.close(0)
    assert [i for i, _md, _exc in got] == list(range(10))
    assert all(md is None and isinstance(exc, KafkaError) for _i, md, exc in got)
    assert all(isinstance(f.exception(timeout=5), KafkaError) for f in futures)
    assert "producer callback failed" in caplog.text


def test_send_callback_with_done_callbacks_and_wait(
    impl: ModuleType, bootstrap_servers: str, unique_topic: str
) -> None:
    """A record with a send callback that also gets done-callbacks and a concurrent.futures
    waiter: each runs exactly once, the send callback first, in send order."""
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, 1, 1)])
    events: list[tuple[str, int]] = []
    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 50}) as producer:
        producer.partitions_for(unique_topic)
        futures = []
        for i in range(6):
            future = producer.send(
                unique_topic, b"v", key=b"k", callback=lambda md, exc, i=i: events.append(("send", i))
            )
            if i % 2:
                future.add_done_callback(lambda f, i=i: events.append(("done", i)))
            futures.append(future)
        done, not_done = wait(futures, timeout=20)
        assert not not_done
        producer.flush(10)
    expected: list[tuple[str, int]] = []
    for i in range(6):
        expected.append(("send", i))
        if i % 2:
            expected.append(("done", i))
    assert events == expected
    assert [f.result(timeout=0).offset for f in futures] == list(range(6))
