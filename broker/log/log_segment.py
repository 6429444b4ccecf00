"""One log segment: ``<20-digit base offset>.log`` plus its ``.index``, ``.timeindex`` and (once
it holds an aborted transaction's marker) ``.txnindex`` (Kafka's ``LogSegment``).

The ``.log`` file is a plain concatenation of RecordBatch v2 bytes, exactly as Kafka stores them.
Appends are one unbuffered ``write`` per call (data reaches the OS page cache, so it survives a
kill of the process); reads are ``pread`` calls that return whole batches. Everything works per
batch (61-byte headers), never per record.

The ``.log`` file itself is a :class:`~broker.log.file_records.FileRecords` (Kafka's
``FileRecords``): this module keeps the indexes, the segment's timestamps and the lookups that
start from an index entry. Every read of a ``.log`` file goes through
``segment_files.counted_pread``, which counts calls and bytes in :data:`SEGMENT_READ_STATS`
(tests use it to prove that lookups use the indexes).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from spark_kafkalite.protocol.record_batch import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    read_header,
)

from .file_records import SCAN_CHUNK_BYTES, FileRecords
from .file_slices import FileSlice
from .log_config import LogConfig
from .offset_index import OffsetIndex
from .segment_files import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_READ_STATS,
    TIME_INDEX_SUFFIX,
    ReadStats,
    index_file_name,
    log_file_name,
    time_index_file_name,
    txn_index_file_name,
)
from .time_index import TimeIndex
from .transaction_index import TransactionIndex

__all__ = [
    "LogSegment",
    "unlink_paths",
    "SegmentRead",
    "ReadStats",
    "SEGMENT_READ_STATS",
    "log_file_name",
    "index_file_name",
    "time_index_file_name",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SegmentRead:
    """Result of ``LogSegment.read``: whole batches ``records`` = bytes
    [start_position, end_position) of the ``.log`` file; ``first_offset`` is the base offset of
    the first batch and ``next_offset`` the offset after the last batch (both -1 if empty)."""

    records: bytes | memoryview | FileSlice  # a view of a larger read when the limits cut it
    first_offset: int
    next_offset: int
    start_position: int
    end_position: int


class LogSegment:
    """A ``.log`` file, its sparse ``.index`` and its ``.timeindex``.

    Use ``LogSegment.open(dir, base_offset, config)``. Attributes: ``base_offset``,
    ``log_path``, ``index``, ``time_index``, ``size_bytes`` (bytes in the ``.log``),
    ``created_ms`` (wall clock when opened, for ``segment.ms`` rolls of segments without
    timestamps). ``next_offset`` (offset after the last batch) is computed lazily from the
    index's last entry. ``max_timestamp_ms`` comes from the time index's last entry on load
    (exact: a final entry is written on roll and close) and is tracked on append.

    When an index is missing, points past the log end, or the time index has invalid entries,
    both indexes are rebuilt from the batch headers.
    """

    def __init__(
        self,
        log_dir: Path,
        base_offset: int,
        config: LogConfig,
        created_ms: int | None = None,
        file_suffix: str = "",
        new: bool = False,
    ) -> None:
        self.base_offset = base_offset
        self.config = config
        self.created_ms = int(time.time() * 1000) if created_ms is None else created_ms
        log_dir = log_dir if isinstance(log_dir, Path) else Path(log_dir)
        self.log_path = log_dir / (log_file_name(base_offset) + file_suffix)
        #: the ``.log`` file (Kafka's ``FileRecords``)
        self.log = FileRecords(self.log_path, new)
        index_path = log_dir / (index_file_name(base_offset) + file_suffix)
        time_index_path = log_dir / (time_index_file_name(base_offset) + file_suffix)
        self.index = OffsetIndex(index_path, base_offset, config.segment_index_bytes, load=not new)
        self.time_index = TimeIndex(time_index_path, base_offset, config.segment_index_bytes, load=not new)
        missing_index = not self.index.on_disk
        missing_time_index = not self.time_index.on_disk
        self.txn_index = TransactionIndex(
            log_dir / (txn_index_file_name(base_offset) + file_suffix), base_offset, load=not new
        )
        self._bytes_since_last_index_entry = 0
        self._next_offset: int | None = base_offset if self.log.size == 0 else None
        self._max_timestamp_ms, self._offset_of_max_timestamp = self.time_index.last_entry
        self._first_batch_timestamp_ms: int | None = None
        #: (base offset, position) of the last append: a read from there on (a follower or
        #: consumer at the log end) starts its header scan at that position, not at the offset
        #: index entry up to ``index.interval.bytes`` before it; (-1, 0) when unknown.
        self._tail_offset = -1
        self._tail_position = 0
        self.rebuilt_indexes = False
        if self.log.size and (
            missing_index
            or missing_time_index
            or self.index.was_trimmed
            or self.time_index.was_trimmed
            or not self._last_index_entries_valid()
        ):
            logger.warning(
                "segment %s: %s, rebuilding its indexes",
                self.log_path,
                "index missing" if missing_index or missing_time_index else "index invalid",
            )
            self.rebuild_index()
        else:
            self._bytes_since_last_index_entry = self.log.size - self.index.last_entry[1]
        #: the ``.txnindex`` must be rebuilt from the batches by the log (which knows the producer
        #: state at the segment's start): set when the segment was recovered, its indexes were
        #: rebuilt, or the transaction index is corrupt; the log clears it after the rebuild.
        self.txn_index_needs_rebuild = self.rebuilt_indexes or self.txn_index.corrupt

    def _last_index_entries_valid(self) -> bool:
        """Cheap sanity check of indexes loaded from disk (two small reads, no scan): the last
        offset-index entry points at a batch ending at its offset, and the batch of the last
        time-index entry ends at its offset with its timestamp as max (Kafka's
        ``sanityCheck``, a little stricter)."""
        if self.index.entries:
            offset, position = self.index.last_entry
            size = self.log.size
            if position + RECORD_BATCH_OVERHEAD > size:
                return False
            header = self.log.read_header(position)
            if header.last_offset != offset or header.magic != 2 or position + header.size_bytes > size:
                return False
        if self.time_index.entries:
            timestamp, offset = self.time_index.last_entry
            found = self.find_batch(offset)
            if found is None or found[1].last_offset != offset or found[1].max_timestamp != timestamp:
                return False
        return True

    @classmethod
    def open(
        cls,
        log_dir: Path,
        base_offset: int,
        config: LogConfig,
        created_ms: int | None = None,
        file_suffix: str = "",
    ) -> LogSegment:
        """Open (or create) the segment with ``base_offset`` in ``log_dir``. ``file_suffix``
        (e.g. ``.cleaned``) is appended to the three file names (the cleaner's output)."""
        return cls(log_dir, base_offset, config, created_ms, file_suffix)

    @classmethod
    def create(
        cls, log_dir: Path, base_offset: int, config: LogConfig, created_ms: int | None = None
    ) -> LogSegment:
        """A new, empty segment in a directory just created by the caller (no segment files can
        be there, so none is read): only the ``.log`` file is created; the indexes are created
        with the first data, as always."""
        return cls(log_dir, base_offset, config, created_ms, new=True)

    @property
    def file_paths(self) -> tuple[Path, ...]:
        """The ``.log`` path, the ``.index`` and ``.timeindex`` paths once created (with the
        first data), and the ``.txnindex`` when it exists."""
        paths = (self.log_path, *(i.path for i in (self.index, self.time_index) if i.on_disk))
        return (*paths, self.txn_index.path) if self.txn_index.path.exists() else paths

    # -- properties ------------------------------------------------------------------------

    @property
    def size_bytes(self) -> int:
        """Bytes in the ``.log`` file."""
        return self.log.size

    @property
    def next_offset(self) -> int:
        """Offset after the last complete batch (``base_offset`` when empty). Kafka's
        ``LogSegment.readNextOffset``: reads forward from the last index entry."""
        if self._next_offset is None:
            last_offset, pos = self.index.last_entry
            nxt = last_offset + 1 if self.index.entries else self.base_offset
            end = pos
            for p, header in self.log.iter_headers(pos):
                nxt = header.next_offset
                end = p + header.size_bytes
            if end < self.log.size:
                logger.warning(
                    "segment %s: %d bytes of partial batch at the tail", self.log_path, self.log.size - end
                )
            self._next_offset = nxt
        return self._next_offset

    @property
    def has_partial_tail(self) -> bool:
        """True if the file does not end on a batch boundary (needs ``recover``)."""
        _, pos = self.index.last_entry
        end = pos
        for p, header in self.log.iter_headers(pos):
            end = p + header.size_bytes
        return end != self.log.size

    @property
    def max_timestamp_ms(self) -> int:
        """Largest batch max_timestamp in the segment (-1 if empty or without timestamps)."""
        return self._max_timestamp_ms

    @property
    def offset_of_max_timestamp(self) -> int:
        """Last offset of the first batch whose max_timestamp is ``max_timestamp_ms``."""
        return self._offset_of_max_timestamp

    @property
    def first_batch_timestamp_ms(self) -> int:
        """max_timestamp of the first batch (-1 if empty): Kafka's ``rollingBasedTimestamp``."""
        if self._first_batch_timestamp_ms is None:
            if self.log.size < RECORD_BATCH_OVERHEAD:
                return -1
            self._first_batch_timestamp_ms = self.log.read_header(0).max_timestamp
        return self._first_batch_timestamp_ms

    def time_waited_for_roll_ms(self, now_ms: int, batch_max_timestamp_ms: int) -> int:
        """Kafka's ``LogSegment.timeWaitedForRoll``: the incoming batch's timestamp minus the
        first batch's, or wall-clock age when the segment has no timestamps."""
        first = self.first_batch_timestamp_ms
        if first >= 0 and batch_max_timestamp_ms >= 0:
            return batch_max_timestamp_ms - first
        return now_ms - self.created_ms

    def can_append(self, size_bytes: int, last_offset: int, segment_bytes: int) -> bool:
        """True if a batch of ``size_bytes`` ending at ``last_offset`` belongs in this segment:
        it fits ``segment_bytes`` (or the segment is empty), both indexes have room, and the
        offset fits an int32 relative offset."""
        size = self.log.size
        if size and size + size_bytes > segment_bytes:
            return False
        return self.index.can_append(last_offset) and not self.time_index.is_full

    # -- append ----------------------------------------------------------------------------

    def append(
        self,
        records: bytes | bytearray | memoryview,
        first_offset: int,
        last_offset: int,
        max_timestamp_ms: int | None = None,
        batches: Sequence[tuple[int, BatchHeader]] | None = None,
        *,
        head: bytes | bytearray | None = None,
    ) -> int:
        """Append ``records`` (one or more whole batches whose offsets are already assigned) with
        one ``write``. Whenever more than ``index_interval_bytes`` were appended since the
        previous entry, adds an offset-index entry (last offset of the batch, its position) and
        a time-index entry (max timestamp so far, offset of its batch) if the max grew (Kafka's
        ``LogSegment.append``).

        Args:
            max_timestamp_ms: the single batch's max timestamp (read from its header if None).
            batches: (position within ``records``, header) of each batch when ``records`` holds
                more than one batch; ``None`` means ``records`` is a single batch.
            head: the batch's first bytes, written just before ``records`` (one ``writev``;
                single batch only, ``max_timestamp_ms`` given): a leader append of a batch it
                may not patch in place.

        Returns: the file position the records were written at.
        """
        if head is not None and (max_timestamp_ms is None or batches is not None):
            raise ValueError("head is for a single batch with its max_timestamp_ms given")
        position = self.log.size
        if position == 0:  # the indexes exist beside any data: a load rebuilds missing ones
            self.index.create()
            self.time_index.create()
        size_bytes = self.log.append(records, head)  # (a failed write is cut off again)
        self._tail_offset, self._tail_position = first_offset, position
        interval = self.config.index_interval_bytes
        if batches is None:
            if max_timestamp_ms is None:
                max_timestamp_ms = read_header(records).max_timestamp
            if position == 0:  # the segment's first batch: no pread of it at the next roll check
                self._first_batch_timestamp_ms = max_timestamp_ms
            self._track_max_timestamp(max_timestamp_ms, last_offset)
            if self._bytes_since_last_index_entry > interval:
                self._maybe_index(last_offset, position)
            self._bytes_since_last_index_entry += size_bytes
        else:
            if position == 0 and batches:
                self._first_batch_timestamp_ms = batches[0][1].max_timestamp
            for rel_pos, header in batches:
                self._track_max_timestamp(header.max_timestamp, header.last_offset)
                if self._bytes_since_last_index_entry > interval:
                    self._maybe_index(header.last_offset, position + rel_pos)
                self._bytes_since_last_index_entry += header.size_bytes
        self._next_offset = last_offset + 1
        return position

    def _track_max_timestamp(self, max_timestamp_ms: int, last_offset: int) -> None:
        if max_timestamp_ms > self._max_timestamp_ms:
            self._max_timestamp_ms = max_timestamp_ms
            self._offset_of_max_timestamp = last_offset

    def _maybe_index(self, offset: int, position: int) -> None:
        if self.index.can_append(offset):
            self.index.append(offset, position)
            if not self.time_index.is_full:
                self.time_index.maybe_append(self._max_timestamp_ms, self._offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0

    def on_become_inactive(self) -> None:
        """Called when the segment is rolled (or closed cleanly): write the final time-index
        entry so the last entry is the segment's max timestamp, and release index handles."""
        if self._max_timestamp_ms >= 0:
            self.time_index.maybe_append(
                self._max_timestamp_ms, self._offset_of_max_timestamp, skip_full_check=True
            )
        self.index.close()
        self.time_index.close()

    # -- read ------------------------------------------------------------------------------

    def find_batch(self, offset: int, starting_position: int = 0) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset is >= ``offset``, or None
        (Kafka's ``LogSegment.translateOffset``). Starts at the index entry for ``offset``."""
        _, pos = self.index.lookup(offset)
        if 0 <= self._tail_offset <= offset:
            # batches before the last append all end below its base offset
            pos = max(pos, self._tail_position)
        # the target is usually within ~index_interval_bytes of the index entry
        chunk = min(SCAN_CHUNK_BYTES, self.config.index_interval_bytes + 4 * 1024)
        return self.log.search_for_offset(offset, max(pos, starting_position), chunk)

    def _scan_chunk_bytes(self) -> int:
        """A header walk from an index entry usually ends within ``index.interval.bytes``."""
        return min(SCAN_CHUNK_BYTES, self.config.index_interval_bytes + 4 * 1024)

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_message: bool = True,
        max_offset: int | None = None,
        defer_above: int | None = None,
    ) -> SegmentRead | None:
        """Whole batches starting with the batch that contains ``start_offset`` (or the first one
        after it), at most ``max_bytes`` in total, ending at or before byte ``max_position``, with
        base offsets < ``max_offset``. With ``min_one_message`` the first batch is returned even
        when larger than ``max_bytes`` (KIP-74). With ``defer_above``, a read of more bytes than
        that finds its batches from their headers (the offset index skips to near its end) and
        returns the data as a :class:`~broker.log.file_slices.FileSlice`, read later off the
        event loop.

        Returns None if no batch in this segment has an offset >= ``start_offset``; a
        ``SegmentRead`` with empty ``records`` if the limits exclude the first batch.
        """
        found = self.find_batch(start_offset)
        if found is None:
            return None
        start, first = found
        size = self.log.size
        limit = size if max_position is None else min(max_position, size)
        if start >= limit or (max_offset is not None and first.base_offset >= max_offset):
            return SegmentRead(b"", -1, -1, start, start)
        want = min(max(max_bytes, 0), limit - start)
        if defer_above is not None and want > defer_above:
            return self._read_deferred(start, first, want, limit, min_one_message, max_offset)
        data, end, next_offset = self.log.read_batches(start, want, max_offset)
        if not data:
            if not min_one_message or first.size_bytes > limit - start:
                return SegmentRead(b"", -1, -1, start, start)
            whole = self.log.read(first.size_bytes, start)
            return SegmentRead(whole, first.base_offset, first.next_offset, start, start + len(whole))
        return SegmentRead(data, first.base_offset, next_offset, start, end)

    def _read_deferred(
        self,
        start: int,
        first: BatchHeader,
        want: int,
        limit: int,
        min_one_message: bool,
        max_offset: int | None,
    ) -> SegmentRead:
        """:meth:`read` of ``want`` bytes from ``start`` without reading them: the batch headers
        give the end. The scan starts at the last index entry whose batch surely qualifies (it
        ends within ``want`` bytes and its base offset is below ``max_offset``), so it reads
        about ``index.interval.bytes`` of headers, whatever ``want`` is."""
        bound = start + want
        resume = self.index.position_before(bound)
        if max_offset is not None:
            resume = min(resume, self.index.lookup(max_offset - 1)[1])
        end, next_offset = self.log.batches_end(
            max(resume, start), bound, max_offset, self._scan_chunk_bytes()
        )
        if end == 0:
            if not min_one_message or first.size_bytes > limit - start:
                return SegmentRead(b"", -1, -1, start, start)
            end, next_offset = start + first.size_bytes, first.next_offset
        return SegmentRead(self.log.slice(start, end - start), first.base_offset, next_offset, start, end)

    def find_offset_by_timestamp(self, timestamp_ms: int, starting_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record at or after ``starting_offset`` whose
        timestamp is >= ``timestamp_ms``, or None (Kafka's ``LogSegment.findOffsetByTimestamp``).

        Uses the time index to skip every batch known to be older (entries whose timestamp is
        below the target), the offset index to find the byte position, then walks batch
        headers (about two ``index.interval.bytes``) and decodes the one batch that holds
        the answer.
        """
        if self._max_timestamp_ms < timestamp_ms:
            return None
        entry = self.time_index.lookup_before(timestamp_ms)
        start = max(self.base_offset if entry is None else entry[1] + 1, starting_offset)
        _, pos = self.index.lookup(start)
        for p, header in self.log.iter_headers(pos, self._scan_chunk_bytes()):
            if header.last_offset < starting_offset or header.max_timestamp < timestamp_ms:
                continue
            found = self.log.first_record(p, header, timestamp_ms, starting_offset)
            if found is not None:
                return found
        return None

    def max_timestamp_record(self, starting_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record with the segment's max timestamp, or None
        if the segment has no timestamps or that record is below ``starting_offset``. Reads one
        batch (the time index / append path know which)."""
        if self._max_timestamp_ms < 0 or self._offset_of_max_timestamp < starting_offset:
            return None
        found = self.find_batch(self._offset_of_max_timestamp)
        if found is None:
            return None
        p, header = found
        result = self.log.first_record(p, header, self._max_timestamp_ms, starting_offset)
        return result if result is not None and result[1] == self._max_timestamp_ms else None

    def read_bytes(self, position: int, size: int) -> bytes:
        """Raw bytes [position, position + size) of the ``.log`` file (for sendfile-free paths)."""
        return self.log.read(size, position)

    def iter_batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every complete batch from ``start_position`` (no CRC check)."""
        return self.log.iter_headers(start_position)

    # -- recovery / truncation -------------------------------------------------------------

    def _reset_indexes(self) -> None:
        self.index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.txn_index_needs_rebuild = True
        self._bytes_since_last_index_entry = 0
        self._max_timestamp_ms, self._offset_of_max_timestamp = -1, self.base_offset
        self._first_batch_timestamp_ms = None
        self.rebuilt_indexes = True

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        """Index one batch found by a scan (same rules as ``append``)."""
        self._track_max_timestamp(header.max_timestamp, header.last_offset)
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self._maybe_index(header.last_offset, position)
        self._bytes_since_last_index_entry += header.size_bytes

    def _finish_rebuild(self) -> None:
        if self._max_timestamp_ms >= 0:
            self.time_index.maybe_append(
                self._max_timestamp_ms, self._offset_of_max_timestamp, skip_full_check=True
            )

    def rebuild_index(self) -> None:
        """Rebuild the offset and time indexes from batch headers (no CRC check)."""
        self._reset_indexes()
        nxt = self.base_offset
        for p, header in self.log.iter_headers(0):
            self._index_batch(p, header)
            nxt = header.next_offset
        self._next_offset = nxt
        self._finish_rebuild()

    def recover(self) -> int:
        """Validate every batch from the start (CRC, magic, sizes, counts, increasing offsets;
        ``segment_files.validate_stored_batch``), rebuild both indexes, and truncate the file at
        the first invalid or partial batch (Kafka's ``LogSegment.recover``).

        Returns: the number of bytes truncated.
        """
        self._reset_indexes()

        def on_batch(position: int, header: BatchHeader) -> bool:
            if not self.index.can_append(header.last_offset):
                logger.warning("segment %s: offset %d overflows the index", self.log_path, header.last_offset)
                return False
            self._index_batch(position, header)
            return True

        def on_invalid(position: int, reason: str) -> None:
            logger.warning("segment %s: invalid batch at %d: %s", self.log_path, position, reason)

        truncated, next_offset = self.log.recover(self.base_offset, on_batch, on_invalid)
        if truncated:
            logger.warning(
                "segment %s: truncating %d bytes at position %d", self.log_path, truncated, self.log.size
            )
        self._tail_offset, self._tail_position = -1, 0
        self._next_offset = next_offset
        self._finish_rebuild()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` (the batch containing ``offset``
        goes whole, Kafka's ``LogSegment.truncateTo``). Returns the bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, _ = found
        removed = self.log.truncate_to(position)
        self._tail_offset, self._tail_position = -1, 0
        self.index.truncate_to(offset)
        self.index.truncate_to_position(position)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # Recount bytes since the last index entry so future entries stay on schedule.
        _, last_pos = self.index.last_entry
        self._bytes_since_last_index_entry = 0
        nxt = self.base_offset if not self.index.entries else self.index.last_entry[0] + 1
        for p, header in self.log.iter_headers(last_pos):
            self._bytes_since_last_index_entry = p + header.size_bytes - last_pos
            nxt = header.next_offset
        self._next_offset = nxt
        self._recompute_max_timestamp_after_truncation()
        return removed

    def _recompute_max_timestamp_after_truncation(self) -> None:
        ts, off = self.time_index.last_entry
        self._max_timestamp_ms, self._offset_of_max_timestamp = ts, off
        self._first_batch_timestamp_ms = None
        start = self.index.lookup(off + 1)[1] if self.time_index.entries else 0
        for _, header in self.log.iter_headers(start):
            if header.last_offset > off or not self.time_index.entries:
                self._track_max_timestamp(header.max_timestamp, header.last_offset)

    # -- lifecycle -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync the ``.log``, ``.index``, ``.timeindex`` (and ``.txnindex``) files."""
        self.log.flush()
        self.index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Close the files, first writing the final time-index entry (a clean close leaves the
        segment's max timestamp in the time index, so loading needs no scan)."""
        if self.log.fd >= 0 and self.log.size:
            self.on_become_inactive()
        self.log.close()
        self.index.close()
        self.time_index.close()

    def delete(self) -> None:
        """Close (without a final index entry) and remove the segment's files."""
        self.log.close()
        self.log_path.unlink(missing_ok=True)
        self.index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def rename_for_deletion(self) -> list[Path]:
        """Close (without a final index entry) and rename each of the segment's files to
        ``<name>.deleted``; returns the new paths, for :func:`unlink_paths` later, off the event
        loop (Kafka's ``LogSegment.changeFileSuffixes("", DELETED_FILE_SUFFIX)`` before
        ``UnifiedLog.deleteSegmentFiles`` schedules the removal after ``file.delete.delay.ms``).
        A load removes ``.deleted`` files a stop left behind (:mod:`broker.log.log_loader`)."""
        self.log.close()
        self.index.close()
        self.time_index.close()
        renamed = []
        for path in (self.log_path, self.index.path, self.time_index.path, self.txn_index.path):
            doomed = path.with_name(path.name + DELETED_SUFFIX)
            try:
                os.replace(path, doomed)
            except FileNotFoundError:
                continue
            renamed.append(doomed)
        return renamed

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size_bytes={self.log.size})"


def unlink_paths(paths: list[Path]) -> None:
    """Remove the files ``paths`` (those :meth:`LogSegment.rename_for_deletion` returned);
    missing ones are skipped."""
    for path in paths:
        path.unlink(missing_ok=True)
