"""Per-record validation of a produced batch: Kafka's ``LogValidator.validateRecord`` and
``processRecordErrors`` (KIP-467, KAFKA-8729).

Kafka walks every record of a client batch and collects one ``RecordError`` (index in the batch,
message) per record that fails: a record without a key on a compacted topic (``validateKey``:
``INVALID_RECORD``) or a CreateTime out of ``message.timestamp.before/after.max.ms``
(``validateTimestamp``: ``INVALID_TIMESTAMP``). Any such record rejects the whole batch (nothing of
it is appended) with a ``RecordValidationException``: ``INVALID_TIMESTAMP`` if one of the errors is
a timestamp, else ``INVALID_RECORD``, and the ProduceResponse (v8+) lists the records in
``record_errors`` and the exception's message in ``error_message``. Failures of the batch as a
whole (CRC, framing, magic, counts, size, control batch, sequence) stay batch errors without
record errors.

Here the records are looked at only when the batch needs it (per batch, not per record, on the
produce path): always on a compacted topic (the batch is decoded for the key check anyway), else
only once the batch header says a timestamp is out of range, to name the records.
"""

from __future__ import annotations

from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    RecordError,
)
from spark_kafkalite.protocol.record_batch import decode_batch, read_header

__all__ = ["check_keys_for_compaction", "raise_record_errors", "record_errors_of"]

_LONG_MAX = 2**63 - 1

ApiRecordError = tuple[ErrorCode, RecordError]
"""Kafka's ``LogValidator.ApiRecordError``: the error code a record earns and its ``RecordError``."""


def record_errors_of(
    batch: bytes | bytearray | memoryview,
    topic_partition: str,
    *,
    compacted: bool,
    now_ms: int = 0,
    timestamp_before_max_ms: int = _LONG_MAX,
    timestamp_after_max_ms: int = _LONG_MAX,
) -> list[ApiRecordError]:
    """The records of one client RecordBatch v2 (CRC and framing already checked) that Kafka's
    ``LogValidator.validateRecord`` rejects, in batch order, with Kafka's messages: a keyless
    record when ``compacted`` (``validateKey``, checked first), else a CreateTime more than
    ``timestamp_before_max_ms`` before or ``timestamp_after_max_ms`` after ``now_ms``
    (``validateTimestamp``; -1, no timestamp, is never out of range). ``topic_partition`` is
    ``"<topic>-<partition>"`` as in Kafka's messages. Decodes (and decompresses) the batch.

    Raises:
        CorruptRecordError: a record that cannot be decoded.
    """
    decoded = decode_batch(batch, verify_crc=False)
    keys = decoded.keys
    timestamps = decoded.timestamps_ms
    low = now_ms - timestamp_before_max_ms if timestamp_before_max_ms != _LONG_MAX else None
    high = now_ms + timestamp_after_max_ms if timestamp_after_max_ms != _LONG_MAX else None
    check_keys = compacted and None in keys
    check_timestamps = bool(timestamps) and (
        (low is not None and min(timestamps) < low) or (high is not None and max(timestamps) > high)
    )
    if not check_keys and not check_timestamps:  # the common case: no per-record loop
        return []
    errors: list[ApiRecordError] = []
    for index, (key, timestamp) in enumerate(zip(keys, timestamps, strict=True)):
        if check_keys and key is None:
            errors.append(
                (
                    ErrorCode.invalid_record,
                    RecordError(
                        index,
                        f"Compacted topic cannot accept message without key in topic partition {topic_partition}.",
                    ),
                )
            )
        elif (
            check_timestamps
            and timestamp != -1
            and ((low is not None and timestamp < low) or (high is not None and timestamp > high))
        ):
            errors.append(
                (
                    ErrorCode.invalid_timestamp,
                    RecordError(
                        index,
                        f"Timestamp {timestamp} of message with offset {decoded.offsets[index]} is out of "
                        f"range. The timestamp should be within [{now_ms - timestamp_before_max_ms}, "
                        f"{now_ms + timestamp_after_max_ms}]",
                    ),
                )
            )
    return errors


def raise_record_errors(errors: list[ApiRecordError]) -> None:
    """Kafka's ``LogValidator.processRecordErrors``: no-op without errors, else raise the batch's
    error carrying them as ``record_errors``.

    Raises:
        InvalidTimestampError: one of ``errors`` is a timestamp
            ("One or more records have been rejected due to invalid timestamp").
        InvalidRecordError: otherwise, its message listing the first three record errors.
    """
    if not errors:
        return
    record_errors = tuple(record_error for _code, record_error in errors)
    exc: KafkaError
    if any(code == ErrorCode.invalid_timestamp for code, _record_error in errors):
        exc = InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp", record_errors=record_errors
        )
    else:
        shown = ", ".join(str(record_error) for record_error in record_errors[:3])
        exc = InvalidRecordError(
            f"One or more records have been rejected due to {len(record_errors)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]",
            record_errors=record_errors,
        )
    raise exc


def check_keys_for_compaction(batch: bytes | bytearray | memoryview, log_name: str) -> None:
    """Kafka's ``LogValidator.validateKey`` for a batch appended to a compacted topic: every
    record needs a key (decodes the batch; control batches are exempt).

    Raises:
        InvalidRecordError: with ``record_errors`` naming each keyless record.
    """
    if read_header(batch).is_control:
        return
    raise_record_errors(record_errors_of(batch, log_name, compacted=True))
