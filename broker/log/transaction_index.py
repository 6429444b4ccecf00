"""The aborted-transaction index ``<20-digit base offset>.txnindex`` of a log segment (Kafka's
``TransactionIndex`` and ``AbortedTxn``, KIP-98).

One 34-byte entry per transaction aborted by an ABORT marker stored in the segment, big-endian:
``version int16 (0) | producerId int64 | firstOffset int64 | lastOffset int64 (the marker's
offset) | lastStableOffset int64`` (the LSO right after the abort was appended). Entries are in
increasing ``lastOffset`` order. The file exists only once the segment has an entry (Kafka opens
it lazily), so a missing file is an empty index.

The entries are kept in memory (aborted transactions are rare; a read_committed fetch walks them
without I/O). A file whose size is not a multiple of 34, with an unknown version, offsets outside
the segment or decreasing ``lastOffset`` is *corrupt*: :attr:`TransactionIndex.corrupt` is set,
the entries are dropped and the owning log rebuilds the index from the segment's batches
(Kafka's ``TransactionIndex.sanityCheck`` failing -> ``LogLoader.recoverSegment``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AbortedTxn", "TransactionIndex", "ABORTED_TXN_SIZE"]

logger = logging.getLogger(__name__)

_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry (Kafka's ``AbortedTxn``): the producer, its transaction's first offset, the
    ABORT marker's offset and the partition's LSO just after the marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The ``.txnindex`` of one segment (see module docstring).

    Args:
        path: the file (need not exist).
        base_offset: the segment's base offset (sanity check of loaded entries).
        load: False for a segment being created: the file is known not to exist.
    """

    def __init__(self, path: Path, base_offset: int, load: bool = True) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self.corrupt = False
        if not load:
            return
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        problem = self._load(data)
        if problem is not None:
            logger.warning("transaction index %s is corrupt (%s); it will be rebuilt", self.path, problem)
            self.entries = []
            self.corrupt = True

    def _load(self, data: bytes) -> str | None:
        if len(data) % ABORTED_TXN_SIZE:
            return f"{len(data)} bytes is not a multiple of {ABORTED_TXN_SIZE}"
        last = -1
        for version, pid, first, last_offset, lso in _ENTRY.iter_unpack(data):
            if version != _VERSION:
                return f"unknown entry version {version}"
            if last_offset < self.base_offset or last_offset <= last or first > last_offset:
                return f"entry of producer {pid} with offsets [{first}, {last_offset}] out of order"
            self.entries.append(AbortedTxn(pid, first, last_offset, lso))
            last = last_offset
        return None

    @property
    def last_offset(self) -> int | None:
        """``lastOffset`` of the newest entry, or None when empty."""
        return self.entries[-1].last_offset if self.entries else None

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (written to the file at once, no fsync).

        Raises:
            ValueError: ``txn.last_offset`` is not greater than the newest entry's (Kafka's
                ``TransactionIndex.append``).
        """
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(
                f"{self.path.name}: the last offset of appended transactions must increase, but "
                f"{txn.last_offset} is not greater than {self.entries[-1].last_offset}"
            )
        data = _ENTRY.pack(
            _VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
        )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.entries.append(txn)

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound_offset): ``lastOffset >= fetch_offset``
        and ``firstOffset < upper_bound_offset``; the bool is True when the search is complete
        (an entry's ``lastStableOffset >= upper_bound_offset``: no later segment can hold an
        overlapping transaction) (Kafka's ``TransactionIndex.collectAbortedTxns``)."""
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose ``lastOffset >= offset`` (Kafka's ``TransactionIndex.truncateTo``)."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        if not keep:
            self.delete()
            return
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, len(keep) * ABORTED_TXN_SIZE)

    def reset(self) -> None:
        """Empty the index (before a rebuild)."""
        self.entries = []
        self.corrupt = False
        self.delete()

    def flush(self) -> None:
        """fsync the file if it exists."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
