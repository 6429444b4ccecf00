"""Low-level helpers for segment files: names, counted ``pread``, batch-header walks, and the
validation of *stored* batches used by recovery and follower appends.

Stored vs produced batches: Kafka's ``LogValidator`` requires ``recordsCount ==
lastOffsetDelta + 1`` for batches a producer sends, but a batch rewritten by the log cleaner
keeps its base offset and the offsets of the records it retains, so it may hold fewer records
than its offset range (holes). ``DefaultRecordBatch.ensureValid`` (what recovery and replica
fetchers run) only checks sizes and the CRC; :func:`validate_stored_batch` does the same plus
``0 < records_count <= last_offset_delta + 1``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from spark_kafkalite.protocol.errors import CorruptRecordError, InvalidRecordError, KafkaError
from spark_kafkalite.protocol.record_batch import (
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    read_header,
)

__all__ = [
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "DELETED_SUFFIX",
    "ReadStats",
    "SEGMENT_READ_STATS",
    "counted_pread",
    "log_file_name",
    "index_file_name",
    "time_index_file_name",
    "txn_index_file_name",
    "segment_file_names",
    "parse_segment_file_name",
    "headers_in",
    "iter_file_headers",
    "validate_stored_batch",
    "validated_stored_batches",
    "scan_valid_batches",
    "file_next_offset",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
_CRC_START = 21
_RECOVER_CHUNK_BYTES = 1024 * 1024
_SCAN_CHUNK_BYTES = 64 * 1024


@dataclass(slots=True)
class ReadStats:
    """Counters of ``pread`` calls on ``.log`` files in this process (all segments)."""

    reads: int = 0
    bytes_read: int = 0

    def reset(self) -> None:
        self.reads = 0
        self.bytes_read = 0


SEGMENT_READ_STATS = ReadStats()


def counted_pread(fd: int, size: int, position: int) -> bytes:
    """``os.pread`` that adds to :data:`SEGMENT_READ_STATS`."""
    data = os.pread(fd, size, position)
    SEGMENT_READ_STATS.reads += 1
    SEGMENT_READ_STATS.bytes_read += len(data)
    return data


def log_file_name(base_offset: int) -> str:
    """``00000000000000000042.log`` for base offset 42."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{INDEX_SUFFIX}"


def time_index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{TIME_INDEX_SUFFIX}"


def txn_index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


def segment_file_names(base_offset: int) -> tuple[str, str, str, str]:
    """(``.log``, ``.index``, ``.timeindex``, ``.txnindex``) names of a segment (the last
    exists only when the segment has aborted transactions)."""
    return (
        log_file_name(base_offset),
        index_file_name(base_offset),
        time_index_file_name(base_offset),
        txn_index_file_name(base_offset),
    )


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """(base offset, everything after the 20 digits, e.g. ``.log.swap``) of a segment file
    name, else None."""
    stem, dot, suffix = name.partition(".")
    if len(stem) != 20 or not stem.isdigit() or not dot:
        return None
    return int(stem), "." + suffix


def headers_in(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of the complete batches inside ``buf`` from ``pos``."""
    end = len(buf)
    while end - pos >= RECORD_BATCH_OVERHEAD:
        header = read_header(buf, pos)
        total = header.size_bytes
        if total < RECORD_BATCH_OVERHEAD or pos + total > end:
            return
        yield pos, header
        pos += total


def iter_file_headers(
    fd: int, size: int, start_position: int = 0, chunk_bytes: int = _SCAN_CHUNK_BYTES
) -> Iterator[tuple[int, BatchHeader]]:
    """Walk batch headers of an open file with chunked counted ``pread`` calls, skipping
    payloads larger than a chunk. Stops at a partial or malformed batch."""
    pos = start_position
    while size - pos >= RECORD_BATCH_OVERHEAD:
        chunk = counted_pread(fd, min(chunk_bytes, size - pos), pos)
        off = 0
        while len(chunk) - off >= RECORD_BATCH_OVERHEAD:
            header = read_header(chunk, off)
            total = header.size_bytes
            if total < RECORD_BATCH_OVERHEAD or pos + off + total > size:
                return
            yield pos + off, header
            off += total
        if off == 0:
            return
        pos += off


def validate_stored_batch(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Validate a stored batch (Kafka's ``DefaultRecordBatch.ensureValid``): magic 2, a sane
    length fully present, CRC-32C over [21, end), and ``0 <= records_count <=
    last_offset_delta + 1`` (compacted batches have holes; the cleaner keeps a producer's last
    batch even when none of its records stays, Kafka's ``BatchRetention.RETAIN_EMPTY``).

    Raises:
        CorruptRecordError: truncated or CRC mismatch. InvalidRecordError: magic or counts.
    """
    header = read_header(buf, pos)
    if header.magic != MAGIC_V2:
        raise InvalidRecordError(f"unsupported record batch magic {header.magic} (only v2)")
    total = header.size_bytes
    if total < RECORD_BATCH_OVERHEAD or pos + total > len(buf):
        raise CorruptRecordError(f"record batch of {total} bytes is truncated or too short")
    crc = crc32c.crc32c(memoryview(buf)[pos + _CRC_START : pos + total])
    if crc != header.crc:
        raise CorruptRecordError(
            f"record batch CRC mismatch: stored {header.crc:#010x}, computed {crc:#010x}"
        )
    if header.last_offset_delta < 0 or not 0 <= header.records_count <= header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record batch count {header.records_count} does not fit lastOffsetDelta {header.last_offset_delta}"
        )
    return header


