"""File handling shared by the offset index (``.index``) and the time index (``.timeindex``):
a lazily opened append-only descriptor, fsync when dirty, close and delete (Kafka's
``AbstractIndex``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["IndexFile", "write_all"]


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until every byte of ``data`` is written."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


class IndexFile:
    """Base of the index classes: subclasses set ``path`` and call ``_init_file`` first."""

    path: Path
    _fd: int
    _dirty: bool

    def _init_file(self, path: Path) -> None:
        self.path = Path(path)
        self._fd = -1
        self._dirty = False

    def _ensure_fd(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
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
