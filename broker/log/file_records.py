"""The ``.log`` file of one segment (Kafka's ``FileRecords``): RecordBatch v2 bytes appended
with unbuffered writes and read with ``pread``, searched by walking batch headers.

It knows nothing of indexes: :class:`~broker.log.log_segment.LogSegment` finds a starting
position in its offset or time index and asks this file for the batches from there. Every read
goes through ``segment_files.counted_pread`` (counted in ``SEGMENT_READ_STATS``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from spark_kafkalite.protocol.record_batch import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    decode_batch,
    read_header,
)

from .file_slices import FileSlice
from .index_file import write_all, writev_all
from .segment_files import counted_pread, headers_in, iter_file_headers, scan_valid_batches

__all__ = ["FileRecords", "SCAN_CHUNK_BYTES"]

#: bytes read per step of a header walk
SCAN_CHUNK_BYTES = 64 * 1024
_pread = counted_pread


class FileRecords:
    """An open ``.log`` file (Kafka's ``FileRecords``).

    ``FileRecords(path, new)`` opens (or creates) ``path`` for appending; ``new``: the file
    must not exist yet (created with ``O_EXCL``, nothing read).

    Attributes:
        path: the file. fd: its descriptor (-1 once closed). size: its length in bytes.
    """

    __slots__ = ("path", "fd", "size")

    def __init__(self, path: Path, new: bool = False) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | (os.O_EXCL if new else 0), 0o644)
        self.size = 0 if new else os.fstat(self.fd).st_size

    # -- writes ----------------------------------------------------------------------------

    def append(self, records: bytes | bytearray | memoryview, head: bytes | bytearray | None = None) -> int:
        """Write ``records`` (after ``head``, with one ``writev``, when given) at the end;
        returns the bytes written. A failed write (ENOSPC, EFBIG mid-write) is cut off again,
        best effort, so the file ends on a batch boundary.

        Raises:
            OSError: the write failed.
        """
        position = self.size
        try:
            if head is None:
                write_all(self.fd, records)
                written = len(records)
            else:
                writev_all(self.fd, (head, records))
                written = len(head) + len(records)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, position)
            raise
        self.size += written
        return written

    def truncate_to(self, position: int) -> int:
        """Cut the file at byte ``position``; returns the bytes removed."""
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        return removed

    def recover(
        self,
        base_offset: int,
        on_batch: Callable[[int, BatchHeader], bool],
        on_invalid: Callable[[int, str], None],
    ) -> tuple[int, int]:
        """Validate every batch from the start (``segment_files.scan_valid_batches``:
        ``on_batch(position, header)`` may stop the scan by returning False) and cut the file
        at the first invalid or partial batch. Returns (bytes truncated, offset after the last
        valid batch)."""
        valid, next_offset = scan_valid_batches(self.fd, self.size, base_offset, on_batch, on_invalid)
        truncated = self.size - valid
        if truncated:
            self.truncate_to(valid)
        return truncated, next_offset

    # -- reads -----------------------------------------------------------------------------

    def read(self, size: int, position: int) -> bytes:
        """Bytes [position, position + size) (fewer at the end of the file)."""
        return _pread(self.fd, size, position)

    def read_header(self, position: int) -> BatchHeader:
        """The header of the batch at ``position`` (one ``pread``).

        Raises:
            CorruptRecordError: no valid header there.
        """
        return read_header(_pread(self.fd, RECORD_BATCH_OVERHEAD, position))

    def iter_headers(
        self, start_position: int = 0, chunk_bytes: int = SCAN_CHUNK_BYTES, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every complete batch from ``start_position`` to ``end``
        (default: the end of the file), reading ``chunk_bytes`` at a time (no CRC check)."""
        return iter_file_headers(self.fd, self.size if end is None else end, start_position, chunk_bytes)

    def search_for_offset(
        self, offset: int, start_position: int, chunk_bytes: int
    ) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch from ``start_position`` whose last offset is
        >= ``offset``, or None (Kafka's ``FileRecords.searchForOffsetWithSize``)."""
        for p, header in self.iter_headers(start_position, chunk_bytes):
            if header.last_offset >= offset:
                return p, header
        return None

    def read_batches(
        self, start: int, want: int, max_offset: int | None
    ) -> tuple[bytes | memoryview, int, int]:
        """Whole batches among the ``want`` bytes from ``start`` (a batch boundary), stopping
        before a batch whose base offset is >= ``max_offset``: (data, end position, offset after
        the last batch); (b"", 0, -1) when not even one batch fits. One ``pread``; the data is
        a view of it when the last batch read is cut off (no copy)."""
        buf = _pread(self.fd, want, start) if want >= RECORD_BATCH_OVERHEAD else b""
        end = 0
        next_offset = -1
        for p, header in headers_in(buf, 0):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            end = p + header.size_bytes
            next_offset = header.next_offset
        if end == 0:
            return b"", 0, -1
        # a view, not a copy: the fetch response sends it by reference (encode_fetch_response)
        return (buf if end == len(buf) else memoryview(buf)[:end]), start + end, next_offset

    def batches_end(
        self, resume: int, bound: int, max_offset: int | None, chunk_bytes: int
    ) -> tuple[int, int]:
        """Walk the headers from ``resume`` (a batch boundary) up to byte ``bound``, stopping
        before a batch whose base offset is >= ``max_offset``: (end position of the last whole
        batch, offset after it), or (0, -1) when there is none. Reads headers only."""
        end = 0
        next_offset = -1
        for p, header in self.iter_headers(resume, chunk_bytes, end=bound):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            end = p + header.size_bytes
            next_offset = header.next_offset
        return end, next_offset

    def first_record(
        self, position: int, header: BatchHeader, timestamp_ms: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record of the batch at ``position`` at or after
        ``starting_offset`` whose timestamp is >= ``timestamp_ms``, or None. Decodes that one
        batch (no CRC check)."""
        decoded = decode_batch(_pread(self.fd, header.size_bytes, position), verify_crc=False)
        for offset, ts in zip(decoded.offsets, decoded.timestamps_ms, strict=True):
            if offset >= starting_offset and ts >= timestamp_ms:
                return offset, ts
        return None

    def slice(self, start: int, size: int) -> FileSlice:
        """The bytes [start, start + size), left in the file to be read later (off the loop)."""
        return FileSlice(self.fd, start, size)

    # -- lifecycle -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the file."""
        os.fsync(self.fd)

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
