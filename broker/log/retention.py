"""Which old segments a log may delete (Kafka's ``UnifiedLog.deleteOldSegments`` and its
``deleteLogStartOffsetBreachedSegments`` / ``deleteRetentionSizeBreachedSegments`` /
``deleteRetentionMsBreachedSegments``).

Only whole segments go, oldest first, and only segments wholly below the high watermark. The
active segment counts too (Kafka rolls a fresh one before deleting it) unless it is empty. With
``cleanup.policy`` lacking ``delete`` (compact only) only the log-start-offset rule applies.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .log_segment import LogSegment
    from .unified_log import UnifiedLog

__all__ = [
    "deletable_segment_count",
    "log_start_offset_breached",
    "retention_size_breached",
    "retention_ms_breached",
    "segment_largest_timestamp_ms",
]

logger = logging.getLogger(__name__)

Predicate = Callable[["LogSegment", "LogSegment | None"], bool]


def segment_largest_timestamp_ms(segment: LogSegment) -> int:
    """The segment's max timestamp, or its file's mtime in ms when it holds no timestamps
    (Kafka's ``LogSegment.largestTimestamp``)."""
    if segment.max_timestamp_ms >= 0:
        return segment.max_timestamp_ms
    try:
        return int(os.stat(segment.log_path).st_mtime * 1000)
    except FileNotFoundError:
        return 0


def deletable_segment_count(log: UnifiedLog, predicate: Predicate) -> int:
    """How many leading segments satisfy ``predicate(segment, next_segment)`` while lying
    wholly below the high watermark (an empty active segment never counts)."""
    segments = log.segments
    count = 0
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log.log_end_offset
        if nxt is None and seg.size_bytes == 0:
            break
        if log.high_watermark < upper or not predicate(seg, nxt):
            break
        count += 1
    return count


def log_start_offset_breached(log: UnifiedLog) -> int:
    """Segments wholly below ``log_start_offset`` (after DeleteRecords or a leader's start
    offset): those whose next segment starts at or before it."""
    lso = log.log_start_offset
    return deletable_segment_count(log, lambda seg, nxt: nxt is not None and nxt.base_offset <= lso)


def retention_size_breached(log: UnifiedLog) -> int:
    """Oldest segments to delete so the log fits ``retention.bytes`` (none when -1)."""
    limit = log.config.retention_bytes
    total = log.size_bytes
    if limit < 0 or total < limit:
        return 0
    excess = [total - limit]

    def over(seg: LogSegment, _nxt: LogSegment | None) -> bool:
        if excess[0] - seg.size_bytes >= 0:
            excess[0] -= seg.size_bytes
            return True
        return False

    return deletable_segment_count(log, over)


def retention_ms_breached(log: UnifiedLog, now_ms: int) -> int:
    """Oldest segments whose largest timestamp is more than ``retention.ms`` before
    ``now_ms`` (none when -1)."""
    retention_ms = log.config.retention_ms
    if retention_ms < 0:
        return 0
    return deletable_segment_count(
        log, lambda seg, _nxt: now_ms - segment_largest_timestamp_ms(seg) > retention_ms
    )
