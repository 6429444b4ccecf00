"""Sparse offset index of one log segment (Kafka's ``OffsetIndex``).

File ``<20-digit base offset>.index``: a sequence of 8-byte big-endian entries
``(relative_offset int32, position int32)``. ``relative_offset`` is the *last* offset of the batch
that starts at byte ``position`` of the ``.log`` file, minus the segment's base offset (as Kafka's
``LogSegment.append`` does). Entries are strictly increasing in both fields.

Unlike Kafka we do not preallocate and mmap the file: entries are appended with one unbuffered
``write`` each (one every ``index.interval.bytes`` of log), and mirrored in memory for binary
search, so there is nothing to trim on roll or close. ``max_index_size_bytes`` bounds the entry
count; the segment rolls when the index is full.
"""

from __future__ import annotations

import logging
import os
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

from .index_file import IndexFile, write_all

__all__ = ["OffsetIndex", "INDEX_ENTRY_SIZE"]

logger = logging.getLogger(__name__)

INDEX_ENTRY_SIZE = 8
_INT32_MAX = 2**31 - 1


class OffsetIndex(IndexFile):
    """Offset -> file position index of one segment.

    Args:
        path: the ``.index`` file (created when missing).
        base_offset: the segment's base offset.
        max_index_size_bytes: ``segment.index.bytes``; ``is_full`` once this many bytes of
            entries exist.
    """

    def __init__(self, path: Path, base_offset: int, max_index_size_bytes: int = 10485760) -> None:
        self._init_file(path)  # the fd opens on the first write: rolled segments hold none
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size_bytes // INDEX_ENTRY_SIZE)
        self._relative_offsets = array("i")
        self._positions = array("i")
        self.was_trimmed = False  # loading dropped invalid entries: the segment rebuilds it
        self._load()

    # -- loading ---------------------------------------------------------------------------

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
            self.path.touch()
        usable = len(raw) - len(raw) % INDEX_ENTRY_SIZE
        entries = array("i")
        entries.frombytes(raw[:usable])
        if sys.byteorder == "little":
            entries.byteswap()
        rel = entries[0::2]
        pos = entries[1::2]
        # Keep the longest strictly increasing prefix (a crash or a preallocated Kafka index
        # leaves zero entries at the tail).
        keep = 0
        prev_rel, prev_pos = -1, 0
        for r, p in zip(rel, pos, strict=True):
            if r <= prev_rel or p <= prev_pos:
                break
            prev_rel, prev_pos = r, p
            keep += 1
        self._relative_offsets = rel[:keep]
        self._positions = pos[:keep]
        if keep * INDEX_ENTRY_SIZE != len(raw):
            self.was_trimmed = True
            logger.warning(
                "index %s: trimming %d invalid trailing bytes", self.path, len(raw) - keep * INDEX_ENTRY_SIZE
            )
            os.truncate(self.path, keep * INDEX_ENTRY_SIZE)

    # -- queries ---------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """Number of entries."""
        return len(self._positions)

    @property
    def is_full(self) -> bool:
        return len(self._positions) >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return len(self._positions) * INDEX_ENTRY_SIZE

    @property
    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base_offset, 0) when empty."""
        if not self._positions:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[-1], self._positions[-1]

    def entry(self, n: int) -> tuple[int, int]:
        """(absolute offset, position) of entry ``n``."""
        return self.base_offset + self._relative_offsets[n], self._positions[n]

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(absolute offset, position) of the largest entry whose offset is <= ``target_offset``,
        or (base_offset, 0) when there is none. Reading batches forward from ``position`` reaches
        the batch containing ``target_offset``."""
        rel = target_offset - self.base_offset
        if rel > _INT32_MAX:
            rel = _INT32_MAX
        i = bisect_right(self._relative_offsets, rel) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[i], self._positions[i]

    # -- mutation --------------------------------------------------------------------------

    def can_append(self, offset: int) -> bool:
        """True if ``offset`` fits an int32 relative offset and the index is not full."""
        return not self.is_full and 0 <= offset - self.base_offset <= _INT32_MAX

    def append(self, offset: int, position: int) -> None:
        """Add an entry for the batch whose last offset is ``offset`` starting at byte ``position``.

        Raises:
            ValueError: the entry does not increase both fields, the index is full, or a value
                does not fit int32 (Kafka's ``InvalidOffsetException`` / ``IndexOffsetOverflow``).
        """
        rel = offset - self.base_offset
        if self.is_full:
            raise ValueError(f"index {self.path} is full ({self.entries} entries)")
        if not (0 <= rel <= _INT32_MAX and 0 <= position <= _INT32_MAX):
            raise ValueError(f"index entry ({offset}, {position}) overflows int32 in {self.path}")
        if self._positions and (rel <= self._relative_offsets[-1] or position <= self._positions[-1]):
            raise ValueError(
                f"index entry ({offset}, {position}) is not after the last entry {self.last_entry}"
            )
        write_all(self._ensure_fd(), rel.to_bytes(4, "big") + position.to_bytes(4, "big"))
        self._dirty = True
        self._relative_offsets.append(rel)
        self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (Kafka's ``OffsetIndex.truncateTo``)."""
        keep = (
            bisect_left(self._relative_offsets, offset - self.base_offset) if offset > self.base_offset else 0
        )
        self._truncate_entries(keep)

    def truncate_to_position(self, position: int) -> None:
        """Remove every entry whose position is >= ``position`` (after the log file shrank)."""
        self._truncate_entries(bisect_left(self._positions, position))

    def reset(self) -> None:
        """Remove all entries (before rebuilding the index)."""
        self._truncate_entries(0)
        self.was_trimmed = False

    def _truncate_entries(self, keep: int) -> None:
        if keep >= len(self._positions):
            return
        del self._relative_offsets[keep:]
        del self._positions[keep:]
        os.ftruncate(self._ensure_fd(), keep * INDEX_ENTRY_SIZE)
        self._dirty = True

    def __repr__(self) -> str:
        return f"OffsetIndex({self.path.name}, entries={self.entries})"
