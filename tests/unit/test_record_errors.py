"""KIP-467 per-record errors: the broker's per-record validation (Kafka's ``LogValidator``
``validateKey`` / ``validateTimestamp`` / ``processRecordErrors``) and our producer's handling of
``record_errors`` (Java ``Sender.failBatch`` since KAFKA-8729)."""

from __future__ import annotations

import time
from concurrent.futures import wait
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.apis.produce import validate_produce_batch
from broker.log.log_config import LogConfig
from broker.log.log_validator import raise_record_errors, record_errors_of
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.client.producer.producer_batch import ProducerBatch
from spark_kafkalite.client.producer.sender import INVALID_DIFFERENT_RECORD_MESSAGE, record_exceptions
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    RecordError,
)
from spark_kafkalite.protocol.record_batch import COMPRESSION_GZIP
from spark_kafkalite.protocol.record_encoding import MemoryRecordsBuilder

HOUR_MS = 3_600_000
NO_KEY = "Compacted topic cannot accept message without key in topic partition t-0."


def batch(records: list[tuple[bytes | None, int]], compression: int = 0) -> bytes:
    builder = MemoryRecordsBuilder()
    for key, timestamp in records:
        builder.append(key, b"v", timestamp, [])
    return bytes(builder.build(compression_type=compression))


# -- broker: which failures are per record ---------------------------------------------------


@pytest.mark.parametrize("compression", [0, COMPRESSION_GZIP])
def test_keyless_records_on_a_compacted_topic_are_named(compression: int) -> None:
    now = int(time.time() * 1000)
    data = batch([(None if i % 10 == 0 else b"k", now) for i in range(25)], compression)
    errors = record_errors_of(data, "t-0", compacted=True)
    assert errors == [(ErrorCode.invalid_record, RecordError(i, NO_KEY)) for i in (0, 10, 20)]
    assert record_errors_of(data, "t-0", compacted=False) == []
    with pytest.raises(InvalidRecordError) as info:
        raise_record_errors(errors)
    assert info.value.record_errors == tuple(e for _code, e in errors)
    assert info.value.message == (
        "One or more records have been rejected due to 3 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=0, message='{NO_KEY}'), "
        f"RecordError(batchIndex=10, message='{NO_KEY}'), RecordError(batchIndex=20, message='{NO_KEY}')]"
    )


def test_timestamps_out_of_range_are_named_and_win_over_keys() -> None:
    """validateKey comes first for a record; any timestamp error makes the batch INVALID_TIMESTAMP;
    a record with no timestamp (-1) is never out of range."""
    now = int(time.time() * 1000)
    data = batch([(b"k", now), (b"k", now + 2 * HOUR_MS), (None, now + 2 * HOUR_MS), (None, now), (b"k", -1)])
    errors = record_errors_of(data, "t-0", compacted=True, now_ms=now, timestamp_after_max_ms=HOUR_MS)
    assert [(code, e.batch_index) for code, e in errors] == [
        (ErrorCode.invalid_timestamp, 1),
        (ErrorCode.invalid_record, 2),
        (ErrorCode.invalid_record, 3),
    ]
    assert errors[0][1].batch_index_error_message == (
        f"Timestamp {now + 2 * HOUR_MS} of message with offset 1 is out of range. The timestamp should be "
        f"within [{now - (2**63 - 1)}, {now + HOUR_MS}]"
    )
    with pytest.raises(InvalidTimestampError, match="rejected due to invalid timestamp") as info:
        raise_record_errors(errors)
    assert [e.batch_index for e in info.value.record_errors] == [1, 2, 3]
    old = record_errors_of(
        batch([(b"k", now - 2 * HOUR_MS), (b"k", now)]),
        "t-0",
        compacted=False,
        now_ms=now,
        timestamp_before_max_ms=HOUR_MS,
    )
    assert [(code, e.batch_index) for code, e in old] == [(ErrorCode.invalid_timestamp, 0)]


