"""Offset lookups by timestamp across a log's segments (Kafka's
``UnifiedLog.fetchOffsetByTimestamp`` for a target timestamp and for ``MAX_TIMESTAMP``).

Segment max timestamps need not grow with offsets, so a binary search runs over their running
maximum: the first segment whose running max reaches the target is the first that can hold a
record at or after it. Inside a segment the time index and offset index do the rest
(:meth:`LogSegment.find_offset_by_timestamp`). Nothing here scans a whole log.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from spark_kafkalite.protocol.record_batch import decode_batch

from .log_segment import LogSegment

__all__ = ["TimestampLookup"]


class TimestampLookup:
    """Cached running max of the inactive segments' max timestamps (inactive segments never
    change; call :meth:`invalidate` whenever the segment list does)."""

    def __init__(self) -> None:
        self._prefix: list[int] | None = None
        self._first = 0

    def invalidate(self) -> None:
        self._prefix = None

    def _running_max(self, segments: Sequence[LogSegment], first: int) -> list[int]:
        prefix = self._prefix
        if prefix is None or len(prefix) != len(segments) - 1 or self._first != first:
            prefix = []
            running = -1
            for i, seg in enumerate(segments[:-1]):
                if i >= first:
                    running = max(running, seg.max_timestamp_ms)
                prefix.append(running)
            self._prefix, self._first = prefix, first
        return prefix

    @staticmethod
    def _first_live(base_offsets: Sequence[int], log_start_offset: int) -> int:
        return max(0, bisect_right(base_offsets, log_start_offset) - 1)

    def fetch_offset_by_timestamp(
        self,
        segments: Sequence[LogSegment],
        base_offsets: Sequence[int],
        log_start_offset: int,
        timestamp_ms: int,
    ) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record at or after ``log_start_offset`` whose
        timestamp is >= ``timestamp_ms``, or None."""
        first = self._first_live(base_offsets, log_start_offset)
        i = bisect_left(self._running_max(segments, first), timestamp_ms, lo=first)
        while i < len(segments):
            seg = segments[i]
            if seg.max_timestamp_ms >= timestamp_ms:
                found = seg.find_offset_by_timestamp(timestamp_ms, log_start_offset)
                if found is not None:
                    return found
            i += 1
        return None

    def latest_timestamp(
        self, segments: Sequence[LogSegment], base_offsets: Sequence[int], log_start_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record with the largest timestamp at or after
        ``log_start_offset`` (KIP-734), or None when there is no timestamp. Reads one batch
        unless that record lies below ``log_start_offset`` (then the live batches are scanned)."""
        first = self._first_live(base_offsets, log_start_offset)
        prefix = self._running_max(segments, first)
        largest = max(prefix[-1] if len(prefix) > first else -1, segments[-1].max_timestamp_ms)
        if largest < 0:
            return None
        found = segments[bisect_left(prefix, largest, lo=first)].max_timestamp_record(log_start_offset)
        if found is not None:
            return found
        return _scan_max_timestamp(segments[first:], log_start_offset)


def _scan_max_timestamp(segments: Sequence[LogSegment], log_start_offset: int) -> tuple[int, int] | None:
    """Batch-header scan for the first record with the largest timestamp at or after
    ``log_start_offset``; only candidate batches are decoded."""
    best: tuple[int, int] | None = None  # (timestamp, offset)
    for seg in segments:
        if best is not None and seg.max_timestamp_ms <= best[0]:
            continue
        for pos, header in seg.iter_batches(seg.index.lookup(log_start_offset)[1]):
            if header.last_offset < log_start_offset or (
                best is not None and header.max_timestamp <= best[0]
            ):
                continue
            decoded = decode_batch(seg.read_bytes(pos, header.size_bytes), verify_crc=False)
            for offset, ts in zip(decoded.offsets, decoded.timestamps_ms, strict=True):
                if offset >= log_start_offset and ts >= 0 and (best is None or ts > best[0]):
                    best = (ts, offset)
    return None if best is None else (best[1], best[0])
