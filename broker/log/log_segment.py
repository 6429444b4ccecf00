"""One log segment: ``<20-digit base offset>.log`` plus its ``.index`` (Kafka's ``LogSegment``).

The ``.log`` file is a plain concatenation of RecordBatch v2 bytes, exactly as Kafka stores them.
Appends are one unbuffered ``write`` per call (data reaches the OS page cache, so it survives a
kill of the process); reads are ``pread`` calls that return whole batches. Everything works per
batch (61-byte headers), never per record.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_kafkalite.protocol.errors import KafkaError
from spark_kafkalite.protocol.record_batch import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    read_header,
    validate_batch,
)

from .log_config import LogConfig
from .offset_index import OffsetIndex, _write_all

__all__ = ["LogSegment", "SegmentRead", "log_file_name", "index_file_name", "LOG_SUFFIX", "INDEX_SUFFIX"]

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
_SCAN_CHUNK_BYTES = 64 * 1024
_RECOVER_CHUNK_BYTES = 1024 * 1024
_MIN_BATCH_BYTES = RECORD_BATCH_OVERHEAD


def log_file_name(base_offset: int) -> str:
    """``00000000000000000042.log`` for base offset 42."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{INDEX_SUFFIX}"


@dataclass(frozen=True, slots=True)
class SegmentRead:
    """Result of ``LogSegment.read``: whole batches ``records`` = bytes
    [start_position, end_position) of the ``.log`` file; ``first_offset`` is the base offset of
    the first batch and ``next_offset`` the offset after the last batch (both -1 if empty)."""

    records: bytes
    first_offset: int
    next_offset: int
    start_position: int
    end_position: int


