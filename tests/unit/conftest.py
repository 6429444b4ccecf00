"""Unit tier set-up: ``os.fsync`` checks its descriptor instead of flushing to disk.

An fsync's effect (data surviving a power loss) cannot be observed inside one process, and the
log tests here (hypothesis models of the cleaner, the indexes, recovery) reach it thousands of
times: ~3,200 calls in ``pytest -m unit``, each a disk flush of a few milliseconds, 18 s in all
on a busy disk. For the session they call :func:`os.fstat` instead, which raises the same
``OSError`` (EBADF) for a closed or invalid descriptor, so a flush of the wrong file still
fails. Crash durability is tested with real processes, in another tier (which this patch does
not reach): tests/integration/test_log_broker_recovery.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


def _checked_no_flush(fd: int) -> None:
    os.fstat(fd)


@pytest.fixture(scope="session", autouse=True)
def _fsync_without_disk_flush() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", _checked_no_flush)
        yield
