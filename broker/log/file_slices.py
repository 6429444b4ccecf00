"""Record bytes of a read that stay in the segment files until a worker thread reads them.

A large Fetch read (``LogSegment.read`` with ``defer_above``) finds its exact batch boundaries
from the batch headers on the event loop and leaves the data in the file as a :class:`FileSlice`
(Kafka answers a fetch with ``FileRecords`` slices that the network layer sends from the file).
:meth:`DeferredRecords.load`, run on a worker thread, reads them: a 100 MB fetch then costs the
loop a few header reads, not a 100 MB ``pread``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Sequence

from .segment_files import counted_pread

__all__ = ["DeferredRecords", "FileSlice"]


class FileSlice:
    """Bytes [``position``, ``position + size``) of an open file. Holds its own duplicate of the
    descriptor, so a segment deleted or closed meanwhile still reads (the file lives until the
    duplicate is closed: after :meth:`read`, or when the slice is dropped unread)."""

    __slots__ = ("_fd", "_close", "position", "size", "__weakref__")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self._fd = os.dup(fd)
        self._close = weakref.finalize(self, os.close, self._fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        """The bytes (fewer if the file was truncated below them meanwhile); closes the
        duplicate descriptor."""
        try:
            return counted_pread(self._fd, self.size, self.position)
        finally:
            self._close()


class DeferredRecords:
    """Concatenated record bytes, some of them :class:`FileSlice` s: ``len`` is exact at once,
    :meth:`load` (blocking: run it on a worker thread) returns the bytes."""

    __slots__ = ("pieces", "_size")

    def __init__(self, pieces: Sequence[bytes | memoryview | FileSlice]) -> None:
        self.pieces = tuple(pieces)
        self._size = sum(len(p) for p in self.pieces)

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def load(self) -> bytes:
        parts = [p.read() if isinstance(p, FileSlice) else p for p in self.pieces]
        return b"".join(parts)
