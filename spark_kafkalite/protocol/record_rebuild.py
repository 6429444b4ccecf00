"""Pure-Python rebuilding of a records section with fresh offsets and timestamp deltas: the
reference and the fallback of the compiled ``_record_rebuild`` extension, with the same API (one
test corpus runs against both; :mod:`spark_kafkalite.protocol.native` picks one).

This is the record part of Kafka's ``LogValidator.buildRecordsAndAssignOffsets``: a leader that
cannot keep a produced batch as it is (its codec differs from the topic's ``compression.type``)
appends each record again with ``MemoryRecordsBuilder.appendWithOffset``, which writes it as
``DefaultRecord.writeTo`` does: attributes 0, offset delta = its index in the batch, timestamp
delta from the first record's timestamp (the new ``baseTimestamp``); key, value and headers are
unchanged, so their bytes are copied as they are. Record layout: see
:mod:`spark_kafkalite.protocol.record_batch`.
"""

from __future__ import annotations

from typing import Any

from spark_kafkalite.protocol.errors import CorruptRecordError
from spark_kafkalite.protocol.varint import write_varint

__all__ = ["rebuild_records", "IMPLEMENTATION"]

IMPLEMENTATION = "pure-python"

_MASK64 = (1 << 64) - 1
_SIGN64 = 1 << 63


def _wrap64(value: int) -> int:
    """``value`` as a Java long (two's complement overflow)."""
    value &= _MASK64
    return value - (1 << 64) if value & _SIGN64 else value


def _varlong(data: Any, p: int, limit: int) -> tuple[int, int]:
    """Zig-zag varlong at ``p`` (at most 10 bytes) before ``limit``: (value, position after)."""
    result = 0
    shift = 0
    while True:
        if p >= limit:
            raise CorruptRecordError("record batch ends inside a record")
        b = data[p]
        p += 1
        if shift < 64:
            result |= (b & 0x7F) << shift
        if b < 0x80:
            result &= _MASK64
            return (result >> 1) ^ -(result & 1), p
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint too long in record")


def _length(data: Any, p: int, limit: int) -> tuple[int, int]:
    """A record's length: a zig-zag varint of 32 bits (at most 5 bytes; Kafka's
    ``ByteUtils.readVarint``, as the framing walk reads it)."""
    result = 0
    for shift in range(0, 35, 7):
        if p >= limit:
            raise CorruptRecordError("record batch ends inside a record length")
        b = data[p]
        p += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            result &= 0xFFFFFFFF
            return (result >> 1) ^ -(result & 1), p
    raise CorruptRecordError("varint too long in record")


def _skip_field(data: Any, p: int, limit: int, what: str) -> int:
    """Skip a varint-length byte field (-1 = null); returns the position after it."""
    n, p = _varlong(data, p, limit)
    if n < -1:
        raise CorruptRecordError(f"negative {what} length {n} in record")
    if n > 0:
        if n > limit - p:
            raise CorruptRecordError("record batch ends inside a record")
        p += n
    return p


def rebuild_records(
    data: Any, start: int, end: int, count: int, base_ts: int, max_ts: int, log_append: bool
) -> tuple[bytes, int, int]:
    """Rebuild the ``count`` records of ``data[start:end]`` (a decompressed records section) as
    Kafka's leader writes them when it rebuilds a batch: record ``i`` gets attributes 0, offset
    delta ``i`` and its timestamp as a delta from the first record's; key, value and headers are
    copied. A record's timestamp is ``base_ts`` + its delta, or ``max_ts`` for every record of a
    LogAppendTime batch (``log_append``; Kafka's ``DefaultRecord.timestamp``).

    Returns ``(records section, first record's timestamp, max timestamp)`` in ms; the max is
    -1 when no timestamp is above -1 (``MemoryRecordsBuilder``'s ``NO_TIMESTAMP``).

    Raises:
        CorruptRecordError: fewer or more than ``count`` records, a record whose fields do not
            end exactly at its length, a negative length or header count, or a varint too long.
    """
    if end > len(data):
        raise CorruptRecordError("record batch is truncated")
    out = bytearray()
    p = start
    first_ts = max_seen = -1
    for n in range(count):
        if p >= end:
            raise CorruptRecordError(f"record batch holds {n} records, its header declares {count}")
        length, p = _length(data, p, end)
        if length <= 0:
            raise CorruptRecordError(f"record {n} has invalid length {length}")
        if length > end - p:
            raise CorruptRecordError("record batch ends inside a record")
        rec_end = p + length
        p += 1  # attributes (unused in v2)
        ts_delta, p = _varlong(data, p, rec_end)
        _offset_delta, p = _varlong(data, p, rec_end)
        tail = p
        p = _skip_field(data, p, rec_end, "key")
        p = _skip_field(data, p, rec_end, "value")
        headers, p = _varlong(data, p, rec_end)
        if headers < 0:
            raise CorruptRecordError(f"negative header count {headers} in record")
        for _h in range(headers):
            p = _skip_field(data, p, rec_end, "header key")
            p = _skip_field(data, p, rec_end, "header value")
        if p != rec_end:
            raise CorruptRecordError(
                f"record {n} has length {length} but its fields end {rec_end - p} bytes earlier"
            )
        ts = max_ts if log_append else _wrap64(base_ts + ts_delta)
        if n == 0:
            first_ts = ts
        if ts > max_seen:
            max_seen = ts
        body = bytearray(b"\x00")
        write_varint(body, _wrap64(ts - first_ts))
        write_varint(body, n)
        body += data[tail:rec_end]
        write_varint(out, len(body))
        out += body
    if p != end:
        raise CorruptRecordError(f"record batch has {end - p} trailing bytes after its {count} records")
    return bytes(out), first_ts, max_seen
