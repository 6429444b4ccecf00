"""The base of the offset index (``.index``) and the time index (``.timeindex``), Kafka's
``AbstractIndex``: file handling (a lazily opened append-only descriptor, fsync when dirty,
close, delete) and the logic both indexes share: loading with the invalid tail trimmed, the
entry count bound, slot search, appending one entry and truncation by offset.

Every entry pairs a relative offset (``offset - base_offset``, int32) with a value: the byte
position in the ``.log`` for the offset index, the timestamp for the time index. In memory the
two are columns (``array``) in file order, both strictly increasing, searched with ``bisect``.
Unlike Kafka the file is not preallocated or mmapped: entries are appended with one
unbuffered ``write`` each, so there is nothing to trim on roll or close.
"""

from __future__ import annotations

import logging
import os
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import ClassVar

__all__ = ["IndexFile", "write_all", "writev_all", "INT32_MAX"]

logger = logging.getLogger(__name__)

INT32_MAX = 2**31 - 1


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until every byte of ``data`` is written."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def writev_all(fd: int, buffers: tuple[bytes | bytearray | memoryview, ...]) -> None:
    """``os.writev`` of ``buffers`` in order until every byte is written (one syscall unless
    the kernel writes short; the rare remainder is then written from a joined copy)."""
    written = os.writev(fd, buffers)
    total = sum(len(b) for b in buffers)
    if written < total:
        write_all(fd, memoryview(b"".join(buffers))[written:])


class IndexFile:
    """Base of the index classes (see module docstring).

    Subclasses set the class attributes and implement :meth:`_decode` / :meth:`_encode`.

    Args:
        path: the index file (created when missing).
        base_offset: the segment's base offset.
        max_entries: ``is_full`` at this many entries.
        load: False for the index of a segment being created: the file is known not to exist
            and is not read.

    Attributes:
        was_trimmed: loading dropped invalid trailing bytes (the segment rebuilds the index).
    """

    ENTRY_SIZE: ClassVar[int]
    #: names the index in log lines ("index", "time index").
    KIND: ClassVar[str]
    #: every value is strictly greater than this (positions > 0, any timestamp).
    VALUE_FLOOR: ClassVar[int]
    #: ``array`` typecode of the value column.
    VALUE_TYPECODE: ClassVar[str]

    def __init__(self, path: Path, base_offset: int, max_entries: int, load: bool = True) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self._fd = -1  # opens on the first write: rolled segments hold no descriptor
        self._dirty = False
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._relative_offsets = array("i")
        self._values = array(self.VALUE_TYPECODE)
        self.was_trimmed = False
        #: the file exists: it is created with the segment's first data (``create``) or entry,
        #: not with an empty segment (Kafka's ``LazyIndex``), so creating thousands of empty
        #: partitions costs no index files
        self.on_disk = load
        if load:
            self._load()

    # -- subclass hooks --------------------------------------------------------------------

    def _decode(self, raw: bytes) -> tuple[array[int], array[int]]:
        """(relative offsets, values) of the whole entries in ``raw``, in file order."""
        raise NotImplementedError

    def _encode(self, relative_offset: int, value: int) -> bytes:
        """The file bytes of one entry."""
        raise NotImplementedError

    # -- loading ---------------------------------------------------------------------------

    def _load(self) -> None:
        """Read the file and keep its longest valid prefix: both columns strictly increasing
        (a crash, or a preallocated Kafka index, leaves a partial or zero-filled tail); the
        rest is cut from the file and :attr:`was_trimmed` set."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
            self.on_disk = False
        usable = len(raw) - len(raw) % self.ENTRY_SIZE
        rel, values = self._decode(raw[:usable])
        keep = 0
        prev_rel, prev_value = -1, self.VALUE_FLOOR
        for r, v in zip(rel, values, strict=True):
            if r <= prev_rel or v <= prev_value:
                break
            prev_rel, prev_value = r, v
            keep += 1
        self._relative_offsets = rel[:keep]
        self._values = values[:keep]
        if keep * self.ENTRY_SIZE != len(raw):
            self.was_trimmed = True
            logger.warning(
                "%s %s: trimming %d invalid trailing bytes",
                self.KIND,
                self.path,
                len(raw) - keep * self.ENTRY_SIZE,
            )
            os.truncate(self.path, keep * self.ENTRY_SIZE)

    # -- queries ---------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        """Number of entries."""
        return len(self._relative_offsets)

    @property
    def is_full(self) -> bool:
        return len(self._relative_offsets) >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return len(self._relative_offsets) * self.ENTRY_SIZE

    def _slot_at_or_below(self, column: array[int], target: int) -> int:
        """Index of the last entry whose ``column`` value is <= ``target``, or -1 (Kafka's
        ``largestLowerBoundSlotFor``)."""
        return bisect_right(column, target) - 1

    def _slot_below(self, column: array[int], target: int) -> int:
        """Index of the last entry whose ``column`` value is < ``target``, or -1."""
        return bisect_left(column, target) - 1

    # -- mutation --------------------------------------------------------------------------

    def _append_entry(self, relative_offset: int, value: int) -> None:
        """Write one entry (the caller checked it increases both columns and fits)."""
        write_all(self._ensure_fd(), self._encode(relative_offset, value))
        self._dirty = True
        self._relative_offsets.append(relative_offset)
        self._values.append(value)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (Kafka's ``truncateTo``)."""
        keep = (
            bisect_left(self._relative_offsets, offset - self.base_offset) if offset > self.base_offset else 0
        )
        self._truncate_entries(keep)

    def reset(self) -> None:
        """Remove all entries (before rebuilding the index)."""
        self._truncate_entries(0)
        self.was_trimmed = False

    def _truncate_entries(self, keep: int) -> None:
        if keep >= len(self._relative_offsets):
            return
        del self._relative_offsets[keep:]
        del self._values[keep:]
        os.ftruncate(self._ensure_fd(), keep * self.ENTRY_SIZE)
        self._dirty = True

    # -- file ------------------------------------------------------------------------------

    def create(self) -> None:
        """Create the (empty) file if it does not exist yet (before the segment's first data)."""
        if not self.on_disk:
            self._ensure_fd()

    def _ensure_fd(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            self.on_disk = True
        return self._fd

    def flush(self) -> None:
        """fsync the file if it changed since the last flush (reopening it if the handle was
        released)."""
        if not self._dirty:
            return
        if self._fd >= 0:
            os.fsync(self._fd)
        else:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def close(self) -> None:
        """Release the file handle (the in-memory entries stay usable for lookups)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        """Close and remove the file."""
        self.close()
        self.path.unlink(missing_ok=True)
        self.on_disk = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path.name}, entries={self.entries})"
