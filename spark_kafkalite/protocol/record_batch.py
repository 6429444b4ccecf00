"""RecordBatch v2 (magic 2): header parsing, validation, in-place offset assignment and columnar
decoding (encoding is in ``record_batch_writer``). Layout follows Kafka's ``DefaultRecordBatch``:

====== ==== =====================================================================
offset size field
====== ==== =====================================================================
0      8    baseOffset int64 (client sends 0; the leader overwrites it)
8      4    batchLength int32 (bytes after this field: total size - 12)
12     4    partitionLeaderEpoch int32 (set by the leader, outside the CRC)
16     1    magic int8 = 2
17     4    crc uint32: CRC-32C (Castagnoli) over bytes [21, end)
21     2    attributes int16: bits 0-2 codec, bit 3 timestamp type, bit 4 transactional,
            bit 5 control, bit 6 delete horizon (KIP-534: baseTimestamp holds the
            deleteHorizonMs the log cleaner set)
23     4    lastOffsetDelta int32
27     8    baseTimestamp int64 (ms)
35     8    maxTimestamp int64 (ms)
43     8    producerId int64
51     2    producerEpoch int16
53     4    baseSequence int32
57     4    recordsCount int32
61     ...  records (compressed as a whole when codec != 0)
====== ==== =====================================================================

Record: length varint, attributes int8, timestampDelta varlong, offsetDelta varint, key (varint
length, -1 = null), value (same), headers count varint, then key (varint length + UTF-8) and
value (varint length, -1 = null) per header. Record varints are zig-zag encoded.

The broker only touches the header (per batch, never per record); clients encode and decode.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import crc32c as _crc32c

from spark_kafkalite.protocol.compression import (
    COMPRESSION_CODECS,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    compress,
    decompress,
    iter_decompressed,
)
from spark_kafkalite.protocol.errors import CorruptRecordError, InvalidRecordError, MessageTooLargeError
from spark_kafkalite.protocol.native import RECORD_DECODE, load_twin
from spark_kafkalite.protocol.record_layout import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_V2,
    MAX_TIMESTAMP_OFFSET,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
)
from spark_kafkalite.protocol.varint import VarintError, read_varint

__all__ = [
    "RECORD_BATCH_OVERHEAD",
    "MAX_UNCOMPRESSED_RECORDS_BYTES",
    "MAGIC_V2",
    "ATTR_DELETE_HORIZON",
    "BatchHeader",
    "DecodedBatch",
    "read_header",
    "validate_batch",
    "validate_record_framing",
    "iter_batch_headers",
    "assign_offsets",
    "set_log_append_time",
    "decode_batch",
    "decode_batches",
    "records_section",
    "compress",
    "decompress",
    "COMPRESSION_NONE",
    "COMPRESSION_GZIP",
    "COMPRESSION_SNAPPY",
    "COMPRESSION_LZ4",
    "COMPRESSION_ZSTD",
    "COMPRESSION_CODECS",
]

#: Largest decompressed records section of one batch that a reader inflates (kafkalite's bound;
#: Java's ``DefaultRecordBatch`` has none): a compression bomb from a hostile broker (a few KB
#: that inflate to gigabytes) costs at most this much memory and then raises. Equal to the
#: broker's default ``kafkalite.message.max.uncompressed.bytes``, so no batch a broker with
#: default limits accepted is refused.
MAX_UNCOMPRESSED_RECORDS_BYTES = 64 * 1024 * 1024

Buffer = bytes | bytearray | memoryview
Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of a RecordBatch v2 (see the module docstring for the layout)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_bytes(self) -> int:
        """Total size of the batch on the wire and on disk (batch_length + 12)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression_type(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime (Kafka's ``TimestampType.id``)."""
        return 1 if self.attributes & ATTR_TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (ms) a log cleaner stored in ``base_timestamp`` with attribute bit 6,
        or None (KIP-534, Kafka's ``DefaultRecordBatch.deleteHorizonMs``)."""
        return self.base_timestamp if self.attributes & ATTR_DELETE_HORIZON else None


def read_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the batch header at ``pos`` without checking the CRC.

    Raises:
        CorruptRecordError: fewer than 61 bytes remain.
    """
    if len(buf) - pos < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"record batch header needs {RECORD_BATCH_OVERHEAD} bytes, {len(buf) - pos} available"
        )
    return BatchHeader(*HEADER.unpack_from(buf, pos))


def validate_batch(
    buf: Buffer, pos: int = 0, size: int | None = None, *, strict_counts: bool = True
) -> BatchHeader:
    """Validate the batch at ``pos`` as Kafka's ``DefaultRecordBatch.ensureValid`` and
    ``LogValidator`` do: magic 2, a batch length that fits the buffer (and equals ``size`` when
    given), CRC-32C over [21, end), and ``records_count == last_offset_delta + 1 > 0``; with
    ``strict_counts=False`` (stored or fetched batches) ``0 <= records_count <= last_offset_delta
    + 1``: compaction leaves holes, and empty batches where it keeps a producer's last batch
    (Kafka's ``MemoryRecords.filterTo`` ``RETAIN_EMPTY``).

    Raises:
        CorruptRecordError: truncated batch, size mismatch or CRC mismatch (CORRUPT_MESSAGE).
        InvalidRecordError: wrong magic or inconsistent counts (INVALID_RECORD).
    """
    header = read_header(buf, pos)
    if header.magic != MAGIC_V2:
        raise InvalidRecordError(f"unsupported record batch magic {header.magic} (only v2)")
    total = header.size_bytes
    if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} is below the minimum")
    if pos + total > len(buf):
        raise CorruptRecordError(
            f"record batch of {total} bytes is truncated ({len(buf) - pos} bytes available)"
        )
    if size is not None and total != size:
        raise CorruptRecordError(f"record batch length {total} does not match the {size} bytes sent")
    crc = _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + total])
    if crc != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch: stored {header.crc:#010x}, computed {crc:#010x}"
        )
    span = header.last_offset_delta + 1
    count = header.records_count
    if span <= 0 or (count != span if strict_counts else not 0 <= count <= span):
        raise InvalidRecordError(
            f"record batch count {header.records_count} does not match lastOffsetDelta "
            f"{header.last_offset_delta}"
        )
    return header


def validate_record_framing(
    buf: Buffer, header: BatchHeader, pos: int = 0, *, max_uncompressed_bytes: int = 2**31 - 1
) -> None:
    """Check that the records section of a (CRC-valid) batch really holds ``records_count``
    records whose length prefixes end exactly at the batch end. This is the structural part of
    Kafka's ``LogValidator`` record iteration: a batch that passes it can be decoded by every
    consumer, so one bad producer cannot make a partition unreadable. It walks only the
    record-length varints and builds no record objects. A compressed section is streamed through
    (``iter_decompressed``, as Kafka's ``streamingIterator``), never inflated whole, and may
    decompress to at most ``max_uncompressed_bytes``.

    Raises:
        CorruptRecordError: unknown codec, undecompressable payload, or record framing that does
            not match the header (CORRUPT_MESSAGE).
        MessageTooLargeError: the records decompress to more than ``max_uncompressed_bytes``.
    """
    codec = header.compression_type
    if codec > COMPRESSION_ZSTD:
        raise CorruptRecordError(f"record batch uses unknown compression type {codec}")
    start = pos + RECORD_BATCH_OVERHEAD
    end = pos + header.size_bytes
    count = header.records_count
    if not codec:
        try:
            n, p = _walk_records(buf, start, end, count)
        except IndexError:
            raise CorruptRecordError("record batch ends inside a record length") from None
        extra = end - p
    else:
        walker = _RecordWalker(count)
        for chunk in iter_decompressed(memoryview(buf)[start:end], codec, max_uncompressed_bytes):
            walker.feed(chunk)
        n, extra = walker.finish()
    if n != count or extra != 0:
        raise CorruptRecordError(
            f"record batch declares {count} records but its records section holds {n} "
            f"records and {extra} extra bytes"
        )


_decode = load_twin(RECORD_DECODE)
_walk_records = _decode.walk_records
"""``walk_records(data, p, limit, count, n=0) -> (records seen, position after the last)``:
native when built (per record on the broker's produce path), else the pure-Python reference."""


class _RecordWalker:
    """``_walk_records`` over a stream of decompressed chunks: keeps only the bytes still to skip
    and at most a partial length varint (< 10 bytes) between chunks."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.n = 0
        self.skip = 0  # bytes of the current record still to come
        self.carry = b""  # an incomplete length varint from the previous chunk
        self.extra = 0  # bytes after the last declared record

    def feed(self, chunk: bytes) -> None:
        if self.n >= self.count and self.skip == 0:
            self.extra += len(chunk)
            return
        if self.skip >= len(chunk):
            self.skip -= len(chunk)
            return
        data = self.carry + chunk if self.carry else chunk
        start = 0 if self.carry else self.skip
        self.carry = b""
        self.skip = 0
        limit = len(data)
        n, p = self.n, start
        try:
            n, p = _walk_records(data, start, limit, self.count, n)
        except IndexError:
            # a length varint is cut by the chunk end: redo the last record with the next chunk
            n, p = self._last_complete(data, start, limit)
            self.n = n
            self.carry = bytes(data[p:])
            if len(self.carry) > 10:
                raise CorruptRecordError("varint too long in record") from None
            return
        self.n = n
        if p > limit:
            self.skip = p - limit
        elif n >= self.count:
            self.extra += limit - p

    def _last_complete(self, data: bytes, p: int, limit: int) -> tuple[int, int]:
        """(records, position) up to the start of the record whose length varint is cut."""
        n = self.n
        while True:
            q = p
            while q < limit and data[q] >= 0x80:
                q += 1
            if q >= limit:
                return n, p
            try:
                length, q = read_varint(data, p)
            except VarintError as exc:
                raise CorruptRecordError(str(exc)) from None
            if length <= 0:
                raise CorruptRecordError(f"record {n} has invalid length {length}")
            p = q + length
            n += 1

    def finish(self) -> tuple[int, int]:
        """(records seen, extra bytes: negative when the last record is cut short)."""
        if self.carry:
            return self.n, len(self.carry)
        return self.n, self.extra - self.skip


def iter_batch_headers(buf: Buffer, start_pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch from ``start_pos``, without CRC checks.
    Stops at the first partial batch (Kafka fetch responses may end with one)."""
    pos = start_pos
    end = len(buf)
    while end - pos >= RECORD_BATCH_OVERHEAD:
        header = BatchHeader(*HEADER.unpack_from(buf, pos))
        total = header.batch_length + LOG_OVERHEAD
        if header.batch_length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or pos + total > end:
            return
        yield pos, header
        pos += total


_OFFSET = struct.Struct(">q")
_EPOCH = struct.Struct(">i")
BATCH_PATCH_BYTES = 16
"""The leading bytes of a RecordBatch that :func:`assign_offsets` patches (baseOffset,
batchLength, partitionLeaderEpoch)."""


def assign_offsets(batch: bytearray | memoryview, base_offset: int, partition_leader_epoch: int) -> None:
    """Patch baseOffset (bytes 0-7) and partitionLeaderEpoch (12-15) in place; neither is under
    the CRC, so the batch stays valid (Kafka's in-place offset assignment in ``LogValidator``)."""
    _OFFSET.pack_into(batch, 0, base_offset)
    _EPOCH.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)


_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")


def set_log_append_time(batch: bytearray, log_append_time_ms: int) -> None:
    """Stamp the RecordBatch v2 at the start of ``batch`` with the broker's clock, in place:
    timestamp type LogAppendTime (attributes bit 3) and maxTimestamp = ``log_append_time_ms``,
    then the CRC-32C anew (both fields are under it). The records keep their own timestamp
    deltas; readers take maxTimestamp as every record's timestamp (Kafka's
    ``DefaultRecordBatch.setMaxTimestamp(TimestampType.LOG_APPEND_TIME, now)`` in
    ``LogValidator``). Costs one CRC pass over the batch."""
    (attributes,) = _ATTRIBUTES.unpack_from(batch, ATTRIBUTES_OFFSET)
    _ATTRIBUTES.pack_into(batch, ATTRIBUTES_OFFSET, attributes | ATTR_TIMESTAMP_TYPE)
    _MAX_TIMESTAMP.pack_into(batch, MAX_TIMESTAMP_OFFSET, log_append_time_ms)
    (length,) = struct.unpack_from(">i", batch, LENGTH_OFFSET)
    end = LOG_OVERHEAD + length
    struct.pack_into(">I", batch, CRC_OFFSET, _crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:end]))


# ---------------------------------------------------------------------------------------------
# decode


@dataclass(slots=True)
class DecodedBatch:
    """One decoded batch in columnar form; list ``i`` of every column describes record ``i``."""

    header: BatchHeader
    offsets: list[int] = field(default_factory=list)
    timestamps_ms: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[list[Header]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)


def decode_batch(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> DecodedBatch:
    """Decode the batch at ``pos`` into columns (decompressing when needed).

    For LogAppendTime batches every record's timestamp is the batch's max_timestamp (Kafka's
    ``DefaultRecordBatch`` semantics).

    Raises:
        CorruptRecordError / InvalidRecordError: see :func:`validate_batch`; also a malformed record.
        UnsupportedCompressionTypeError: the batch's codec library is missing.
    """
    header = validate_batch(buf, pos, strict_counts=False) if verify_crc else read_header(buf, pos)
    data, start, end = records_section(buf, pos, header)
    out = DecodedBatch(header)
    out.offsets, out.timestamps_ms, out.keys, out.values, out.headers = _decode.decode_records(
        data,
        start,
        end,
        header.records_count,
        header.base_offset,
        header.base_timestamp,
        header.max_timestamp,
        header.timestamp_type == 1,
    )
    return out


def records_section(
    buf: Buffer, pos: int, header: BatchHeader, max_uncompressed_bytes: int = MAX_UNCOMPRESSED_RECORDS_BYTES
) -> tuple[Buffer, int, int]:
    """(data, start, end) of the batch's records: the decompressed payload, or a slice of ``buf``
    when the batch is not compressed (no copy). The one place readers (``decode_batch``, the
    native columnar ``record_columns.append_batch``) decompress: streamed
    (:func:`~spark_kafkalite.protocol.compression.iter_decompressed`) and stopped past
    ``max_uncompressed_bytes``.

    Raises:
        CorruptRecordError: undecompressable payload, or the records decompress to more than
            ``max_uncompressed_bytes`` (a compression bomb).
        UnsupportedCompressionTypeError: the codec is unknown or its library is missing.
    """
    end = pos + header.size_bytes
    if end > len(buf):
        raise CorruptRecordError(
            f"record batch of {header.size_bytes} bytes is truncated ({len(buf) - pos} bytes available)"
        )
    if header.compression_type:
        payload = memoryview(buf)[pos + RECORD_BATCH_OVERHEAD : end]
        try:
            data = b"".join(iter_decompressed(payload, header.compression_type, max_uncompressed_bytes))
        except MessageTooLargeError as exc:
            raise CorruptRecordError(
                f"record batch at offset {header.base_offset} ({header.size_bytes} bytes, codec "
                f"{header.compression_type}) decompresses to more than {max_uncompressed_bytes} bytes "
                "(MAX_UNCOMPRESSED_RECORDS_BYTES): refused as a compression bomb"
            ) from exc
        return data, 0, len(data)
    return buf, pos + RECORD_BATCH_OVERHEAD, end


def decode_batches(buf: Buffer, *, verify_crc: bool = True) -> Iterator[DecodedBatch]:
    """Decode every complete batch in a fetched records blob; a partial trailing batch (allowed in
    Kafka fetch responses) is ignored. Control batches are skipped."""
    for pos, header in iter_batch_headers(buf):
        if header.is_control:
            continue
        yield decode_batch(buf, pos, verify_crc=verify_crc)
