"""Sparse time index of one log segment (Kafka's ``TimeIndex``).

File ``<20-digit base offset>.timeindex``: 12-byte big-endian entries
``(timestamp int64, relative_offset int32)``. An entry ``(T, O)`` means: the largest batch
max_timestamp among the segment's batches up to the batch whose last offset is ``O`` is ``T``,
and that batch is the first one to reach ``T``. Entries are appended (``maybe_append``) at the
same ``index.interval.bytes`` boundaries as the offset index whenever the segment's max
timestamp grew, plus one final entry when the segment is rolled or closed, so the last entry
always carries the segment's max timestamp (Kafka's ``LogSegment.onBecomeInactiveSegment``).
Timestamps are strictly increasing; offsets strictly increasing.

Loading, trimming, truncation and the file itself are :class:`broker.log.index_file.IndexFile`'s.
"""

from __future__ import annotations

import struct
from array import array
from pathlib import Path
from typing import ClassVar

from .index_file import INT32_MAX, IndexFile

__all__ = ["TimeIndex", "TIME_INDEX_ENTRY_SIZE", "TIME_INDEX_SUFFIX"]

TIME_INDEX_ENTRY_SIZE = 12
TIME_INDEX_SUFFIX = ".timeindex"
_ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    """Timestamp -> offset index of one segment (values: timestamps in ms).

    Args:
        path: the ``.timeindex`` file (created when missing).
        base_offset: the segment's base offset.
        max_index_size_bytes: ``segment.index.bytes``; ``is_full`` at this many bytes.

    Attributes:
        was_trimmed: True if loading dropped invalid trailing bytes (the caller should rebuild:
            the final max-timestamp entry may be gone).
    """

    ENTRY_SIZE: ClassVar[int] = TIME_INDEX_ENTRY_SIZE
    KIND: ClassVar[str] = "time index"
    VALUE_FLOOR: ClassVar[int] = -(2**63)
    VALUE_TYPECODE: ClassVar[str] = "q"

    def __init__(
        self, path: Path, base_offset: int, max_index_size_bytes: int = 10485760, load: bool = True
    ) -> None:
        super().__init__(path, base_offset, max(2, max_index_size_bytes // TIME_INDEX_ENTRY_SIZE), load)

    def _decode(self, raw: bytes) -> tuple[array[int], array[int]]:
        timestamps = array("q")
        rel = array("i")
        for ts, r in _ENTRY.iter_unpack(raw):
            timestamps.append(ts)
            rel.append(r)
        return rel, timestamps

    def _encode(self, relative_offset: int, value: int) -> bytes:
        return _ENTRY.pack(value, relative_offset)

    # -- queries ---------------------------------------------------------------------------

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp_ms, absolute offset) of the last entry, or (-1, base_offset) when empty."""
        if not self._values:
            return -1, self.base_offset
        return self._values[-1], self.base_offset + self._relative_offsets[-1]

    def entry(self, n: int) -> tuple[int, int]:
        """(timestamp_ms, absolute offset) of entry ``n``."""
        return self._values[n], self.base_offset + self._relative_offsets[n]

    def lookup_before(self, target_timestamp_ms: int) -> tuple[int, int] | None:
        """(timestamp_ms, offset) of the last entry whose timestamp is < ``target_timestamp_ms``,
        or None. Every batch up to the one ending at that offset has max_timestamp <
        target, so a search for the first record >= target may start right after it."""
        i = self._slot_below(self._values, target_timestamp_ms)
        if i < 0:
            return None
        return self._values[i], self.base_offset + self._relative_offsets[i]

    def lookup(self, target_timestamp_ms: int) -> tuple[int, int]:
        """Kafka's ``TimeIndex.lookup``: (timestamp, offset) of the last entry whose timestamp is
        <= the target, or (-1, base_offset)."""
        i = self._slot_at_or_below(self._values, target_timestamp_ms)
        if i < 0:
            return -1, self.base_offset
        return self._values[i], self.base_offset + self._relative_offsets[i]

    # -- mutation --------------------------------------------------------------------------

    def maybe_append(self, timestamp_ms: int, offset: int, skip_full_check: bool = False) -> bool:
        """Append ``(timestamp_ms, offset)`` if ``timestamp_ms`` is larger than the last entry's
        (and ``offset`` is after it). Returns True if an entry was written.

        Raises:
            ValueError: the index is full (unless ``skip_full_check``, used for the final entry
                on roll) or the relative offset does not fit int32.
        """
        if self._values and (
            timestamp_ms <= self._values[-1] or offset - self.base_offset <= self._relative_offsets[-1]
        ):
            return False
        if timestamp_ms < 0:
            return False
        rel = offset - self.base_offset
        if not 0 <= rel <= INT32_MAX:
            raise ValueError(f"time index entry offset {offset} overflows int32 in {self.path}")
        if self.is_full and not skip_full_check:
            raise ValueError(f"time index {self.path} is full ({self.entries} entries)")
        self._append_entry(rel, timestamp_ms)
        return True
