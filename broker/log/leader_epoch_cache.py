"""The leader epoch cache of one partition log (Kafka's ``LeaderEpochFileCache``, KIP-101/279).

Maps each leader epoch seen in the log to the first offset written in it, kept in the file
``<partition dir>/leader-epoch-checkpoint`` in Kafka's text format::

    0            <- version
    2            <- number of entries
    0 0          <- epoch start_offset
    3 1500

Entries are strictly increasing in both epoch and start offset. The cache is updated when the
leader appends (``assign(epoch, first_offset)``), when a follower appends batches stamped by
the leader, and on truncation (``truncate_from_end`` / ``truncate_from_start`` / ``clear``).
Every change is written through to the file (atomic rename), as Kafka does.
"""

from __future__ import annotations

import functools
import logging
from bisect import bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path

from spark_kafkalite.atomic_file import fsync_written, write_atomically, write_new

__all__ = [
    "LeaderEpochFileCache",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
]

logger = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


def _write_checkpoint(path: Path, text: str, fsync: bool) -> bool:
    try:
        write_atomically(path, text, fsync=fsync)
    except FileNotFoundError:  # the partition directory was deleted meanwhile
        logger.debug("leader epoch checkpoint %s not written: directory gone", path)
        return False
    return True


class LeaderEpochFileCache:
    """epoch -> start offset entries of one log, persisted in ``leader-epoch-checkpoint``.

    Args:
        path: the checkpoint file (None: memory only, for tests).
        entries: initial (epoch, start_offset) pairs (normally from :meth:`load`).

    Attributes:
        write_later: runs a function later, off the caller's thread (the
            :class:`~broker.log.log_manager.LogManager`'s file writer): :meth:`flush` replaces
            the file at once and has it fsynced there; None: fsynced at once.
    """

    def __init__(self, path: Path | None, entries: Iterable[tuple[int, int]] = ()) -> None:
        self.path = path
        self.write_later: Callable[[Callable[[], None]], None] | None = None
        #: the file is known not to exist (a log just created in an empty directory): the first
        #: :meth:`flush` creates it in place instead of writing a temporary file and renaming it
        self.absent = False
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        for epoch, offset in entries:
            self._add(epoch, offset)

    # -- file ------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> LeaderEpochFileCache:
        """Read ``path`` (missing or malformed -> an empty cache; malformed is logged)."""
        try:
            lines = Path(path).read_text().splitlines()
        except FileNotFoundError:
            return cls(path)
        try:
            if int(lines[0]) != _VERSION:
                raise ValueError(f"unsupported version {lines[0]!r}")
            count = int(lines[1])
            entries = []
            for line in lines[2 : 2 + count]:
                epoch, offset = line.split()
                entries.append((int(epoch), int(offset)))
            if len(entries) != count:
                raise ValueError(f"expected {count} entries, found {len(entries)}")
            return cls(path, entries)
        except (ValueError, IndexError) as exc:
            logger.warning("ignoring malformed leader epoch checkpoint %s: %s", path, exc)
            return cls(path)

    def exists_on_disk(self) -> bool:
        return self.path is not None and self.path.exists()

    def flush(self) -> None:
        """Write the entries to the checkpoint file, atomically and durably (Kafka's
        ``LeaderEpochCheckpointFile``); with :attr:`write_later` set, the file is replaced at
        once and fsynced later by it (a new leader of thousands of partitions must not wait for
        thousands of fsyncs on the event loop)."""
        if self.path is None:
            return
        body = [str(_VERSION), str(len(self._epochs))]
        body += [f"{e} {o}" for e, o in zip(self._epochs, self._offsets, strict=True)]
        text = "\n".join(body) + "\n"
        if self.absent and self.write_later is not None:
            self.absent = False
            try:  # the first write of a new log's file: created in place, no rename
                write_new(self.path, text.encode())
            except FileExistsError:  # a file is there after all: replaced by the atomic write below
                pass
            except FileNotFoundError:  # the partition directory was deleted meanwhile
                return
            else:
                self.write_later(functools.partial(fsync_written, self.path))
                return
        if (
            _write_checkpoint(self.path, text, fsync=self.write_later is None)
            and self.write_later is not None
        ):
            self.write_later(functools.partial(fsync_written, self.path))

    # -- queries ---------------------------------------------------------------------------
    def entries(self) -> list[tuple[int, int]]:
        """[(epoch, start_offset)] in increasing order (a copy)."""
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    @property
    def earliest_epoch(self) -> int | None:
        return self._epochs[0] if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which ``offset`` was written (largest entry with start <= offset)."""
        i = bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def previous_epoch(self, epoch: int) -> int | None:
        """The largest epoch < ``epoch`` in the cache."""
        i = bisect_right(self._epochs, epoch - 1) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for ``requested_epoch`` (Kafka's ``LeaderEpochFileCache.endOffsetFor``):

        * requested == latest epoch -> (latest, ``log_end_offset``);
        * otherwise the first entry with epoch > requested gives the end offset (its start
          offset), paired with the largest epoch <= requested (or with ``requested`` itself
          when there is none);
        * requested above every epoch, undefined (-1), or an empty cache -> (-1, -1).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        i = bisect_right(self._epochs, requested_epoch)  # first epoch > requested
        if i >= len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if i == 0:
            return requested_epoch, self._offsets[0]
        return self._epochs[i - 1], self._offsets[i]

    # -- updates ---------------------------------------------------------------------------
    def _add(self, epoch: int, offset: int) -> bool:
        """Kafka's ``LeaderEpochFileCache.assign(EpochEntry)``: a no-op when ``epoch`` is the
        latest epoch already (unless it now starts earlier); otherwise entries the new one
        contradicts (epoch >= ``epoch`` or start offset >= ``offset``, from the end) are dropped
        (``maybeTruncateNonMonotonicEntries``) and it is appended. Returns True if it changed."""
        if self._epochs and epoch == self._epochs[-1] and offset >= self._offsets[-1]:
            return False
        removed: list[tuple[int, int]] = []
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= offset):
            removed.append((self._epochs.pop(), self._offsets.pop()))
        if len(removed) > 1 or (removed and removed[0][1] != offset):
            # As Kafka: only a non-trivial removal is worth a warning (an entry starting at the
            # same offset held no data: a leader that appended nothing before losing leadership).
            logger.warning(
                "%s: new epoch entry (%d, %d) caused truncation of conflicting entries %s",
                self.path,
                epoch,
                offset,
                removed[::-1],
            )
        self._epochs.append(epoch)
        self._offsets.append(offset)
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's ``LeaderEpochFileCache.assign``;
        a negative epoch or offset is ignored). Entries the new one contradicts are dropped: a
        follower appending the leader's batches of an older epoch over a stale trailing entry
        follows the leader. Written through to the file. Returns True if it changed."""
        if epoch < 0 or start_offset < 0:
            return False
        changed = self._add(epoch, start_offset)
        if changed:
            self.flush()
        return changed

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries whose start offset is >= ``end_offset`` (log truncated to it)."""
        changed = False
        while self._offsets and self._offsets[-1] >= end_offset:
            self._epochs.pop()
            self._offsets.pop()
            changed = True
        if changed:
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly below ``start_offset``; the entry covering it starts at it."""
        i = bisect_right(self._offsets, start_offset) - 1
        if i < 0 or (i == 0 and self._offsets[0] == start_offset):
            return
        del self._epochs[:i]
        del self._offsets[:i]
        self._offsets[0] = start_offset
        self.flush()

    def clear(self) -> None:
        """Remove every entry (log truncated fully)."""
        self._epochs.clear()
        self._offsets.clear()
        self.flush()

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.entries()})"


