"""Rewriting one RecordBatch v2 with a subset of its records, as the log cleaner does (Kafka's
``MemoryRecords.filterTo`` building a batch with ``MemoryRecordsBuilder``).

The rewritten batch keeps the original base offset, partition leader epoch, attributes
(compression codec, timestamp type, transactional bit), producer id / epoch and base sequence,
and every retained record keeps its offset delta, so offsets are preserved and the batch may
have holes (``records_count <= last_offset_delta + 1``). ``last_offset_delta`` becomes the last
retained record's delta. Records are recompressed with the batch's own codec
(:func:`spark_kafkalite.protocol.record_batch.compress`). For LogAppendTime batches the max
timestamp is kept; for CreateTime it is recomputed from the retained records.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from spark_kafkalite.protocol.record_batch import RECORD_BATCH_OVERHEAD, DecodedBatch, compress

__all__ = ["rewrite_batch"]

_HEADER = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD = 12
_CRC_START = 21


def _varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _bytes_field(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zig-zag(-1)
    else:
        _varint(out, len(data))
        out += data


def rewrite_batch(decoded: DecodedBatch, keep: Sequence[int]) -> bytes:
    """The batch ``decoded`` reduced to the records at indices ``keep`` (ascending, non-empty).

    Raises:
        ValueError: ``keep`` is empty.
        UnsupportedCompressionTypeError: the batch's codec library is missing.
    """
    if not keep:
        raise ValueError("a rewritten batch needs at least one record")
    header = decoded.header
    base_offset = header.base_offset
    log_append_time = header.timestamp_type == 1
    first_ts = decoded.timestamps_ms[keep[0]]
    base_ts = header.base_timestamp if log_append_time else first_ts
    max_ts = header.max_timestamp if log_append_time else max(decoded.timestamps_ms[i] for i in keep)
    body = bytearray()
    rec = bytearray()
    for i in keep:
        rec.clear()
        rec.append(0)  # record attributes (unused in v2)
        _varint(rec, 0 if log_append_time else decoded.timestamps_ms[i] - base_ts)
        _varint(rec, decoded.offsets[i] - base_offset)
        _bytes_field(rec, decoded.keys[i])
        _bytes_field(rec, decoded.values[i])
        headers = decoded.headers[i]
        _varint(rec, len(headers))
        for hkey, hvalue in headers:
            _bytes_field(rec, hkey.encode("utf-8"))
            _bytes_field(rec, hvalue)
        _varint(body, len(rec))
        body += rec
    codec = header.compression_type
    payload = compress(bytes(body), codec) if codec else bytes(body)
    total = RECORD_BATCH_OVERHEAD + len(payload)
    out = bytearray(total)
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        total - _LOG_OVERHEAD,
        header.partition_leader_epoch,
        header.magic,
        0,
        header.attributes,
        decoded.offsets[keep[-1]] - base_offset,
        base_ts,
        max_ts,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        len(keep),
    )
    out[RECORD_BATCH_OVERHEAD:] = payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[_CRC_START:]))
    return bytes(out)
