"""Sparse offset index of one log segment (Kafka's ``OffsetIndex``).

File ``<20-digit base offset>.index``: a sequence of 8-byte big-endian entries
``(relative_offset int32, position int32)``. ``relative_offset`` is the *last* offset of the batch
that starts at byte ``position`` of the ``.log`` file, minus the segment's base offset (as Kafka's
``LogSegment.append`` does). Entries are strictly increasing in both fields.

Loading, trimming, truncation and the file itself are :class:`broker.log.index_file.IndexFile`'s.
``max_index_size_bytes`` bounds the entry count; the segment rolls when the index is full.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import ClassVar

from .index_file import INT32_MAX, IndexFile

__all__ = ["OffsetIndex", "INDEX_ENTRY_SIZE"]

INDEX_ENTRY_SIZE = 8


class OffsetIndex(IndexFile):
    """Offset -> file position index of one segment (values: positions in the ``.log``).

    Args:
        path: the ``.index`` file (created when missing).
        base_offset: the segment's base offset.
        max_index_size_bytes: ``segment.index.bytes``; ``is_full`` once this many bytes of
            entries exist.
    """

    ENTRY_SIZE: ClassVar[int] = INDEX_ENTRY_SIZE
    KIND: ClassVar[str] = "index"
    VALUE_FLOOR: ClassVar[int] = 0
    VALUE_TYPECODE: ClassVar[str] = "i"

    def __init__(
        self, path: Path, base_offset: int, max_index_size_bytes: int = 10485760, load: bool = True
    ) -> None:
        super().__init__(path, base_offset, max(1, max_index_size_bytes // INDEX_ENTRY_SIZE), load)

    def _decode(self, raw: bytes) -> tuple[array[int], array[int]]:
        entries = array("i")
        entries.frombytes(raw)
        if sys.byteorder == "little":
            entries.byteswap()
        return entries[0::2], entries[1::2]

    def _encode(self, relative_offset: int, value: int) -> bytes:
        return relative_offset.to_bytes(4, "big") + value.to_bytes(4, "big")

    # -- queries ---------------------------------------------------------------------------

    @property
    def last_entry(self) -> tuple[int, int]:
        """(absolute offset, position) of the last entry, or (base_offset, 0) when empty."""
        if not self._values:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[-1], self._values[-1]

    def entry(self, n: int) -> tuple[int, int]:
        """(absolute offset, position) of entry ``n``."""
        return self.base_offset + self._relative_offsets[n], self._values[n]

    def position_before(self, position: int) -> int:
        """Position of the entry before the last one at or below ``position`` (the batch there
        ends at or below ``position``), or -1 when there is none."""
        i = bisect_right(self._values, position) - 2
        return self._values[i] if i >= 0 else -1

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(absolute offset, position) of the largest entry whose offset is <= ``target_offset``,
        or (base_offset, 0) when there is none. Reading batches forward from ``position`` reaches
        the batch containing ``target_offset``."""
        i = self._slot_at_or_below(self._relative_offsets, min(target_offset - self.base_offset, INT32_MAX))
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._relative_offsets[i], self._values[i]

    # -- mutation --------------------------------------------------------------------------

    def can_append(self, offset: int) -> bool:
        """True if ``offset`` fits an int32 relative offset and the index is not full."""
        return not self.is_full and 0 <= offset - self.base_offset <= INT32_MAX

    def append(self, offset: int, position: int) -> None:
        """Add an entry for the batch whose last offset is ``offset`` starting at byte ``position``.

        Raises:
            ValueError: the entry does not increase both fields, the index is full, or a value
                does not fit int32 (Kafka's ``InvalidOffsetException`` / ``IndexOffsetOverflow``).
        """
        rel = offset - self.base_offset
        if self.is_full:
            raise ValueError(f"index {self.path} is full ({self.entries} entries)")
        if not (0 <= rel <= INT32_MAX and 0 <= position <= INT32_MAX):
            raise ValueError(f"index entry ({offset}, {position}) overflows int32 in {self.path}")
        if self._values and (rel <= self._relative_offsets[-1] or position <= self._values[-1]):
            raise ValueError(
                f"index entry ({offset}, {position}) is not after the last entry {self.last_entry}"
            )
        self._append_entry(rel, position)

    def truncate_to_position(self, position: int) -> None:
        """Remove every entry whose position is >= ``position`` (after the log file shrank)."""
        self._truncate_entries(bisect_left(self._values, position))
