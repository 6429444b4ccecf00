"""The segments of one partition's log and what is done to them alone (Kafka's ``LocalLog``).

A :class:`LocalLog` holds the ordered :class:`~broker.log.log_segment.LogSegment` list of one
partition directory and their base offsets, and performs the segment-level operations: roll,
read across segments, collect aborted transactions, look up offsets by timestamp, truncate,
remove leading segments, swap in a cleaned segment, flush. It knows no offsets beyond what its
callers pass: the log start offset, high watermark, log end offset and recovery point, the
producer state and the leader epoch cache belong to :class:`~broker.log.unified_log.UnifiedLog`
(as in Kafka, where ``UnifiedLog`` wraps a ``LocalLog``).

Single-threaded (the event loop); nothing here awaits.
"""

from __future__ import annotations

import functools
import logging
from bisect import bisect_right
from collections.abc import Callable, Sequence
from pathlib import Path

from spark_kafkalite.protocol.record_batch import RECORD_BATCH_OVERHEAD, BatchHeader

from .file_slices import DeferredRecords, FileSlice
from .log_config import LogConfig
from .log_results import FetchDataInfo
from .log_segment import LogSegment, unlink_paths
from .segment_swap import commit_swap
from .timestamp_lookup import TimestampLookup
from .transaction_index import AbortedTxn

__all__ = ["LocalLog"]

logger = logging.getLogger(__name__)


