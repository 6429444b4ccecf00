"""Sparse time index of one log segment (Kafka's ``TimeIndex``).

File ``<20-digit base offset>.timeindex``: 12-byte big-endian entries
``(timestamp int64, relative_offset int32)``. An entry ``(T, O)`` means: the largest batch
max_timestamp among the segment's batches up to the batch whose last offset is ``O`` is ``T``,
and that batch is the first one to reach ``T``. Entries are appended (``maybe_append``) at the
same ``index.interval.bytes`` boundaries as the offset index whenever the segment's max
timestamp grew, plus one final entry when the segment is rolled or closed, so the last entry
always carries the segment's max timestamp (Kafka's ``LogSegment.onBecomeInactiveSegment``).
Timestamps are strictly increasing; offsets strictly increasing.

Like :mod:`broker.log.offset_index`, the file is not preallocated: entries are appended with
one ``write`` each and mirrored in memory for binary search.
"""

from __future__ import annotations

import logging
import os
import struct
from bisect import bisect_left, bisect_right
from pathlib import Path

from .index_file import IndexFile, write_all

__all__ = ["TimeIndex", "TIME_INDEX_ENTRY_SIZE", "TIME_INDEX_SUFFIX"]

logger = logging.getLogger(__name__)

TIME_INDEX_ENTRY_SIZE = 12
TIME_INDEX_SUFFIX = ".timeindex"
_ENTRY = struct.Struct(">qi")
_INT32_MAX = 2**31 - 1


class TimeIndex(IndexFile):
    """Timestamp -> offset index of one segment.

    Args:
        path: the ``.timeindex`` file (created when missing).
        base_offset: the segment's base offset.
        max_index_size_bytes: ``segment.index.bytes``; ``is_full`` at this many bytes.

    Attributes:
        was_trimmed: True if loading dropped invalid trailing bytes (the caller should rebuild:
            the final max-timestamp entry may be gone).
    """

    def __init__(self, path: Path, base_offset: int, max_index_size_bytes: int = 10485760) -> None:
        self._init_file(path)
        self.base_offset = base_offset
        self.max_entries = max(2, max_index_size_bytes // TIME_INDEX_ENTRY_SIZE)
        self._timestamps: list[int] = []
        self._relative_offsets: list[int] = []
        self.was_trimmed = False
        self._load()

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
            self.path.touch()
        usable = len(raw) - len(raw) % TIME_INDEX_ENTRY_SIZE
        keep = 0
        prev_ts, prev_rel = -(2**63), -1
        for ts, rel in _ENTRY.iter_unpack(raw[:usable]):
            if ts <= prev_ts or rel <= prev_rel or rel < 0:
                break
            self._timestamps.append(ts)
            self._relative_offsets.append(rel)
            prev_ts, prev_rel = ts, rel
            keep += 1
        if keep * TIME_INDEX_ENTRY_SIZE != len(raw):
            self.was_trimmed = True
            logger.warning(
                "time index %s: trimming %d invalid trailing bytes",
                self.path,
                len(raw) - keep * TIME_INDEX_ENTRY_SIZE,
            )
            os.truncate(self.path, keep * TIME_INDEX_ENTRY_SIZE)

    # -- queries ---------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._timestamps)

    @property
    def is_full(self) -> bool:
        return len(self._timestamps) >= self.max_entries

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp_ms, absolute offset) of the last entry, or (-1, base_offset) when empty."""
        if not self._timestamps:
            return -1, self.base_offset
        return self._timestamps[-1], self.base_offset + self._relative_offsets[-1]

    def entry(self, n: int) -> tuple[int, int]:
        """(timestamp_ms, absolute offset) of entry ``n``."""
        return self._timestamps[n], self.base_offset + self._relative_offsets[n]

    def lookup_before(self, target_timestamp_ms: int) -> tuple[int, int] | None:
        """(timestamp_ms, offset) of the last entry whose timestamp is < ``target_timestamp_ms``,
        or None. Every batch up to the one ending at that offset has max_timestamp <
        target, so a search for the first record >= target may start right after it."""
        i = bisect_left(self._timestamps, target_timestamp_ms) - 1
        if i < 0:
            return None
        return self._timestamps[i], self.base_offset + self._relative_offsets[i]

    def lookup(self, target_timestamp_ms: int) -> tuple[int, int]:
        """Kafka's ``TimeIndex.lookup``: (timestamp, offset) of the last entry whose timestamp is
        <= the target, or (-1, base_offset)."""
        i = bisect_right(self._timestamps, target_timestamp_ms) - 1
        if i < 0:
            return -1, self.base_offset
        return self._timestamps[i], self.base_offset + self._relative_offsets[i]

    # -- mutation --------------------------------------------------------------------------

    def maybe_append(self, timestamp_ms: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp_ms, offset)`` if ``timestamp_ms`` is larger than the last entry's
        (and ``offset`` is after it). Returns True if an entry was written.

        Raises:
            ValueError: the index is full (unless ``skip_full_check``, used for the final entry
                on roll) or the relative offset does not fit int32.
        """
        if self._timestamps and (
            timestamp_ms <= self._timestamps[-1] or offset - self.base_offset <= self._relative_offsets[-1]
        ):
            return False
        if timestamp_ms < 0:
            return False
        rel = offset - self.base_offset
        if not 0 <= rel <= _INT32_MAX:
            raise ValueError(f"time index entry offset {offset} overflows int32 in {self.path}")
        if self.is_full and not skip_full_check:
            raise ValueError(f"time index {self.path} is full ({self.entries} entries)")
        write_all(self._ensure_fd(), _ENTRY.pack(timestamp_ms, rel))
        self._dirty = True
        self._timestamps.append(timestamp_ms)
        self._relative_offsets.append(rel)
        return True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (Kafka's ``TimeIndex.truncateTo``)."""
        keep = (
            bisect_left(self._relative_offsets, offset - self.base_offset) if offset > self.base_offset else 0
        )
        if keep >= len(self._timestamps):
            return
        del self._timestamps[keep:]
        del self._relative_offsets[keep:]
        os.ftruncate(self._ensure_fd(), keep * TIME_INDEX_ENTRY_SIZE)
        self._dirty = True

    def reset(self) -> None:
        """Remove all entries (before a rebuild)."""
        self.truncate_to(self.base_offset)
        self.was_trimmed = False

    def __repr__(self) -> str:
        return f"TimeIndex({self.path.name}, entries={self.entries})"
