"""The exactly-once sink's pure logic (``datasource/exactly_once.py``): options and their conflicts,
transactional-id derivation, the batch marker, the skip decision, and the order of the task
protocol (fence, then check, then write and record) against a recording fake producer."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.types import TopicPartition as TP
from spark_kafkalite.datasource.errors import KafkaLiteWriteError
from spark_kafkalite.datasource.exactly_once import (
    ExactlyOnceOptions,
    Marker,
    TaskIdentity,
    committed_marker,
    decide,
    decode_marker,
    encode_marker,
    marker_group,
    task_identity,
    transactional_id,
    write_task,
)
from spark_kafkalite.datasource.options import KafkaLiteOptionError, parse_sink_options
from spark_kafkalite.protocol.errors import ProducerFencedError

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}
EOS = {**BASE, "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": "orders"}


def test_at_least_once_is_the_default() -> None:
    assert parse_sink_options(BASE).exactly_once is None
    assert (
        parse_sink_options({**BASE, "deliveryGuarantee": "AT-LEAST-ONCE"}, streaming=True).exactly_once
        is None
    )


def test_exactly_once_options() -> None:
    stream = parse_sink_options({**EOS, "DeliveryGuarantee": "Exactly-Once"}, streaming=True)
    assert stream.exactly_once == ExactlyOnceOptions("orders", None)
    batch = parse_sink_options({**EOS, "batchId": " 42 "})
    assert batch.exactly_once == ExactlyOnceOptions("orders", 42)


@pytest.mark.parametrize(
    ("options", "streaming", "names"),
    [
        ({**BASE, "deliveryGuarantee": "exactly_once"}, True, "'deliveryGuarantee'"),
        ({**BASE, "deliveryGuarantee": "exactly-once"}, True, "'transactionalIdPrefix'"),
        (
            {**BASE, "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": " "},
            True,
            "'transactionalIdPrefix'",
        ),
        ({**BASE, "transactionalIdPrefix": "x"}, True, "'transactionalIdPrefix'"),
        ({**BASE, "batchId": "1"}, False, "'batchId'"),
        ({**BASE, "kafka.transactional.id": "t"}, False, "'kafka.transactional.id'"),
        ({**EOS, "kafka.transactional.id": "t"}, True, "'kafka.transactional.id'"),
        ({**EOS, "kafka.enable.idempotence": "false"}, True, "'kafka.enable.idempotence=false'"),
        ({**EOS, "kafka.acks": "1"}, True, "'kafka.acks'"),
        (EOS, False, "'batchId'"),
        ({**EOS, "batchId": "1"}, True, "'batchId'"),
        ({**EOS, "batchId": "-1"}, False, "'batchId'"),
        ({**EOS, "batchId": "x"}, False, "'batchId'"),
        ({**EOS, "batchId": str(2**63)}, False, "'batchId'"),
    ],
)
def test_conflicting_options_fail_naming_the_option(
    options: dict[str, str], streaming: bool, names: str
) -> None:
    with pytest.raises(KafkaLiteOptionError, match=names):
        parse_sink_options(options, streaming=streaming)


def test_acks_all_spellings_are_accepted() -> None:
    for acks in ("all", "-1", "ALL"):
        assert parse_sink_options({**EOS, "kafka.acks": acks}, streaming=True).exactly_once is not None


def test_transactional_id_and_marker_group() -> None:
    assert transactional_id("orders", "5e1c-q", 3) == "orders-5e1c-q-3"
    assert transactional_id("orders", None, 0) == "orders-0"
    assert marker_group("orders-0") == "orders-0"


def test_marker_round_trip_and_foreign_metadata() -> None:
    text = encode_marker(Marker(7, 2, 10))
    assert text == '{"batchId":7,"records":2,"sink":"kafkalite","v":1,"valueBytes":10}'
    assert decode_marker(text) == Marker(7, 2, 10)
    assert decode_marker(encode_marker(Marker(2**63 - 1, 0, 0))) == Marker(2**63 - 1, 0, 0)
    # written before the counts were recorded: unknown counts
    assert decode_marker('{"batchId":7,"sink":"kafkalite","v":1}') == Marker(7, None, None)
    assert decode_marker('{"batchId":7,"records":-1,"sink":"kafkalite","v":1,"valueBytes":"x"}') == Marker(7)
    for foreign in (
        None,
        "",
        "not json",
        "[1]",
        '{"batchId":7}',
        '{"batchId":7,"sink":"other","v":1}',
        '{"batchId":7,"sink":"kafkalite","v":2}',
        '{"batchId":-1,"sink":"kafkalite","v":1}',
        '{"batchId":true,"sink":"kafkalite","v":1}',
        '{"batchId":"7","sink":"kafkalite","v":1}',
    ):
        assert decode_marker(foreign) is None, foreign


def test_committed_marker_is_the_highest_batch() -> None:
    offsets = {
        TP("a", 0): OffsetAndMetadata(3, metadata=encode_marker(Marker(3, 1, 1))),
        TP("b", 1): OffsetAndMetadata(5, metadata=encode_marker(Marker(5, 4, 8))),
        TP("c", 0): OffsetAndMetadata(9, metadata="someone else's"),
    }
    assert committed_marker("g", offsets) == Marker(5, 4, 8)
    assert committed_marker("g", {}) is None
    assert committed_marker("g", {TP("c", 0): OffsetAndMetadata(9, metadata="")}) is None


def test_decide() -> None:
    assert decide("t", None, 0) == "write"
    assert decide("t", 4, 5) == "write"
    assert decide("t", 5, 5) == "skip"
    with pytest.raises(KafkaLiteWriteError, match="already committed batch 6, later than this batch 5"):
        decide("t", 6, 5)


def test_task_identity() -> None:
    props = {"streaming.sql.batchId": "12", "sql.streaming.queryId": "q-1"}
    stream = task_identity(ExactlyOnceOptions("p"), 4, props.get, streaming=True)
    assert stream == TaskIdentity("p-q-1-4", 12, 4)
    batch = task_identity(ExactlyOnceOptions("p", 9), 2, {}.get, streaming=False)
    assert batch == TaskIdentity("p-2", 9, 2)
    with pytest.raises(KafkaLiteWriteError, match="streaming.sql.batchId"):
        task_identity(ExactlyOnceOptions("p"), 0, {"sql.streaming.queryId": "q"}.get, streaming=True)


class FakeProducer:
    """Records the calls of the task protocol; ``fail_on`` raises in that method."""

    def __init__(self, calls: list[Any], fail_on: str | None = None) -> None:
        self.calls = calls
        self.fail_on = fail_on

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, *args))
        if name == self.fail_on:
            raise RuntimeError(f"{name} failed")

    def init_transactions(self) -> None:
        self._call("init")

    def begin_transaction(self) -> None:
        self._call("begin")

    def send_offsets_to_transaction(self, offsets: dict[TP, Any], group: str) -> None:
        self._call("send_offsets", offsets, group)

    def commit_transaction(self) -> None:
        self._call("commit")

    def abort_transaction(self) -> None:
        self._call("abort")

    def close(self, timeout_s: float | None = None) -> None:
        self._call("close", timeout_s)


def _rows(*sizes: int) -> list[pa.RecordBatch]:
    return [pa.RecordBatch.from_arrays([pa.array([b"v"] * n, pa.binary())], names=["value"]) for n in sizes]


def _run(
    batches: list[pa.RecordBatch], committed: int | Marker | None, fail_on: str | None = None
) -> tuple[list[Any], Any]:
    calls: list[Any] = []
    identity = TaskIdentity("p-q-1", 5, 1)

    def new_producer(txn_id: str) -> FakeProducer:
        calls.append(("new_producer", txn_id))
        return FakeProducer(calls, fail_on)

    def read_offsets(group: str) -> dict[TP, OffsetAndMetadata]:
        calls.append(("read_offsets", group))
        if committed is None:
            return {}
        marker = committed if isinstance(committed, Marker) else Marker(committed)
        return {TP("out", 0): OffsetAndMetadata(marker.batch_id, metadata=encode_marker(marker))}

    def send_rows(rows: Any, producer: Any) -> tuple[int, TP]:
        n = sum(b.num_rows for b in rows)
        calls.append(("send_rows", n))
        if fail_on == "send_rows":
            raise RuntimeError("send failed")
        return n, TP("out", 2)

    outcome = write_task(
        batches,
        identity,
        new_producer=new_producer,
        read_offsets=read_offsets,
        send_rows=send_rows,
        offset_and_metadata=OffsetAndMetadata,
        transaction_timeout_ms=60000,
    )
    return calls, outcome


def test_write_path_fences_then_checks_then_writes_and_records() -> None:
    calls, outcome = _run(_rows(0, 3, 2), committed=4)
    marker = {TP("out", 2): OffsetAndMetadata(5, metadata=encode_marker(Marker(5, 5, 5)))}
    assert calls == [
        ("new_producer", "p-q-1"),
        ("init",),
        ("read_offsets", "p-q-1"),
        ("begin",),
        ("send_rows", 5),
        ("send_offsets", marker, "p-q-1"),
        ("commit",),
        ("close", None),
    ]
    assert (outcome.records, outcome.skipped) == (5, False)


def test_committed_batch_is_skipped_after_fencing() -> None:
    for committed in (Marker(5, 3, 3), Marker(5)):  # the same rows; a marker without counts
        calls, outcome = _run(_rows(1, 2), committed=committed)
        assert calls == [("new_producer", "p-q-1"), ("init",), ("read_offsets", "p-q-1"), ("close", None)]
        assert (outcome.records, outcome.skipped) == (0, True)


@pytest.mark.parametrize(
    ("committed", "rows"),
    [(Marker(5, 4, 4), "3 rows (3 value bytes)"), (Marker(5, 3, 7), "3 rows (3 value bytes)")],
)
def test_a_rerun_with_other_rows_fails_instead_of_skipping(committed: Marker, rows: str) -> None:
    with pytest.raises(KafkaLiteWriteError) as info:
        _run(_rows(3), committed=committed)
    message = str(info.value)
    assert f"Spark partition 1 ('p-q-1') committed batch 5 with {committed.records} rows" in message
    assert f"this re-run of batch 5 gives it {rows}" in message
    assert "deterministic re-run" in message


def test_no_rows_means_no_kafka_io() -> None:
    calls, outcome = _run(_rows(0, 0), committed=None)
    assert calls == []
    assert (outcome.records, outcome.skipped) == (0, False)


def _protocol(fail_on: str) -> list[str]:
    """The calls of a one-row task whose ``fail_on`` step raises (the error propagates)."""
    calls: list[Any] = []
    producer = FakeProducer(calls, fail_on=fail_on)

    def send_rows(rows: Any, _producer: Any) -> tuple[int, TP]:
        calls.append(("send_rows",))
        if fail_on == "send_rows":
            raise RuntimeError("send_rows failed")
        return sum(b.num_rows for b in rows), TP("out", 0)

    with pytest.raises(RuntimeError, match=f"{fail_on} failed"):
        write_task(
            _rows(1),
            TaskIdentity("t-0", 1, 0),
            new_producer=lambda _txn: producer,
            read_offsets=lambda _g: {},
            send_rows=send_rows,
            offset_and_metadata=OffsetAndMetadata,
            transaction_timeout_ms=60000,
        )
    assert calls[-1] == ("close", 0)  # at once: a graceful close could wait forever
    return [c[0] for c in calls]


def test_a_failure_inside_the_transaction_aborts_it_and_closes() -> None:
    assert _protocol("send_rows") == ["init", "begin", "send_rows", "abort", "close"]
    assert _protocol("commit") == ["init", "begin", "send_rows", "send_offsets", "commit", "abort", "close"]


def test_a_failed_abort_does_not_mask_the_error() -> None:
    calls: list[Any] = []

    class AbortFails(FakeProducer):
        def abort_transaction(self) -> None:
            raise RuntimeError("fenced")

    producer = AbortFails(calls, fail_on="commit")
    with pytest.raises(RuntimeError, match="commit failed"):
        write_task(
            _rows(1),
            TaskIdentity("t-0", 1, 0),
            new_producer=lambda _txn: producer,
            read_offsets=lambda _g: {},
            send_rows=lambda rows, _p: (1, TP("out", 0)),
            offset_and_metadata=OffsetAndMetadata,
            transaction_timeout_ms=60000,
        )
    assert calls[-1] == ("close", 0)


def test_a_failed_fence_closes_without_abort() -> None:
    assert _protocol("init") == ["init", "close"]


@pytest.mark.parametrize("timeout_ms", [0, 60000])
def test_a_fenced_commit_after_the_transaction_timeout_names_the_timeout(timeout_ms: int) -> None:
    class CommitFenced(FakeProducer):
        def commit_transaction(self) -> None:
            raise ProducerFencedError("there is a newer producer with the same transactional.id")

    calls: list[Any] = []
    with pytest.raises((KafkaLiteWriteError, ProducerFencedError)) as info:
        write_task(
            _rows(1),
            TaskIdentity("t-4", 9, 4),
            new_producer=lambda _txn: CommitFenced(calls),
            read_offsets=lambda _g: {},
            send_rows=lambda rows, _p: (1, TP("out", 0)),
            offset_and_metadata=OffsetAndMetadata,
            transaction_timeout_ms=timeout_ms,
        )
    assert [c[0] for c in calls] == ["init", "begin", "send_offsets", "abort", "close"]
    if timeout_ms:  # within the timeout: a real fencing, reported as it is
        assert type(info.value) is ProducerFencedError
    else:
        assert type(info.value) is KafkaLiteWriteError
        assert "'t-4' (batch 9, Spark partition 4) was open" in str(info.value)
        assert "longer than kafka.transaction.timeout.ms (0 ms)" in str(info.value)
        assert isinstance(info.value.__cause__, ProducerFencedError)
