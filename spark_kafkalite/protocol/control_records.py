"""Control records (KIP-98): the transaction markers a partition leader appends when a
transaction ends, and how readers recognise them.

* A control batch has attribute bit 5 set (bit 4, transactional, as well) and carries the
  producer id/epoch of the transaction, baseSequence -1, no compression and exactly one record
  (Kafka ``MemoryRecords.writeEndTransactionalMarker``).
* The record's key is int16 version (0) + int16 type: ABORT 0, COMMIT 1; other types (KRaft's
  2-6) are not transaction markers and are ignored by readers (``ControlRecordType.parse``).
* Its value is the ``EndTransactionMarker``: int16 version (0) + int32 coordinator epoch
  (``EndTransactionMarker.java``).
* Log cleaning can leave a control batch with no record; it is no marker (``ProducerAppendInfo``).
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from spark_kafkalite.protocol.errors import InvalidRecordError
from spark_kafkalite.protocol.record_batch import BatchHeader, Buffer, decode_batch, read_header
from spark_kafkalite.protocol.record_batch_writer import append_record, seal_batch
from spark_kafkalite.protocol.record_layout import ATTR_CONTROL, ATTR_TRANSACTIONAL

__all__ = [
    "ControlRecordType",
    "EndTransactionMarker",
    "control_record_type",
    "end_txn_marker_batch",
    "read_end_txn_marker",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
]

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CURRENT_VERSION = 0


class ControlRecordType(IntEnum):
    """Kafka ``ControlRecordType`` ids of the transaction markers."""

    ABORT = 0
    COMMIT = 1


def control_record_type(buf: Buffer, pos: int, header: BatchHeader) -> int | None:
    """The type of the control batch at ``pos`` (``header`` is its parsed header): its first
    record's key type (``ControlRecordType.ABORT`` / ``COMMIT`` for transaction markers), or
    None for a control batch without records (left by log cleaning) or with a key shorter than
    4 bytes (Kafka ``ControlRecordType.parse`` answers UNKNOWN for those).

    Raises:
        CorruptRecordError / InvalidRecordError: the batch does not decode.
    """
    if header.records_count <= 0:
        return None
    keys = decode_batch(buf, pos, verify_crc=False).keys
    if not keys or keys[0] is None or len(keys[0]) < _KEY.size:
        return None
    return int(_KEY.unpack_from(keys[0])[1])


def end_txn_marker_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int,
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One transaction marker batch (Kafka ``MemoryRecords.withEndTransactionMarker``): magic 2,
    CreateTime, transactional + control attributes, baseSequence -1, one record whose key is
    (version 0, COMMIT or ABORT) and value the ``EndTransactionMarker`` (version 0,
    ``coordinator_epoch``)."""
    body = bytearray()
    key = _KEY.pack(_CURRENT_VERSION, ControlRecordType.COMMIT if commit else ControlRecordType.ABORT)
    append_record(body, 0, 0, key, _VALUE.pack(_CURRENT_VERSION, coordinator_epoch), ())
    return seal_batch(
        body,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
        last_offset_delta=0,
        base_timestamp=timestamp_ms,
        max_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        records_count=1,
    )


class EndTransactionMarker(NamedTuple):
    """A parsed end-transaction marker (Kafka's ``EndTransactionMarker``): the control type
    (``ControlRecordType.ABORT`` / ``COMMIT``) and the coordinator epoch."""

    control_type: int
    coordinator_epoch: int

    @property
    def committed(self) -> bool:
        return self.control_type == ControlRecordType.COMMIT


def read_end_txn_marker(
    buf: Buffer, pos: int = 0, header: BatchHeader | None = None
) -> EndTransactionMarker | None:
    """The end-transaction marker of the batch at ``pos`` (no CRC check), or None when it is not
    a control batch, holds no record (cleaned), or its control type is neither ABORT nor COMMIT
    (KRaft-only types are ignored, as Kafka's ``ControlRecordType.UNKNOWN``). What a partition
    leader, follower and log recovery read from a marker (``ProducerAppendInfo.append``).

    Raises:
        InvalidRecordError: the control key or the marker value is shorter than its fixed layout
            (Kafka's ``ControlRecordType.parseTypeId`` / ``EndTransactionMarker.deserializeValue``).
        CorruptRecordError: the batch does not decode.
    """
    if header is None:
        header = read_header(buf, pos)
    if not header.is_control or header.records_count <= 0:
        return None
    decoded = decode_batch(buf, pos, verify_crc=False)
    if not decoded.keys:
        return None
    key = decoded.keys[0]
    if key is None or len(key) < _KEY.size:
        raise InvalidRecordError(f"control record key at offset {header.base_offset} is shorter than 4 bytes")
    control_type = _KEY.unpack_from(key)[1]
    if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    value = decoded.values[0]
    if value is None or len(value) < _VALUE.size:
        raise InvalidRecordError(
            f"end transaction marker at offset {header.base_offset} has a value shorter than 6 bytes"
        )
    return EndTransactionMarker(control_type, _VALUE.unpack_from(value)[1])