def load_leader_epoch_cache(
    directory: Path,
    headers: Iterable[tuple[int, int]],
    log_start_offset: int,
    log_end_offset: int,
    write_later: Callable[[Callable[[], None]], None] | None = None,
) -> LeaderEpochFileCache:
    """The cache of a log being loaded (Kafka's ``UnifiedLog.initializeLeaderEpochCache`` +
    the epoch assignments of ``LogSegment.recover``): read ``leader-epoch-checkpoint`` and trim
    it to [log_start_offset, log_end_offset); when the file is missing but the log holds data,
    rebuild it from ``headers``, an iterable of (partition_leader_epoch, base_offset) of every
    batch in offset order (only consumed in that case). ``write_later``: see
    :attr:`LeaderEpochFileCache.write_later`.
    """
    path = Path(directory) / LEADER_EPOCH_CHECKPOINT_FILE
    cache = LeaderEpochFileCache.load(path)
    cache.write_later = write_later
    if not path.exists() and log_end_offset > log_start_offset:
        for epoch, base_offset in headers:
            if epoch >= 0 and (cache.latest_epoch is None or epoch > cache.latest_epoch):
                cache._add(epoch, base_offset)
        cache.flush()
        logger.info("%s: rebuilt leader epoch cache from the log: %s", directory, cache.entries())
    cache.truncate_from_end(log_end_offset)
    cache.truncate_from_start(log_start_offset)
    return cache
