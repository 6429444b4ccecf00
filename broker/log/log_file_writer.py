"""The log manager's file-writer thread: the fsyncs and file writes that must not run on the
event loop, in submission order (the work of Kafka's ``KafkaScheduler`` tasks for the logs:
``UnifiedLog``'s "flush-metadata-file" and "delete-file" after ``file.delete.delay.ms``, and
the periodic ``OffsetCheckpointFile`` writes of ``LogManager`` / ``ReplicaManager``).

A job queued while the thread is busy joins the next batch (one hand-over for the thousands of
jobs of a large metadata delta); consecutive "make this just-written file durable" jobs of a
batch are fsynced together, or by one ``syncfs`` per file system from :data:`SYNCFS_MIN_FILES`
files on. A job that fails is logged; the jobs queued behind it still run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from spark_kafkalite.atomic_file import fsync_dir, fsync_file, fsync_written, sync_file_system

__all__ = ["LogFileWriter", "SYNCFS_MIN_FILES"]

logger = logging.getLogger(__name__)

#: from this many files made durable together, one ``syncfs`` per file system replaces their
#: fsyncs (see ``LogFileWriter._drain``)
SYNCFS_MIN_FILES = 8


class LogFileWriter:
    """One lazily started file-writer thread and its queue (see the module docstring).

    Attributes:
        draining: a drain job is submitted to the thread and not finished (jobs queued
            meanwhile join its next batch).
    """

    def __init__(self) -> None:
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None
        self._writes_lock = threading.Lock()
        self._writes: list[Callable[[], None]] = []  # queued for the file-writer thread
        self.draining = False
        self._pending_deletes: set[asyncio.TimerHandle] = set()  # see delete_later

    def write_later(self, write: Callable[[], None]) -> None:
        """Run ``write`` (the fsyncs that make a just-replaced ``partition.metadata`` or
        ``leader-epoch-checkpoint`` durable: file and directory; a periodic offset checkpoint)
        on the
        file-writer thread, in submission order, not on the event loop: creating or taking the
        leadership of thousands of partitions must not wait for thousands of fsyncs in a row
        (Kafka's ``UnifiedLog`` flushes ``partition.metadata`` from its scheduler,
        "flush-metadata-file"). The files themselves are replaced before this is called, so a
        killed broker restarts with them; only a power loss within that moment loses them.
        Writes queued while the thread is busy are taken in one batch (one hand-over for the
        thousands of writes of a large metadata delta, not one each). Thread-safe."""
        with self._writes_lock:
            self._writes.append(write)
            if self.draining:
                return
            self.draining = True
            if self._thread is None:
                self._thread = concurrent.futures.ThreadPoolExecutor(1, "log-file-writer")
            self._thread.submit(self._drain)

    def _drain(self) -> None:
        """The file-writer thread: run the queued writes, in order, until none is left.

        Consecutive :func:`~spark_kafkalite.atomic_file.fsync_written` jobs of a batch are made durable
        together before the next other write runs: each file fsynced and each directory once
        (a new log's ``partition.metadata`` and ``leader-epoch-checkpoint`` share one), or, from
        ``SYNCFS_MIN_FILES`` files on, one ``syncfs`` per file system. A CreateTopics of
        thousands of partitions then costs a few journal commits, not two per new log: every
        commit also holds up the event loop's own file creations (mkdir, open) on that file
        system, which is what made creating 4,000 partitions take ~20 s."""
        while True:
            with self._writes_lock:
                batch, self._writes = self._writes, []
                if not batch:
                    self.draining = False
                    return
            pending: list[Path] = []
            for write in batch:
                if isinstance(write, functools.partial) and write.func is fsync_written:
                    pending.append(Path(*write.args))
                    continue
                if pending:
                    self._run_write(functools.partial(_make_durable, pending))
                    pending = []
                self._run_write(write)
            if pending:
                self._run_write(functools.partial(_make_durable, pending))

    def delete_later(self, delay_ms: int, delete: Callable[[], None]) -> None:
        """Run ``delete`` (unlinking a removed segment's ``.deleted`` files) on the file-writer
        thread ``delay_ms`` from now (Kafka's ``UnifiedLog.deleteSegmentFiles`` scheduling
        "delete-file" after ``file.delete.delay.ms``); at once when no event loop runs. A stop
        before then leaves the files to the next load, which removes ``.deleted`` files."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_later(delete)
            return
        handle: asyncio.TimerHandle | None = None

        def due() -> None:
            self._pending_deletes.discard(handle)  # type: ignore[arg-type]
            self.write_later(delete)

        handle = loop.call_later(max(delay_ms, 0) / 1000, due)
        self._pending_deletes.add(handle)

    @staticmethod
    def _run_write(write: Callable[[], None]) -> None:
        try:
            write()
        except FileNotFoundError:  # the partition was deleted meanwhile
            pass
        except Exception:  # noqa: BLE001 - the writes queued behind it still run
            logger.exception("deferred write of a log file failed")

    def flush(self) -> None:
        """Wait until every queued write is done (the thread stops; the next write starts a
        new one)."""
        with self._writes_lock:
            writer, self._thread = self._thread, None
        if writer is not None:
            writer.shutdown(wait=True)

    def cancel_pending_deletes(self) -> None:
        """Drop the deletes still waiting for their delay (their ``.deleted`` files go at the
        next load)."""
        for handle in self._pending_deletes:
            handle.cancel()
        self._pending_deletes.clear()


def _make_durable(paths: list[Path]) -> None:
    """fsync ``paths`` (files written without fsync) and their directories: one ``syncfs`` per
    file system when there are ``SYNCFS_MIN_FILES`` or more, else each file and each directory
    once. A file removed meanwhile is skipped."""
    if len(paths) >= SYNCFS_MIN_FILES:
        roots: dict[int, Path] = {}
        for path in paths:
            try:
                roots.setdefault(os.stat(path.parent).st_dev, path.parent)
            except FileNotFoundError:
                continue
        if all(sync_file_system(directory) for directory in roots.values()):
            return
    dirs: dict[Path, None] = {}
    for path in paths:
        try:
            if fsync_file(path):
                dirs[path.parent] = None
        except OSError:  # the next files are still made durable
            logger.exception("fsync of %s failed", path)
    for directory in dirs:
        try:
            fsync_dir(directory)
        except FileNotFoundError:  # the partition was deleted meanwhile
            pass
        except OSError:
            logger.exception("fsync of directory %s failed", directory)
