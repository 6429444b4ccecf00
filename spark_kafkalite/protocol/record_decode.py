"""Pure-Python record decoding for RecordBatch v2 (Kafka's ``DefaultRecord.readFrom``): the
reference and the fallback of the compiled ``_record_decode`` extension, with the same API (one
test corpus runs against both; :mod:`spark_kafkalite.protocol.native` picks one).

Only the records section is decoded here (already decompressed and CRC-checked per batch). Record
layout: length varint, attributes int8, timestampDelta varlong, offsetDelta varint, key (varint
length, -1 = null), value (same), headers count varint, then per header key (varint length +
UTF-8) and value (varint length, -1 = null). Varints are zig-zag encoded.
"""

from __future__ import annotations

from array import array
from typing import Any

from spark_kafkalite.protocol.errors import CorruptRecordError
from spark_kafkalite.protocol.varint import VarintError, read_varint, read_varint32

__all__ = ["decode_records", "ColumnBuilder", "walk_records"]

Header = tuple[str, bytes | None]


def walk_records(data: Any, p: int, limit: int, count: int, n: int = 0) -> tuple[int, int]:
    """Skip over records by their length varints from ``p`` to ``limit`` (the broker's framing
    check of a produced batch, Kafka's ``LogValidator`` record iteration): returns (records seen,
    position after the last one), stopping after ``count`` records.

    Raises:
        IndexError: a length varint runs past the end of ``data`` (a chunk boundary for the
            streaming walker).
        CorruptRecordError: a record length <= 0 or a length varint longer than 5 bytes.
    """
    try:
        while p < limit and n < count:
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                length, p = read_varint32(data, p)
            if length <= 0:
                raise CorruptRecordError(f"record {n} has invalid length {length}")
            p += length
            n += 1
    except VarintError as exc:
        raise CorruptRecordError(str(exc)) from None
    return n, p