def test_produce_validation_names_records_only_for_record_failures() -> None:
    now = int(time.time() * 1000)
    limits = {"message_max_bytes": 1 << 20, "api_version": 9, "timestamp_after_max_ms": HOUR_MS}
    data = batch([(b"k", now), (b"k", now + 2 * HOUR_MS), (b"k", now)])
    with pytest.raises(InvalidTimestampError) as info:
        validate_produce_batch(data, topic_partition=("t", 0), **limits)  # type: ignore[arg-type]
    assert [e.batch_index for e in info.value.record_errors] == [1]
    corrupt = bytearray(batch([(b"k", now), (b"k", now)]))
    corrupt[-1] ^= 1  # a bad CRC fails the batch as a whole
    with pytest.raises(CorruptRecordError) as corrupt_info:
        validate_produce_batch(bytes(corrupt), topic_partition=("t", 0), **limits)  # type: ignore[arg-type]
    assert corrupt_info.value.record_errors == ()
    assert validate_produce_batch(batch([(b"k", now)]), **limits).records_count == 1  # type: ignore[arg-type]


def test_compacted_log_refuses_the_whole_batch_and_names_the_keyless_records(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(cleanup_policy=("compact",)))
    try:
        now = int(time.time() * 1000)
        with pytest.raises(InvalidRecordError) as info:
            log.append_as_leader(bytearray(batch([(b"a", now), (None, now), (b"b", now)])), 0)
        assert info.value.record_errors == (RecordError(1, NO_KEY),)
        assert log.log_end_offset == 0  # nothing of the batch was appended
        log.append_as_leader(bytearray(batch([(b"a", now)])), 0)
        assert log.log_end_offset == 1
    finally:
        log.close()


# -- client: Java's Sender.failBatch -----------------------------------------------------------


def wire_errors(*errors: tuple[int, str | None]) -> list[SimpleNamespace]:
    """Record errors as kio decodes them (``BatchIndexAndErrorMessage``)."""
    return [SimpleNamespace(batch_index=i, batch_index_error_message=m) for i, m in errors]


def test_named_records_fail_with_invalid_record_the_others_with_a_generic_error() -> None:
    by_index, other = record_exceptions(87, "top", wire_errors((0, "no key"), (3, None)))
    assert set(by_index) == {0, 3}
    assert type(by_index[0]) is InvalidRecordError and by_index[0].message == "no key"
    assert type(by_index[3]) is InvalidRecordError and by_index[3].message == "top"  # the partition's message
    assert type(other) is KafkaError and other.message == INVALID_DIFFERENT_RECORD_MESSAGE


def test_a_single_named_record_takes_the_partition_error() -> None:
    by_index, _other = record_exceptions(ErrorCode.invalid_timestamp, None, wire_errors((2, "too late")))
    assert type(by_index[2]) is InvalidTimestampError and by_index[2].message == "too late"
    by_index, _other = record_exceptions(ErrorCode.invalid_timestamp, None, wire_errors((2, None)))
    assert by_index[2].message == "INVALID_TIMESTAMP"  # no message at all: the code's name


def test_record_futures_and_callbacks_see_their_own_error() -> None:
    batch_ = ProducerBatch(TopicPartition("t", 0), time.time() * 1000, 0)
    futures = [batch_.try_append(((b"k", b"v", 1, None)), 30, 16384) for _ in range(4)]
    assert all(f is not None for f in futures)
    seen: list[BaseException | None] = []
    futures[1].add_done_callback(lambda f: seen.append(f.exception()))  # type: ignore[union-attr]
    top = InvalidRecordError("top")
    by_index, other = record_exceptions(87, "top", wire_errors((1, "bad one"), (2, "bad two")))
    assert batch_.fail(top, (by_index, other))
    done, _ = wait(futures, timeout=1)  # type: ignore[arg-type]
    assert len(done) == 4
    errors = [f.exception() for f in futures]  # type: ignore[union-attr]
    assert errors == [other, by_index[1], by_index[2], other]
    assert seen == [by_index[1]]
    with pytest.raises(InvalidRecordError, match="bad two"):
        futures[2].result()  # type: ignore[union-attr]
    assert batch_.result().exception() is top  # the batch as a whole: the partition's error
    whole = ProducerBatch(TopicPartition("t", 0), time.time() * 1000, 0)
    future = whole.try_append(((b"k", b"v", 1, None)), 30, 16384)
    whole.fail(top)
    assert future.exception() is top  # type: ignore[union-attr]
