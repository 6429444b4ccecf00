"""Exclusive per-process lock on each log dir (Kafka's ``FileLock`` on ``<log.dir>/.lock``).

Two broker processes on the same log dir would corrupt each other's logs, checkpoints,
``.kafka_cleanshutdown`` marker and ``.broker-endpoints.json``. Like Kafka's ``LogManager``, the
broker takes ``flock(LOCK_EX | LOCK_NB)`` on ``.lock`` in every log dir at startup and holds the
file descriptors for its lifetime; the kernel releases them when the process dies (even on
SIGKILL), so a restart after ``kill -9`` is not blocked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["LOCK_FILE", "LogDirLockError", "LogDirLocks"]

LOCK_FILE = ".lock"


class LogDirLockError(RuntimeError):
    """Another process (or another ``LogDirLocks`` in this process) holds a log dir's lock."""


class LogDirLocks:
    """Holds ``flock`` locks on ``<dir>/.lock`` for a set of log dirs.

    Attributes:
        held: log dirs whose lock this object holds.
    """

    def __init__(self) -> None:
        self._fds: dict[Path, int] = {}

    @property
    def held(self) -> list[Path]:
        return list(self._fds)

    def acquire(self, log_dirs: Sequence[Path]) -> None:
        """Lock every dir (created when missing); all-or-nothing.

        Raises:
            LogDirLockError: a dir is locked elsewhere; the message names log.dirs and the dir.
                Locks taken by this call are released first.
            OSError: a dir or its lock file cannot be created / opened.
        """
        taken: list[Path] = []
        try:
            for log_dir in log_dirs:
                log_dir.mkdir(parents=True, exist_ok=True)
                path = log_dir / LOCK_FILE
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise LogDirLockError(
                        f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. "
                        "A Kafka instance in another process or thread is using this directory"
                    ) from None
                self._fds[log_dir] = fd
                taken.append(log_dir)
        except BaseException:
            for log_dir in taken:
                self._release(log_dir)
            raise

    def release(self) -> None:
        """Unlock and close every held lock (the ``.lock`` files stay, as in Kafka)."""
        for log_dir in list(self._fds):
            self._release(log_dir)

    def _release(self, log_dir: Path) -> None:
        fd = self._fds.pop(log_dir)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
