"""Swapping cleaned segments in, crash-safely (Kafka's ``LocalLog.replaceSegments`` and the
``.swap`` handling of ``LogLoader``).

The cleaner writes ``<base>.log.cleaned`` (+ ``.index.cleaned``, ``.timeindex.cleaned``).
:func:`commit_swap` renames them to ``.swap`` - the commit point -, deletes the replaced
segments, then drops the suffix. A crash before the commit point leaves ``.cleaned`` files (the
loader deletes them: the old segments are intact); after it, ``.swap`` files that
:func:`complete_interrupted_swaps` finishes at the next load. Old segments that survive a crash
past the end of the cleaned data hold only superseded records at higher offsets, so nothing is
lost or duplicated.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from spark_kafkalite.atomic_file import fsync_dir

from .segment_files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_next_offset,
    parse_segment_file_name,
    segment_file_names,
)

if TYPE_CHECKING:
    from .log_segment import LogSegment

__all__ = ["commit_swap", "complete_interrupted_swaps", "fsync_dir"]

logger = logging.getLogger(__name__)

_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def commit_swap(
    directory: Path,
    old: Sequence[LogSegment],
    cleaned: LogSegment,
    delete_segment: Callable[[LogSegment], None] | None = None,
) -> None:
    """Replace the files of the segments ``old`` by those of the closed segment ``cleaned``
    (``.cleaned`` files with the same base offset as ``old[0]``). Afterwards the directory holds
    ``<base>.log/.index/.timeindex`` with the cleaned data; the caller reopens it. The old
    segments go through ``delete_segment`` (default ``LogSegment.delete``)."""
    swaps = []
    for path in cleaned.file_paths:
        final = path.with_name(path.name.removesuffix(CLEANED_SUFFIX))
        swap = final.with_name(final.name + SWAP_SUFFIX)
        os.replace(path, swap)
        swaps.append((swap, final))
    fsync_dir(directory)
    for seg in old:
        if delete_segment is None:
            seg.delete()
        else:
            delete_segment(seg)
    for swap, final in reversed(swaps):  # the .log last: while its .swap exists, a load redoes this
        os.replace(swap, final)
    fsync_dir(directory)


def complete_interrupted_swaps(directory: Path) -> None:
    """Finish swaps a crash interrupted after their commit point (Kafka's ``LogLoader``
    handling of ``.swap`` files): for each ``<base>.log.swap``, delete the segments it replaces
    (base ``base`` and bases in [base, the swap's next offset)) and drop the ``.swap`` suffix."""
    swaps: list[int] = []
    for entry in os.scandir(directory):
        parsed = parse_segment_file_name(entry.name)
        if parsed is not None and parsed[1] == LOG_SUFFIX + SWAP_SUFFIX:
            swaps.append(parsed[0])
    for base in sorted(swaps):
        swap_log = directory / (segment_file_names(base)[0] + SWAP_SUFFIX)
        next_offset = file_next_offset(swap_log, base)
        for entry in os.scandir(directory):
            parsed = parse_segment_file_name(entry.name)
            if parsed is None or parsed[1] not in _SEGMENT_SUFFIXES:
                continue
            if parsed[0] == base or base <= parsed[0] < next_offset:
                logger.warning(
                    "%s: completing a cleaner swap, deleting replaced %s", directory.name, entry.name
                )
                os.unlink(entry.path)
        for name in segment_file_names(base):
            swapped = directory / (name + SWAP_SUFFIX)
            if swapped.exists():
                os.replace(swapped, directory / name)
        logger.warning("%s: completed the swap of cleaned segment %d", directory.name, base)
    for entry in os.scandir(directory):  # index .swap files whose .log was already renamed
        if entry.name.endswith(SWAP_SUFFIX):
            os.unlink(entry.path)
