"""Loading a partition directory into segments (Kafka's ``LogLoader``).

Steps, as Kafka's ``LogLoader.load``:

1. remove temporary files: ``*.tmp``, ``*.deleted`` and ``*.cleaned`` (a cleaner that had not
   reached its swap point);
2. complete interrupted swaps: a ``<base>.log.swap`` means the cleaner had committed a cleaned
   segment; the old segments it replaces (base offsets in [base, the swap's next offset), and
   the one named like it) are deleted and the ``.swap`` suffix is removed from its files;
3. remove orphan indexes (no ``.log``) and open every segment (a segment rebuilds indexes that
   are missing or invalid);
4. after an unclean shutdown, recover (validate batch by batch) from the segment holding the
   recovery point; the first invalid or partial batch truncates its segment and later segments
   are deleted. After a clean shutdown only a partial tail of the active segment is recovered.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from .log_config import LogConfig
from .log_segment import LogSegment
from .segment_files import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    parse_segment_file_name,
)
from .segment_swap import complete_interrupted_swaps

__all__ = ["LoadedSegments", "load_segments"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class LoadedSegments:
    """Outcome of :func:`load_segments`: segments in base-offset order (at least one; the last
    is active) and the offsets the log starts with."""

    segments: list[LogSegment] = field(default_factory=list)
    recovered_segments: int = 0
    log_start_offset: int = 0
    log_end_offset: int = 0
    recovery_point: int = 0


def load_segments(
    directory: Path,
    config: LogConfig,
    *,
    recovery_point: int,
    log_start_offset: int | None,
    clean: bool,
    now_ms: int,
) -> LoadedSegments:
    """Load (recovering as needed) the segments of one partition directory.

    Args:
        recovery_point: offset below which data is known to be flushed (checkpoint).
        log_start_offset: from the checkpoint, or None.
        clean: the log dir had the clean-shutdown marker.
        now_ms: creation time recorded in the opened segments.
    """
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith((".tmp", DELETED_SUFFIX, CLEANED_SUFFIX)):
            # deleteIfExists, as Kafka's LogLoader: a delayed delete (file.delete.delay.ms) of
            # this process may remove a .deleted file between the scan and this unlink
            Path(entry.path).unlink(missing_ok=True)
    complete_interrupted_swaps(directory)
    bases: set[int] = set()
    for entry in os.scandir(directory):
        parsed = parse_segment_file_name(entry.name)
        if parsed is not None and parsed[1] == LOG_SUFFIX:
            bases.add(parsed[0])
    for entry in os.scandir(directory):  # orphan indexes (no .log) go
        parsed = parse_segment_file_name(entry.name)
        if (
            parsed is not None
            and parsed[1] in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
            and parsed[0] not in bases
        ):
            Path(entry.path).unlink(missing_ok=True)
    out = LoadedSegments()
    segments = out.segments
    for base in sorted(bases):
        segments.append(LogSegment.open(directory, base, config, now_ms))

    if segments:
        if clean:
            if segments[-1].has_partial_tail:
                logger.warning("%s: partial batch after a clean shutdown, recovering", segments[-1].log_path)
                out.recovered_segments = _recover_from(segments, len(segments) - 1)
        else:
            start = max(0, bisect_right([s.base_offset for s in segments], recovery_point) - 1)
            out.recovered_segments = _recover_from(segments, start)
    if not segments:
        base = log_start_offset if log_start_offset is not None else 0
        segments.append(LogSegment.open(directory, base, config, now_ms))
    for seg in segments[:-1]:
        seg.on_become_inactive()  # no-op unless recovery rebuilt its indexes

    out.log_end_offset = segments[-1].next_offset
    first_base = segments[0].base_offset
    lso = first_base if log_start_offset is None else max(first_base, log_start_offset)
    out.log_start_offset = min(lso, out.log_end_offset)
    out.recovery_point = (
        out.log_end_offset if clean or out.recovered_segments else min(recovery_point, out.log_end_offset)
    )
    logger.info(
        "loaded log %s: %d segment(s), log_start_offset=%d log_end_offset=%d (%s)",
        directory.name,
        len(segments),
        out.log_start_offset,
        out.log_end_offset,
        "clean" if clean else f"recovered {out.recovered_segments} segment(s)",
    )
    return out


def _recover_from(segments: list[LogSegment], start: int) -> int:
    """Recover ``segments[start:]`` in order; on a truncation, delete the later segments.
    Returns how many segments were scanned."""
    scanned = 0
    i = start
    while i < len(segments):
        seg = segments[i]
        truncated = seg.recover()
        scanned += 1
        if truncated:
            logger.warning("%s: recovery truncated %d bytes", seg.log_path, truncated)
            for doomed in segments[i + 1 :]:
                logger.warning("deleting segment %s after a truncation", doomed.log_path)
                doomed.delete()
            del segments[i + 1 :]
            break
        i += 1
    return scanned
