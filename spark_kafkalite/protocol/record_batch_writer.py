"""RecordBatch v2 encoding (Kafka's ``DefaultRecord.writeTo`` and ``DefaultRecordBatch
.writeHeader``): records appended to a records section, then sealed into a batch with its header
(compressed as a whole when the codec is not none) and its CRC-32C. Layout: see
:mod:`spark_kafkalite.protocol.record_batch`. Used to build whole batches (tests, the broker's
control and coordinator records, the cleaner's rewritten batches, recompression); the producer's
hot path appends through ``MemoryRecordsBuilder`` (``record_encoding``).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c as _crc32c

from spark_kafkalite.protocol.compression import COMPRESSION_NONE, compress
from spark_kafkalite.protocol.record_batch import Buffer, Header
from spark_kafkalite.protocol.record_layout import (
    ATTR_COMPRESSION_MASK,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    LOG_OVERHEAD,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    batch_attributes,
)
from spark_kafkalite.protocol.varint import write_varint

__all__ = ["RecordTuple", "encode_batch", "append_record", "seal_batch"]

RecordTuple = tuple[bytes | None, bytes | None, int, Sequence[Header]]
"""(key, value, timestamp_ms, headers) of one record to encode."""


def _write_nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zig-zag(-1)
    else:
        write_varint(out, len(data))
        out += data


def encode_batch(
    records: Sequence[RecordTuple],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression_type: int = COMPRESSION_NONE,
    timestamp_type: int = 0,
    is_transactional: bool = False,
) -> bytes:
    """Encode ``records`` (key, value, timestamp_ms, headers) as one RecordBatch v2.

    Raises:
        ValueError: ``records`` is empty.
        UnsupportedCompressionTypeError: the codec's library is missing.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    base_ts = min(r[2] for r in records)
    max_ts = max(r[2] for r in records)
    body = bytearray()
    for offset_delta, (key, value, ts, headers) in enumerate(records):
        append_record(body, ts - base_ts, offset_delta, key, value, headers)
    return seal_batch(
        body,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=batch_attributes(compression_type, timestamp_type, is_transactional),
        last_offset_delta=len(records) - 1,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )


def append_record(
    body: bytearray,
    timestamp_delta: int,
    offset_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header],
) -> None:
    """Append one length-prefixed Record v2 to ``body`` (Kafka's ``DefaultRecord.writeTo``:
    attributes 0, varint deltas, varint-length key / value / headers, -1 for null)."""
    rec = bytearray(b"\x00")  # record attributes (unused in v2)
    write_varint(rec, timestamp_delta)
    write_varint(rec, offset_delta)
    _write_nullable_bytes(rec, key)
    _write_nullable_bytes(rec, value)
    write_varint(rec, len(headers))
    for hkey, hvalue in headers:
        _write_nullable_bytes(rec, hkey.encode("utf-8"))
        _write_nullable_bytes(rec, hvalue)
    write_varint(body, len(rec))
    body += rec


def seal_batch(
    body: Buffer,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
    level: int | None = None,
) -> bytes:
    """A RecordBatch v2 around the records section ``body`` (Kafka's ``DefaultRecordBatch
    .writeHeader``): compressed with the codec in ``attributes`` at ``level`` (None: the codec's
    default), header packed, CRC-32C over attributes..end.

    Raises:
        UnsupportedCompressionTypeError: the codec's library is missing.
    """
    codec = attributes & ATTR_COMPRESSION_MASK
    payload = compress(bytes(body), codec, level) if codec else body
    total = RECORD_BATCH_OVERHEAD + len(payload)
    out = bytearray(total)
    HEADER.pack_into(
        out,
        0,
        base_offset,
        total - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    out[RECORD_BATCH_OVERHEAD:] = payload
    struct.pack_into(">I", out, CRC_OFFSET, _crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)
