"""The one way the broker and the tools replace a checkpoint or state file: atomically and durably.

Write ``<file>.tmp``, fsync it, rename it over ``<file>``, fsync the directory: a crash leaves
either the old or the new contents, never a torn file, and once this returns the new contents
survive a power loss. This is Kafka's ``CheckpointFile.write`` (``fileOutputStream.getFD().sync()``)
followed by ``Utils.atomicMoveWithFallback`` (rename, then ``flushDir`` of the parent).

Callers that rewrite a file periodically and recover from losing its latest version (the
recovery-point and high-watermark checkpoints between clean shutdowns, producer snapshots taken
at segment rolls) pass ``fsync=False``: still atomic, not yet durable.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from pathlib import Path

__all__ = ["write_atomically", "write_new", "fsync_dir", "fsync_file", "fsync_written", "sync_file_system"]

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_syncfs = getattr(_libc, "syncfs", None)  # Linux >= 2.6.39, glibc >= 2.14


def fsync_dir(path: Path) -> None:
    """fsync a directory (makes renames and unlinks in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> bool:
    """fsync one file; False (nothing done) when it was removed meanwhile."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def sync_file_system(directory: Path) -> bool:
    """Make every write to the file system holding ``directory`` durable with one ``syncfs(2)``
    (one journal commit, where fsyncs of N files commit up to N times). False when the platform
    has no ``syncfs``, the directory is gone, or the call failed: the caller then fsyncs its
    files one by one."""
    if _syncfs is None:
        return False
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return False
    try:
        return int(_syncfs(fd)) == 0
    finally:
        os.close(fd)


def fsync_written(path: Path) -> None:
    """Make a file written with ``write_atomically(..., fsync=False)`` durable later: fsync it
    and its directory (a no-op when it was removed meanwhile)."""
    path = Path(path)
    if fsync_file(path):
        fsync_dir(path.parent)


def write_new(path: Path, data: bytes) -> None:
    """Create ``path`` with ``data`` in one write, no temporary file and no fsync (for a file
    known not to exist, in a directory just created: there is no previous version to keep, and
    a file torn by a power loss is read as a damaged one, which its reader tolerates).

    Raises:
        FileExistsError: the file exists.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def write_atomically(
    path: Path, data: bytes | str, *, fsync: bool = True, tmp_suffix: str = ".tmp", mode: int | None = None
) -> None:
    """Replace ``path`` with ``data`` (str is written as UTF-8) as the module docstring says.

    Args:
        path: the file to replace.
        data: its new contents.
        fsync: fsync the file before the rename and the directory after it.
        tmp_suffix: suffix of the temporary file beside ``path`` (unique per writer when several
            processes may write the same file).
        mode: permissions of the new file, set on the temporary file before anything is written
            (None: the process umask's default).

    Raises:
        OSError: the write, fsync or rename failed (``path`` then still holds its old contents).
    """
    path = Path(path)
    tmp = path.with_name(path.name + tmp_suffix)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with open(tmp, "wb") as f:
        if mode is not None:
            os.fchmod(f.fileno(), mode)
        f.write(raw)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)
