"""Pure-Python record encoding: the reference twin of the compiled ``_record_encode`` extension.

Both implement the same API (``protocol.encoding`` picks one):

- :class:`MemoryRecordsBuilder` (Java ``MemoryRecordsBuilder``): an open RecordBatch v2 that
  records are appended to one by one (varint-encoded at append time, so a batch is never
  re-walked), closed into batch bytes by :meth:`MemoryRecordsBuilder.build`. As in Java, the
  batch's ``baseTimestamp`` is the first record's timestamp and later records store a (possibly
  negative) delta to it.
- :func:`murmur2` / :func:`key_hashes`: Kafka's ``Utils.murmur2`` (seed ``0x9747b28c``) and its
  positive form ``toPositive(murmur2(key))`` for every key of an Arrow binary column (-1 for a
  null key), so that ``hash % numPartitions`` is Java's ``BuiltInPartitioner.partitionForKey``.
- :class:`ArrowRecordColumns` + :func:`encode_rows`: the Kafka sink's columns (key, value,
  timestamp, headers) of one Arrow batch, and the encoding of a subset of its rows into
  builders of at most ``max_batch_bytes`` each (Java's ``batch.size``; a larger single record
  gets a builder of its own, as ``RecordAccumulator.append`` does).

Record layout: see :mod:`spark_kafkalite.protocol.record_batch` (KIP-98 RecordBatch v2).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence
from typing import Any

from spark_kafkalite.protocol.record_batch_writer import seal_batch
from spark_kafkalite.protocol.record_layout import (
    MAX_RECORD_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    batch_attributes,
)
from spark_kafkalite.protocol.varint import write_varint

__all__ = [
    "MemoryRecordsBuilder",
    "RecordTooLargeError",
    "ArrowRecordColumns",
    "encode_rows",
    "murmur2",
    "key_hashes",
    "IMPLEMENTATION",
]

IMPLEMENTATION = "pure-python"


class RecordTooLargeError(ValueError):
    """A record is larger than the limit given to :func:`encode_rows`; ``row`` is its index in
    the Arrow batch and ``size_bytes`` its encoded size."""

    def __init__(self, row: int, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(f"row {row}: record of {size_bytes} bytes exceeds {limit_bytes} bytes")
        self.row = row
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


def as_bytes(value: Any, what: str) -> bytes | None:
    """``value`` as a record field's bytes (str: UTF-8, as Java's ``StringSerializer``); None
    stays None.

    Raises:
        TypeError: not bytes, bytearray, memoryview, str or None (the message names ``what``).
    """
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__}")


class MemoryRecordsBuilder:
    """An open RecordBatch v2 (see module docstring). Not thread-safe: the accumulator's lock
    guards it."""

    __slots__ = ("_body", "_count", "_base_ts", "_max_ts")

    def __init__(self) -> None:
        self._body = bytearray()
        self._count = 0
        self._base_ts = -1
        self._max_ts = -1

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def size_bytes(self) -> int:
        """Encoded size of the records section so far (uncompressed)."""
        return len(self._body)

    @property
    def base_timestamp(self) -> int:
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    def append(
        self,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int,
        headers: Iterable[tuple[str, Any]] | None = None,
    ) -> int:
        """Encode one record at the end of the batch; returns its encoded size in bytes.

        Raises:
            TypeError: a header key that is not ``str`` or a header value that is not bytes/str/None.
        """
        if self._count == 0:
            self._base_ts = self._max_ts = timestamp_ms
        elif timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        rec = bytearray(b"\x00")  # attributes
        write_varint(rec, timestamp_ms - self._base_ts)
        write_varint(rec, self._count)
        if key is None:
            rec.append(1)
        else:
            write_varint(rec, len(key))
            rec += key
        if value is None:
            rec.append(1)
        else:
            write_varint(rec, len(value))
            rec += value
        if headers:
            items = list(headers)
            write_varint(rec, len(items))
            for hkey, hvalue in items:
                if not isinstance(hkey, str):
                    raise TypeError(f"header keys must be str, not {type(hkey).__name__}")
                raw = hkey.encode("utf-8")
                write_varint(rec, len(raw))
                rec += raw
                hv = as_bytes(hvalue, "header value")
                if hv is None:
                    rec.append(1)
                else:
                    write_varint(rec, len(hv))
                    rec += hv
        else:
            rec.append(0)
        body = self._body
        before = len(body)
        write_varint(body, len(rec))
        body += rec
        self._count += 1
        return len(body) - before

    def append_now(
        self, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, Any]] | None = None
    ) -> int:
        """``append`` stamped with the current wall-clock time (Java's ``System.currentTimeMillis()``
        CreateTime); returns that timestamp in ms.

        Raises:
            TypeError: as ``append``.
        """
        timestamp_ms = time.time_ns() // 1_000_000
        self.append(key, value, timestamp_ms, headers)
        return timestamp_ms

    def build(
        self,
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        compression_type: int = 0,
        timestamp_type: int = 0,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
    ) -> bytes:
        """The RecordBatch v2 bytes (baseOffset 0) of the records appended so far.

        Raises:
            ValueError: the batch is empty.
            UnsupportedCompressionTypeError: the codec's library is missing.
        """
        return _build_batch(
            bytes(self._body),
            self._count,
            self._base_ts,
            self._max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            compression_type,
            timestamp_type,
            is_transactional,
            partition_leader_epoch,
        )


def _build_batch(
    body: bytes,
    count: int,
    base_ts: int,
    max_ts: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    compression_type: int,
    timestamp_type: int,
    is_transactional: bool,
    partition_leader_epoch: int,
) -> bytes:
    """Header + (compressed) records + CRC-32C (:func:`~spark_kafkalite.protocol.record_batch_writer.seal_batch`)."""
    if count == 0:
        raise ValueError("a record batch needs at least one record")
    return seal_batch(
        body,
        base_offset=0,
        partition_leader_epoch=partition_leader_epoch,
        attributes=batch_attributes(compression_type, timestamp_type, is_transactional),
        last_offset_delta=count - 1,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=count,
    )


# ---------------------------------------------------------------------------------------------
# murmur2 (Kafka ``Utils.murmur2``)

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``data`` as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length // 4
    if n4:
        for k in struct.unpack_from(f"<{n4}I", data, 0):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def key_hashes(keys: Any) -> list[int]:
    """``toPositive(murmur2(key))`` for every key of an Arrow binary/string array; -1 for null."""
    return [-1 if k is None else murmur2(k) & 0x7FFFFFFF for k in _binary_pylist(keys)]


# ---------------------------------------------------------------------------------------------
# Arrow rows -> builders


def _binary_pylist(column: Any) -> list[bytes | None]:
    import pyarrow as pa

    t = column.type
    if pa.types.is_string(t):
        column = column.view(pa.binary())
    elif pa.types.is_large_string(t):
        column = column.view(pa.large_binary())
    return column.to_pylist()


class ArrowRecordColumns:
    """The sink columns of one Arrow batch, ready for :func:`encode_rows`.

    Args:
        values: binary or string (null = tombstone).
        keys: binary or string, or None.
        timestamps_us: ``timestamp[us]`` (or int64 µs) array, or None; null or missing rows get
            ``default_timestamp_ms``. µs are floored to ms (Spark's sink, SPARK-50160).
        headers: ``list<struct<key: string, value: binary>>`` array, or None.
        default_timestamp_ms: CreateTime of rows without a timestamp.
    """

    __slots__ = ("num_rows", "default_timestamp_ms", "_values", "_keys", "_timestamps_ms", "_headers")

    def __init__(
        self,
        values: Any,
        keys: Any = None,
        timestamps_us: Any = None,
        headers: Any = None,
        default_timestamp_ms: int = 0,
    ) -> None:
        import pyarrow as pa

        self.num_rows = len(values)
        self._values = _binary_pylist(values)
        self._keys = _binary_pylist(keys) if keys is not None else None
        self._timestamps_ms: list[int] | None = None
        if timestamps_us is not None:
            micros = timestamps_us.cast(pa.int64()).to_pylist()
            self._timestamps_ms = [default_timestamp_ms if t is None else t // 1000 for t in micros]
        self.default_timestamp_ms = default_timestamp_ms
        self._headers: list[list[tuple[str, bytes | None]] | None] | None = None
        if headers is not None:
            self._headers = [
                None if hs is None else [(h["key"], h["value"]) for h in hs] for hs in headers.to_pylist()
            ]
        for hs_row, hs in enumerate(self._headers or ()):
            for hkey, _ in hs or ():
                if hkey is None:
                    raise ValueError(f"row {hs_row}: header key is null")

    def record_size(self, row: int) -> int:
        """Upper bound of the bytes that ``row`` adds to a batch (its payload plus framing)."""
        size = MAX_RECORD_OVERHEAD
        if self._keys is not None and self._keys[row] is not None:
            size += len(self._keys[row])  # type: ignore[arg-type]
        value = self._values[row]
        if value is not None:
            size += len(value)
        if self._headers is not None:
            for hkey, hvalue in self._headers[row] or ():
                size += len(hkey.encode("utf-8")) + (len(hvalue) if hvalue else 0) + 4  # type: ignore[union-attr]
        return size


def encode_rows(
    columns: ArrowRecordColumns,
    rows: Sequence[int],
    max_batch_bytes: int,
    max_record_bytes: int,
    builder: MemoryRecordsBuilder | None = None,
) -> list[MemoryRecordsBuilder]:
    """Encode ``rows`` (indices into ``columns``, in order) into builders whose records section
    stays within ``max_batch_bytes`` (a record larger than that gets a builder of its own). With
    ``builder`` (an open builder of the same partition), the rows continue it first: it is the
    first builder returned, when it has records. Every builder but the last is full (the next row
    did not fit); the last may take more rows.

    Raises:
        RecordTooLargeError: a record is larger than ``max_record_bytes``.
    """
    out: list[MemoryRecordsBuilder] = []
    if builder is None:
        builder = MemoryRecordsBuilder()
    keys, values, stamps, headers = columns._keys, columns._values, columns._timestamps_ms, columns._headers
    default_ts = columns.default_timestamp_ms
    limit = max_batch_bytes - RECORD_BATCH_OVERHEAD
    for row in rows:
        row = int(row)
        key = keys[row] if keys is not None else None
        value = values[row]
        ts = stamps[row] if stamps is not None else default_ts
        hs = headers[row] if headers is not None else None
        body = builder._body
        saved = (len(body), builder._count, builder._base_ts, builder._max_ts)
        size = builder.append(key, value, ts, hs)
        if size + RECORD_BATCH_OVERHEAD > max_record_bytes:
            raise RecordTooLargeError(row, size + RECORD_BATCH_OVERHEAD, max_record_bytes)
        if saved[1] and len(body) > limit:  # did not fit: undo, close the builder, start a new one
            del body[saved[0] :]
            builder._count, builder._base_ts, builder._max_ts = saved[1:]
            out.append(builder)
            builder = MemoryRecordsBuilder()
            builder.append(key, value, ts, hs)
    if builder.record_count:
        out.append(builder)
    return out