class LocalLog:
    """The segment list of one partition directory (Kafka's ``LocalLog``).

    Attributes:
        dir: the partition directory ``<topic>-<partition>/``.
        segments: the ``LogSegment`` list, ascending base offsets; the last is active. Mutated
            in place only (callers may hold the list).
        base_offsets: ``segments``' base offsets, for bisection.
        time_ms: the wall clock in ms (opens new segments with their creation time).

    ``delete_later(delay_ms, fn)`` runs ``fn`` (unlinking the ``.deleted`` files of removed
    segments) ``delay_ms`` later off the event loop; None: removed segments are unlinked at once.
    """

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        time_ms: Callable[[], int],
        delete_later: Callable[[int, Callable[[], None]], None] | None,
    ) -> None:
        self.dir = dir
        self._config = config
        self.time_ms = time_ms
        self._delete_later = delete_later
        self.segments: list[LogSegment] = []
        self.base_offsets: list[int] = []
        self._timestamps = TimestampLookup()

    @property
    def config(self) -> LogConfig:
        """The ``LogConfig``; assigning one applies it to every segment (index interval)."""
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        for seg in self.segments:
            seg.config = config

    @property
    def active_segment(self) -> LogSegment:
        """The last segment, the one appends go to."""
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        """Bytes of ``.log`` data across segments."""
        return sum(seg.size_bytes for seg in self.segments)

    def segment_index(self, offset: int) -> int:
        """Index in :attr:`segments` of the segment that holds ``offset`` (0 below the first)."""
        return max(0, bisect_right(self.base_offsets, offset) - 1)

    # -- segment list ----------------------------------------------------------------------

    def add_segment(self, seg: LogSegment) -> None:
        """Append ``seg`` as the new active segment."""
        self.segments.append(seg)
        self.base_offsets.append(seg.base_offset)
        self._timestamps.invalidate()

    def delete_segments_from(self, i: int) -> None:
        """Delete the files of ``segments[i:]`` now and drop them from the list."""
        for seg in self.segments[i:]:
            logger.warning("%s: deleting segment %s", self.dir.name, seg.log_path.name)
            seg.delete()
        del self.segments[i:]
        del self.base_offsets[i:]
        self._timestamps.invalidate()

    def roll(self, base_offset: int) -> LogSegment:
        """Open a new active segment at ``base_offset`` (Kafka's ``LocalLog.roll``); an empty
        active segment is replaced (or returned as is when it already starts there), a non-empty
        one becomes inactive (final time-index entry, index handles released)."""
        active = self.segments[-1]
        if active.size_bytes == 0:
            if active.base_offset == base_offset:
                return active
            self.delete_segments_from(len(self.segments) - 1)
        else:
            active.on_become_inactive()
        seg = LogSegment.open(self.dir, base_offset, self._config, self.time_ms())
        self.add_segment(seg)
        return seg

    def truncate_to(self, offset: int) -> int:
        """Remove everything at offsets >= ``offset`` (``offset`` >= the first base offset; a
        batch containing it goes whole) and return the new log end offset (Kafka's
        ``LocalLog.truncateTo``)."""
        i = bisect_right(self.base_offsets, offset - 1)  # first segment with base >= offset
        self.delete_segments_from(max(i, 1))  # keep the first segment (its base is <= offset)
        active = self.segments[-1]
        active.truncate_to(offset)
        return active.next_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and open an empty one at ``offset`` (Kafka's
        ``LocalLog.truncateFullyAndStartAt``)."""
        self.delete_segments_from(0)
        self.add_segment(LogSegment.open(self.dir, offset, self._config, self.time_ms()))

    def remove_leading_segments(self, count: int, reason: str) -> None:
        """Drop the first ``count`` segments (``count`` < ``len(segments)``) and delete their
        files (Kafka's ``LocalLog.removeAndDeleteSegments``)."""
        doomed = self.segments[:count]
        del self.segments[:count]
        del self.base_offsets[:count]
        self._timestamps.invalidate()
        for seg in doomed:
            logger.info("%s: deleting segment %d (%s)", self.dir.name, seg.base_offset, reason)
            self.delete_segment_files(seg)

    def delete_segment_files(self, seg: LogSegment) -> None:
        """Kafka's ``LocalLog.deleteSegmentFiles``: rename the files of ``seg`` (no longer in
        :attr:`segments`) to ``.deleted`` now and unlink them ``file.delete.delay.ms`` later,
        off the event loop; without ``delete_later``, unlink them now."""
        if self._delete_later is None:
            seg.delete()
            return
        paths = seg.rename_for_deletion()
        self._delete_later(self._config.file_delete_delay_ms, functools.partial(unlink_paths, paths))

    def replace_segments(self, old: Sequence[LogSegment], cleaned: LogSegment) -> LogSegment:
        """Swap the closed cleaner output ``cleaned`` in for the consecutive inactive segments
        ``old`` (Kafka's ``LocalLog.replaceSegments``); see ``UnifiedLog.replace_segments``.

        Raises:
            ValueError: ``old`` is no longer a run of inactive segments of this log, or
                ``cleaned`` does not start at ``old[0].base_offset``.
        """
        if not old:
            raise ValueError(f"{self.dir.name}: nothing to replace")
        try:
            i = next(n for n, seg in enumerate(self.segments) if seg is old[0])
        except StopIteration:
            raise ValueError(f"{self.dir.name}: segment {old[0].base_offset} is gone") from None
        j = i + len(old)
        if j >= len(self.segments) or any(a is not b for a, b in zip(self.segments[i:j], old, strict=True)):
            raise ValueError(f"{self.dir.name}: segments {[s.base_offset for s in old]} changed")
        if cleaned.base_offset != old[0].base_offset:
            raise ValueError(
                f"{self.dir.name}: cleaned segment base {cleaned.base_offset} != {old[0].base_offset}"
            )
        commit_swap(self.dir, old, cleaned, self.delete_segment_files)
        new = LogSegment.open(self.dir, cleaned.base_offset, self._config, self.time_ms())
        new.on_become_inactive()
        self.segments[i:j] = [new]
        self.base_offsets[i:j] = [new.base_offset]
        self._timestamps.invalidate()
        return new

    def append_stored_batches(
        self,
        view: memoryview,
        batches: Sequence[tuple[int, BatchHeader]],
        segment_for: Callable[[int, int, int, int], LogSegment],
    ) -> None:
        """Append ``batches`` ((position in ``view``, header) pairs of whole batches that
        already carry offsets, ascending) with one write per run of batches that fits the same
        segment. ``segment_for(size_bytes, first_offset, last_offset, max_timestamp_ms)`` is the
        segment to append a run's first batch to (rolling first if it must); the run grows while
        the segment stays within ``segment.bytes`` and its offset index can take the offsets."""
        segment_bytes = self._config.segment_bytes
        i = 0
        while i < len(batches):
            p0, h0 = batches[i]
            seg = segment_for(h0.size_bytes, h0.base_offset, h0.last_offset, h0.max_timestamp)
            run = h0.size_bytes
            j = i + 1
            while j < len(batches):
                hj = batches[j][1]
                if seg.size_bytes + run + hj.size_bytes > segment_bytes or not seg.index.can_append(
                    hj.last_offset
                ):
                    break
                run += hj.size_bytes
                j += 1
            group = batches[i:j]
            seg.append(
                view[p0 : p0 + run],
                h0.base_offset,
                group[-1][1].last_offset,
                max(h.max_timestamp for _, h in group),
                batches=[(p - p0, h) for p, h in group],
            )
            i = j

    # -- read ------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        limit: int,
        min_one_message: bool,
        include_aborted_txns: bool,
        defer_above: int | None,
    ) -> FetchDataInfo:
        """Whole batches from the one holding ``fetch_offset`` (a valid offset below ``limit``),
        never one whose base offset is >= ``limit``, continuing into later segments while
        ``max_bytes`` leaves room (Kafka's ``LocalLog.read``); the arguments are those of
        ``UnifiedLog.read``."""
        segments = self.segments
        i = max(0, bisect_right(self.base_offsets, fetch_offset) - 1)  # (segment_index, inlined)
        pieces: list[bytes | memoryview | FileSlice] = []
        first_batch_offset = -1
        remaining = max_bytes
        offset = fetch_offset
        while i < len(segments):
            seg = segments[i]
            if seg.base_offset >= limit:
                break
            res = seg.read(offset, remaining, None, min_one_message and not pieces, limit, defer_above)
            i += 1
            if res is None:
                continue
            if not res.records:
                break
            pieces.append(res.records)
            if first_batch_offset < 0:
                first_batch_offset = res.first_offset
            remaining -= len(res.records)
            offset = res.next_offset
            if res.end_position < seg.size_bytes or remaining < RECORD_BATCH_OVERHEAD:
                break
        aborted = self.collect_aborted_transactions(fetch_offset, offset) if include_aborted_txns else None
        if not pieces:
            return FetchDataInfo(b"", aborted_transactions=aborted)
        if any(isinstance(piece, FileSlice) for piece in pieces):
            return FetchDataInfo(DeferredRecords(pieces), first_batch_offset, aborted)
        data = pieces[0] if len(pieces) == 1 else b"".join(pieces)  # type: ignore[arg-type]
        return FetchDataInfo(data, first_batch_offset, aborted)  # type: ignore[arg-type]

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset): from the
        ``.txnindex`` of the segment holding ``start_offset`` onwards until an entry's
        ``last_stable_offset`` reaches the upper bound (Kafka's
        ``LocalLog.collectAbortedTransactions``)."""
        out: list[AbortedTxn] = []
        for seg in self.segments[self.segment_index(start_offset) :]:
            index = seg.txn_index
            if not index.entries:  # most segments: skip without a call (read_committed walks them all)
                continue
            found, complete = index.collect_aborted_txns(start_offset, upper_bound_offset)
            out.extend(found)
            if complete:
                break
        return out

    def fetch_offset_by_timestamp(self, log_start_offset: int, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record at or after ``log_start_offset`` whose
        timestamp is >= ``timestamp_ms``, or None: see :mod:`broker.log.timestamp_lookup`."""
        return self._timestamps.fetch_offset_by_timestamp(
            self.segments, self.base_offsets, log_start_offset, timestamp_ms
        )

    def latest_timestamp(self, log_start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record with the largest timestamp at or after
        ``log_start_offset``, or None for a log without timestamps."""
        return self._timestamps.latest_timestamp(self.segments, self.base_offsets, log_start_offset)

    # -- flush, close ----------------------------------------------------------------------

    def segments_from(self, offset: int, up_to: int | None = None) -> list[LogSegment]:
        """Segments holding offsets in [offset, up_to) (up_to None: to the end)."""
        tail = self.segments[self.segment_index(offset) :]
        return tail if up_to is None else [seg for seg in tail if seg.base_offset < up_to]

    def close(self) -> None:
        """Close every segment's files (no flush)."""
        for seg in self.segments:
            seg.close()