def decode_records(
    data: Any,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    max_ts: int,
    log_append: bool,
) -> tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[list[Header]]]:
    """Decode ``count`` records of ``data[start:end]`` into five lists: offsets, timestamps (ms;
    ``max_ts`` for every record of a LogAppendTime batch), keys, values and headers.

    Raises:
        CorruptRecordError: truncated or malformed record, trailing bytes, or a header key that is
            not UTF-8.
    """
    if end > len(data):
        raise CorruptRecordError("record batch is truncated")
    if start or end != len(data) or not isinstance(data, bytes):
        data = bytes(memoryview(data)[start:end])  # one copy per batch: every slice is ``bytes``
    limit = len(data)
    p = 0
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[bytes | None] = []
    values: list[bytes | None] = []
    headers_col: list[list[Header]] = []
    rv = read_varint
    # Single-byte varints are the common case for lengths and deltas: decode them inline.
    try:
        for _ in range(count):
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                length, p = rv(data, p)
            rec_end = p + length
            p += 1  # attributes
            b = data[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = rv(data, p)
            b = data[p]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                off_delta, p = rv(data, p)
            key, p = _bytes_field(data, p, limit)
            value, p = _bytes_field(data, p, limit)
            b = data[p]
            if b == 0:
                p += 1
                hdrs: list[Header] = []
            else:
                hcount, p = rv(data, p)
                if hcount < 0:
                    raise CorruptRecordError(f"negative header count {hcount} in record")
                hdrs = []
                for _h in range(hcount):
                    hklen, p = rv(data, p)
                    if hklen < 0 or p + hklen > limit:
                        raise CorruptRecordError(f"invalid header key length {hklen} in record")
                    hkey = data[p : p + hklen].decode("utf-8")
                    p += hklen
                    hvalue, p = _bytes_field(data, p, limit)
                    hdrs.append((hkey, hvalue))
            if p != rec_end or p > limit:
                raise CorruptRecordError(
                    f"record at offset {base_offset + off_delta} has length {length} but "
                    f"{length + p - rec_end} bytes were read"
                )
            offsets.append(base_offset + off_delta)
            timestamps.append(max_ts if log_append else base_ts + ts_delta)
            keys.append(key)
            values.append(value)
            headers_col.append(hdrs)
    except IndexError as exc:
        raise CorruptRecordError("record batch ends inside a record") from exc
    except VarintError as exc:
        raise CorruptRecordError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise CorruptRecordError("record header key is not valid UTF-8") from exc
    if p != limit:
        raise CorruptRecordError(f"record batch has {limit - p} trailing bytes after its records")
    return offsets, timestamps, keys, values, headers_col


def _bytes_field(data: bytes, p: int, limit: int) -> tuple[bytes | None, int]:
    b = data[p]
    if b == 1:  # zig-zag(-1): null
        return None, p + 1
    if b < 0x80 and not b & 1:
        n = b >> 1
        p += 1
    else:
        n, p = read_varint(data, p)
        if n == -1:  # a non-minimal -1 is still null (Kafka's ByteUtils.readVarint)
            return None, p
        if n < 0:
            raise CorruptRecordError(f"negative length {n} in record")
    if p + n > limit:
        raise CorruptRecordError("record batch ends inside a record")
    return data[p : p + n], p + n


class ColumnBuilder:
    """Pure-Python twin of the native ``ColumnBuilder``: accumulates decoded records of one
    topic-partition and ``finish()`` returns the same dict of Arrow column buffers (see
    :func:`spark_kafkalite.protocol.record_columns.to_arrow`)."""

    __slots__ = (
        "include_headers",
        "last_offset",
        "_offsets",
        "_ts_us",
        "_ttype",
        "_keys",
        "_values",
        "_headers",
    )

    def __init__(self, include_headers: bool = False) -> None:
        self.include_headers = include_headers
        self.last_offset = -1
        self._offsets: list[int] = []
        self._ts_us: list[int] = []
        self._ttype: list[int] = []
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._headers: list[list[Header]] = []

    @property
    def num_rows(self) -> int:
        return len(self._offsets)

    def __len__(self) -> int:
        return len(self._offsets)

    def append(
        self,
        data: Any,
        start: int,
        end: int,
        count: int,
        base_offset: int,
        base_ts: int,
        max_ts: int,
        log_append: bool,
        timestamp_type: int,
        min_offset: int,
        max_records: int,
    ) -> int:
        """Append the records of ``data[start:end]`` with offset ``>= min_offset``, at most
        ``max_records``; all or nothing of this batch on error. Returns the number appended."""
        offsets, timestamps, keys, values, headers = decode_records(
            data, start, end, count, base_offset, base_ts, max_ts, log_append
        )
        i = 0
        while i < len(offsets) and offsets[i] < min_offset:
            i += 1
        j = min(len(offsets), i + max(0, max_records))
        if j <= i:
            return 0
        self._offsets += offsets[i:j]
        self._ts_us += [t * 1000 for t in timestamps[i:j]]
        self._ttype += [timestamp_type] * (j - i)
        self._keys += keys[i:j]
        self._values += values[i:j]
        self._headers += headers[i:j]
        self.last_offset = offsets[j - 1]
        return j - i

    def finish(self) -> dict[str, Any]:
        n = len(self._offsets)
        out: dict[str, Any] = {
            "num_rows": n,
            "offset": array("q", self._offsets).tobytes(),
            "timestamp_us": array("q", self._ts_us).tobytes(),
            "timestamp_type": array("i", self._ttype).tobytes(),
            "key": _binary_buffers(self._keys),
            "value": _binary_buffers(self._values),
        }
        if self.include_headers:
            list_offsets = [0]
            hkeys: list[bytes | None] = []
            hvalues: list[bytes | None] = []
            list_valid = []
            for hs in self._headers:
                list_valid.append(bool(hs))
                for k, v in hs:
                    hkeys.append(k.encode("utf-8"))
                    hvalues.append(v)
                list_offsets.append(len(hkeys))
            hk_off, _hk_valid, hk_data, _ = _binary_buffers(hkeys)
            hv_off, hv_valid, hv_data, hv_nulls = _binary_buffers(hvalues)
            out["headers"] = (
                array("i", list_offsets).tobytes(),
                _bitmap(list_valid),
                list_valid.count(False),
                len(hkeys),
                hk_off,
                hk_data,
                hv_off,
                hv_valid,
                hv_data,
                hv_nulls,
            )
        return out


def _bitmap(valid: list[bool]) -> bytes:
    out = bytearray((len(valid) + 7) // 8)
    for i, v in enumerate(valid):
        if v:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def _binary_buffers(items: list[bytes | None]) -> tuple[bytes, bytes, bytes, int]:
    """(int32 offsets, validity bitmap, data, null count) of an Arrow binary column."""
    offsets = array("i", [0])
    pos = 0
    for item in items:
        if item is not None:
            pos += len(item)
        offsets.append(pos)
    if pos > 0x7FFFFFFF:
        raise OverflowError("more than 2 GiB of record bytes in one Arrow batch")
    valid = [item is not None for item in items]
    data = b"".join(item for item in items if item is not None)
    return offsets.tobytes(), _bitmap(valid), data, valid.count(False)