def validated_stored_batches(
    records: bytes | bytearray | memoryview, next_offset: int, log_name: str
) -> tuple[list[tuple[int, BatchHeader]], int]:
    """(position, header) of each complete batch of ``records`` (a partial trailing batch is
    ignored) after :func:`validate_stored_batch`, and the bytes they span. Offsets must be
    >= ``next_offset`` and increasing (gaps are fine).

    Raises:
        CorruptRecordError / InvalidRecordError: an invalid batch, or offsets out of order.
    """
    batches: list[tuple[int, BatchHeader]] = []
    total = len(records)
    pos = 0
    while total - pos >= RECORD_BATCH_OVERHEAD:
        size = read_header(records, pos).size_bytes
        if size < RECORD_BATCH_OVERHEAD or pos + size > total:
            break
        header = validate_stored_batch(records, pos)
        if header.base_offset < next_offset:
            raise InvalidRecordError(
                f"{log_name}: follower append at offset {header.base_offset} but expected >= {next_offset}"
            )
        next_offset = header.next_offset
        batches.append((pos, header))
        pos += size
    return batches, pos


def scan_valid_batches(
    fd: int,
    size: int,
    base_offset: int,
    on_batch: Callable[[int, BatchHeader], bool],
    on_invalid: Callable[[int, str], None],
) -> tuple[int, int]:
    """Validate every batch of a file from position 0 (Kafka's ``LogSegment.recover`` loop):
    CRC and structure (:func:`validate_stored_batch`) and increasing offsets >= ``base_offset``.
    ``on_batch(position, header)`` is called for each valid batch and may return False to
    stop (e.g. an index overflow); ``on_invalid(position, reason)`` for the first bad one.

    Returns: (valid_bytes, next_offset): where the valid prefix ends and the offset after it.
    """
    pos = 0
    next_offset = base_offset
    while pos < size:
        chunk = counted_pread(fd, min(_RECOVER_CHUNK_BYTES, size - pos), pos)
        off = 0
        while off < len(chunk):
            if len(chunk) - off < RECORD_BATCH_OVERHEAD:
                if pos + len(chunk) < size:
                    break  # the header straddles the chunk: read the next chunk from here
                on_invalid(pos + off, "partial batch header")
                return pos + off, next_offset
            total = read_header(chunk, off).size_bytes
            if total < RECORD_BATCH_OVERHEAD or pos + off + total > size:
                on_invalid(pos + off, f"batch of {total} bytes does not fit the file")
                return pos + off, next_offset
            if off + total > len(chunk):
                if off > 0:
                    break  # re-read with this batch at the start of the chunk
                chunk = counted_pread(fd, total, pos)
            try:
                header = validate_stored_batch(chunk, off)
            except KafkaError as exc:
                on_invalid(pos + off, str(exc))
                return pos + off, next_offset
            if header.base_offset < next_offset:
                on_invalid(pos + off, f"offset {header.base_offset} is below {next_offset}")
                return pos + off, next_offset
            if not on_batch(pos + off, header):
                return pos + off, next_offset
            next_offset = header.next_offset
            off += total
        pos += off
    return pos, next_offset


def file_next_offset(path: Path, base_offset: int) -> int:
    """The offset after the last complete batch of a ``.log``-format file (``base_offset`` if
    it holds none)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        nxt = base_offset
        for _, header in iter_file_headers(fd, os.fstat(fd).st_size):
            nxt = header.next_offset
        return nxt
    finally:
        os.close(fd)