class LogSegment:
    """A ``.log`` file and its sparse ``.index``.

    Use ``LogSegment.open(dir, base_offset, config)``. Attributes: ``base_offset``,
    ``log_path``, ``index``, ``size_bytes`` (bytes in the ``.log``). ``next_offset`` (offset after
    the last batch) is computed lazily from the index's last entry.
    """

    def __init__(self, log_dir: Path, base_offset: int, config: LogConfig) -> None:
        self.base_offset = base_offset
        self.config = config
        self.log_path = Path(log_dir) / log_file_name(base_offset)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._size = os.fstat(self._fd).st_size
        index_path = Path(log_dir) / index_file_name(base_offset)
        missing_index = not index_path.exists()
        self.index = OffsetIndex(index_path, base_offset, config.segment_index_bytes)
        self._bytes_since_last_index_entry = 0
        self._next_offset: int | None = base_offset if self._size == 0 else None
        self._max_timestamp_ms: int | None = -1 if self._size == 0 else None
        if self._size and (missing_index or self.index.last_entry[1] >= self._size):
            if not missing_index:
                logger.warning("segment %s: index points past the log end, rebuilding", self.log_path)
            self.rebuild_index()
        else:
            self._bytes_since_last_index_entry = self._size - self.index.last_entry[1]

    @classmethod
    def open(cls, log_dir: Path, base_offset: int, config: LogConfig) -> LogSegment:
        """Open (or create) the segment with ``base_offset`` in ``log_dir``."""
        return cls(log_dir, base_offset, config)

    # -- properties ------------------------------------------------------------------------

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def next_offset(self) -> int:
        """Offset after the last complete batch (``base_offset`` when empty). Kafka's
        ``LogSegment.readNextOffset``: reads forward from the last index entry."""
        if self._next_offset is None:
            last_offset, pos = self.index.last_entry
            nxt = last_offset + 1 if self.index.entries else self.base_offset
            end = pos
            for p, header in self._iter_headers(pos):
                nxt = header.next_offset
                end = p + header.size_bytes
            if end < self._size:
                logger.warning("segment %s: %d bytes of partial batch at the tail", self.log_path, self._size - end)
            self._next_offset = nxt
        return self._next_offset

    @property
    def has_partial_tail(self) -> bool:
        """True if the file does not end on a batch boundary (needs ``recover``)."""
        _, pos = self.index.last_entry
        end = pos
        for p, header in self._iter_headers(pos):
            end = p + header.size_bytes
        return end != self._size

    @property
    def max_timestamp_ms(self) -> int:
        """Largest batch max_timestamp in the segment (-1 if empty); scans batch headers once."""
        if self._max_timestamp_ms is None:
            largest = -1
            for _, header in self._iter_headers(0):
                if header.max_timestamp > largest:
                    largest = header.max_timestamp
            self._max_timestamp_ms = largest
        return self._max_timestamp_ms

    def can_append(self, size_bytes: int, last_offset: int, segment_bytes: int) -> bool:
        """True if a batch of ``size_bytes`` ending at ``last_offset`` belongs in this segment:
        it fits ``segment_bytes`` (or the segment is empty), the index has room, and the offset
        fits an int32 relative offset."""
        if self._size and self._size + size_bytes > segment_bytes:
            return False
        return self.index.can_append(last_offset)

    # -- append ----------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        first_offset: int,
        last_offset: int,
        max_timestamp_ms: int = -1,
        batches: Sequence[tuple[int, BatchHeader]] | None = None,
    ) -> int:
        """Append ``records`` (one or more whole batches whose offsets are already assigned) with
        one ``write``. Adds an index entry (last offset of the batch, its position) whenever more
        than ``index_interval_bytes`` were appended since the previous entry.

        Args:
            batches: (position within ``records``, header) of each batch when ``records`` holds
                more than one batch; ``None`` means ``records`` is a single batch.

        Returns: the file position the records were written at.
        """
        position = self._size
        _write_all(self._fd, records)
        self._size += len(records)
        interval = self.config.index_interval_bytes
        if batches is None:
            if self._bytes_since_last_index_entry > interval:
                self._maybe_index(last_offset, position)
            self._bytes_since_last_index_entry += len(records)
        else:
            for rel_pos, header in batches:
                if self._bytes_since_last_index_entry > interval:
                    self._maybe_index(header.last_offset, position + rel_pos)
                self._bytes_since_last_index_entry += header.size_bytes
        self._next_offset = last_offset + 1
        if self._max_timestamp_ms is not None and max_timestamp_ms > self._max_timestamp_ms:
            self._max_timestamp_ms = max_timestamp_ms
        return position

    def _maybe_index(self, offset: int, position: int) -> None:
        if self.index.can_append(offset):
            self.index.append(offset, position)
            self._bytes_since_last_index_entry = 0

    # -- read ------------------------------------------------------------------------------

    def find_batch(self, offset: int, starting_position: int = 0) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= ``offset``, or None
        (Kafka's ``LogSegment.translateOffset``). Starts at the index entry for ``offset``."""
        _, pos = self.index.lookup(offset)
        # The target is usually within ~index_interval_bytes of the index entry.
        chunk = min(_SCAN_CHUNK_BYTES, self.config.index_interval_bytes + 4 * 1024)
        for p, header in self._iter_headers(max(pos, starting_position), chunk):
            if header.last_offset >= offset:
                return p, header
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_message: bool = True,
        max_offset: int | None = None,
    ) -> SegmentRead | None:
        """Whole batches starting with the batch that contains ``start_offset`` (or the first one
        after it), at most ``max_bytes`` in total, ending at or before byte ``max_position``, with
        base offsets < ``max_offset``. With ``min_one_message`` the first batch is returned even
        when larger than ``max_bytes`` (KIP-74).

        Returns None if no batch in this segment has an offset >= ``start_offset``; a
        ``SegmentRead`` with empty ``records`` if the limits exclude the first batch.
        """
        found = self.find_batch(start_offset)
        if found is None:
            return None
        start, first = found
        limit = self._size if max_position is None else min(max_position, self._size)
        if start >= limit or (max_offset is not None and first.base_offset >= max_offset):
            return SegmentRead(b"", -1, -1, start, start)
        want = min(max(max_bytes, 0), limit - start)
        buf = os.pread(self._fd, want, start) if want >= RECORD_BATCH_OVERHEAD else b""
        end = 0
        next_offset = -1
        for p, header in _headers_in(buf, 0):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            end = p + header.size_bytes
            next_offset = header.next_offset
        if end == 0:
            if not min_one_message or first.size_bytes > limit - start:
                return SegmentRead(b"", -1, -1, start, start)
            data = os.pread(self._fd, first.size_bytes, start)
            return SegmentRead(data, first.base_offset, first.next_offset, start, start + len(data))
        data = buf if end == len(buf) else buf[:end]
        return SegmentRead(data, first.base_offset, next_offset, start, start + end)

    def read_bytes(self, position: int, size: int) -> bytes:
        """Raw bytes [position, position + size) of the ``.log`` file (for sendfile-free paths)."""
        return os.pread(self._fd, size, position)

    def iter_batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every complete batch from ``start_position`` (no CRC check)."""
        return self._iter_headers(start_position)

    def _iter_headers(
        self, start_position: int, chunk_bytes: int = _SCAN_CHUNK_BYTES
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Walk batch headers with chunked ``pread`` calls, skipping payloads larger than a chunk.
        Stops at a partial or malformed batch."""
        pos = start_position
        size = self._size
        while size - pos >= RECORD_BATCH_OVERHEAD:
            chunk = os.pread(self._fd, min(chunk_bytes, size - pos), pos)
            off = 0
            while len(chunk) - off >= RECORD_BATCH_OVERHEAD:
                header = read_header(chunk, off)
                total = header.size_bytes
                if total < _MIN_BATCH_BYTES or pos + off + total > size:
                    return
                yield pos + off, header
                off += total
            if off == 0:
                return
            pos += off

    # -- recovery / truncation -------------------------------------------------------------

    def rebuild_index(self) -> None:
        """Rebuild the offset index from batch headers (no CRC check)."""
        self.index.reset()
        self._bytes_since_last_index_entry = 0
        interval = self.config.index_interval_bytes
        nxt = self.base_offset
        for p, header in self._iter_headers(0):
            if self._bytes_since_last_index_entry > interval:
                self._maybe_index(header.last_offset, p)
            self._bytes_since_last_index_entry += header.size_bytes
            nxt = header.next_offset
        self._next_offset = nxt

    def recover(self) -> int:
        """Validate every batch from the start (CRC, magic, sizes, counts, increasing offsets),
        rebuild the index, and truncate the file at the first invalid or partial batch
        (Kafka's ``LogSegment.recover``).

        Returns: the number of bytes truncated.
        """
        self.index.reset()
        self._bytes_since_last_index_entry = 0
        interval = self.config.index_interval_bytes
        size = self._size
        pos = 0
        next_offset = self.base_offset
        max_ts = -1
        while pos < size:
            chunk = os.pread(self._fd, min(_RECOVER_CHUNK_BYTES, size - pos), pos)
            off = 0
            bad = False
            while off < len(chunk):
                if len(chunk) - off < RECORD_BATCH_OVERHEAD:
                    if pos + len(chunk) < size:
                        break  # header straddles the chunk: read the next chunk from here
                    bad = True
                    break
                header = read_header(chunk, off)
                total = header.size_bytes
                if total < _MIN_BATCH_BYTES or pos + off + total > size:
                    bad = True
                    break
                if off + total > len(chunk):
                    if off > 0:
                        break  # re-read with the batch at the start of the chunk
                    chunk = os.pread(self._fd, total, pos)
                try:
                    header = validate_batch(chunk, off)
                except KafkaError as exc:
                    logger.warning("segment %s: invalid batch at %d: %s", self.log_path, pos + off, exc)
                    bad = True
                    break
                if header.base_offset < next_offset or not self.index.can_append(header.last_offset):
                    logger.warning(
                        "segment %s: batch at %d has offset %d, expected >= %d",
                        self.log_path, pos + off, header.base_offset, next_offset,
                    )
                    bad = True
                    break
                if self._bytes_since_last_index_entry > interval:
                    self._maybe_index(header.last_offset, pos + off)
                self._bytes_since_last_index_entry += total
                next_offset = header.next_offset
                max_ts = max(max_ts, header.max_timestamp)
                off += total
            pos += off
            if bad:
                break
        truncated = size - pos
        if truncated:
            logger.warning("segment %s: truncating %d bytes at position %d", self.log_path, truncated, pos)
            os.ftruncate(self._fd, pos)
            self._size = pos
        self._next_offset = next_offset
        self._max_timestamp_ms = max_ts
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (the batch containing ``offset``
        goes whole, Kafka's ``LogSegment.truncateTo``). Returns the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, _ = found
        removed = self._size - position
        os.ftruncate(self._fd, position)
        self._size = position
        self.index.truncate_to(offset)
        self.index.truncate_to_position(position)
        # Recount bytes since the last index entry so future entries stay on schedule.
        _, last_pos = self.index.last_entry
        self._bytes_since_last_index_entry = 0
        nxt = self.base_offset if not self.index.entries else self.index.last_entry[0] + 1
        for p, header in self._iter_headers(last_pos):
            self._bytes_since_last_index_entry = p + header.size_bytes - last_pos
            nxt = header.next_offset
        self._next_offset = nxt
        self._max_timestamp_ms = -1 if position == 0 else None
        return removed

    # -- lifecycle -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the ``.log`` and ``.index`` files."""
        os.fsync(self._fd)
        self.index.flush()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.index.close()

    def delete(self) -> None:
        """Close and remove both files."""
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.index.delete()

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size_bytes={self._size})"


def _headers_in(buf: bytes, pos: int) -> Iterator[tuple[int, BatchHeader]]:
    """Complete batches inside ``buf`` from ``pos``."""
    end = len(buf)
    while end - pos >= RECORD_BATCH_OVERHEAD:
        header = read_header(buf, pos)
        total = header.size_bytes
        if total < _MIN_BATCH_BYTES or pos + total > end:
            return
        yield pos, header
        pos += total

