"""Per-partition idempotent-producer state (Kafka's ``ProducerStateManager``; KIP-98, KIP-360).

For every producer id that wrote to the partition the broker keeps a
:class:`~broker.log.producer_state_entry.ProducerStateEntry`: its epoch and the metadata of its
last :data:`~broker.log.producer_state_entry.NUM_BATCHES_TO_RETAIN` (5) batches. The checks a
batch passes before it is appended, by its :class:`~broker.log.producer_state_entry.AppendOrigin`,
are in :mod:`broker.log.producer_state_entry`; this module keeps the state of every producer,
the transactions, the snapshots and the expiry.

Transactions (KIP-98, Kafka's ``ProducerAppendInfo.appendDataBatch`` / ``appendEndTxnMarker``):

* the first transactional batch (attributes bit 4) of a producer opens its transaction at the
  batch's first offset (``current_txn_first_offset``, tracked in
  :class:`~broker.log.ongoing_transactions.OngoingTransactions`); a non-transactional batch while
  it is open -> ``INVALID_TXN_STATE`` (leader);
* a control batch (bit 5) carrying an end-transaction marker closes it. Its epoch must be at least
  the producer's (``INVALID_PRODUCER_EPOCH``) and its coordinator epoch at least the last one
  seen (``TRANSACTION_COORDINATOR_FENCED``); followers only log these. Only a producer with an open
  transaction yields a :class:`~broker.log.ongoing_transactions.CompletedTxn`; markers of empty
  transactions just record the epochs. An ABORT yields the
  :class:`~broker.log.transaction_index.AbortedTxn` the log writes into its ``.txnindex``;
* producers with an open transaction never expire.

Persistence (UnifiedLog hooks in :mod:`broker.log.producer_state_hooks`): ``<20-digit offset>.snapshot`` files in the partition directory hold the state of
every producer as of that offset (written when a segment rolls and at clean shutdown, as Kafka
does). Loading takes the newest valid snapshot at or below the log end offset and replays the
batch headers after it. Unlike Kafka's format (which keeps only each producer's last batch), our
snapshot keeps all retained batches, so every one of them is still deduplicated after a restart
(layout: :mod:`broker.log.producer_state_snapshot`).

Expiry: a producer whose last batch timestamp is older than ``producer.id.expiration.ms``
(default 24 h) is forgotten (checked at most every ``producer.id.expiration.check.interval.ms``,
10 min, on append and when snapshots are taken).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from spark_kafkalite.atomic_file import write_atomically
from spark_kafkalite.protocol.control_records import EndTransactionMarker
from spark_kafkalite.protocol.record_batch import BatchHeader

from .ongoing_transactions import CompletedTxn, OngoingTransactions
from .producer_state_entry import (
    AppendOrigin,
    BatchMetadata,
    ProducerStateEntry,
    check_client_batch,
    check_end_txn_marker,
    last_sequence,
)
from .producer_state_snapshot import decode_snapshot, encode_snapshot
from .transaction_index import AbortedTxn

__all__ = [
    "ReplayItem",
    "SNAPSHOT_SUFFIX",
    "ProducerStateManager",
    "snapshot_file_name",
    "parse_snapshot_file_name",
]

logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DEFAULT_EXPIRATION_CHECK_INTERVAL_MS = 600_000
MAX_SNAPSHOTS_KEPT = 3

#: (header, marker) pairs a replay yields: the marker of a control batch, else None.
ReplayItem = tuple[BatchHeader, EndTransactionMarker | None]


def snapshot_file_name(offset: int) -> str:
    """``00000000000000001234.snapshot``."""
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def parse_snapshot_file_name(name: str) -> int | None:
    """The offset of a snapshot file name, or None for other names."""
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


class ProducerStateManager:
    """Producer state of one partition log (see module docstring). Single-threaded.

    Args:
        dir: the partition directory (holds the snapshot files).
        producer_id_expiration_ms: ``producer.id.expiration.ms``.
        time_ms: wall clock in ms (expiry).

    Attributes:
        producers: producer id -> :class:`ProducerStateEntry`.
        map_end_offset: the state covers batches below this offset.
    """

    def __init__(
        self,
        dir: Path,
        *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        expiration_check_interval_ms: int = DEFAULT_EXPIRATION_CHECK_INTERVAL_MS,
        time_ms: Callable[[], int],
    ) -> None:
        self.dir = dir if isinstance(dir, Path) else Path(dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.expiration_check_interval_ms = expiration_check_interval_ms
        self.time_ms = time_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.transactions = OngoingTransactions()
        self.map_end_offset = 0
        self._last_expiration_check_ms = time_ms()

    # -- append path -----------------------------------------------------------------------

    def check_client_append(
        self,
        header: BatchHeader,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        marker: EndTransactionMarker | None = None,
    ) -> BatchMetadata | None:
        """Leader-side validation of a batch with a producer id; the duplicate's metadata, or
        None to append. Raises as :func:`check_client_batch`, or for a control batch's
        ``marker`` as :func:`check_end_txn_marker`."""
        entry = self.producers.get(header.producer_id)
        if header.is_control:
            if marker is not None:
                check_end_txn_marker(entry, header, marker, self.dir.name)
            return None
        duplicate = check_client_batch(entry, header, self.dir.name, origin)
        if duplicate is not None:
            logger.debug(
                "%s: duplicate batch of producer %d (epoch %d, sequences %d-%d) at offset %d",
                self.dir.name,
                header.producer_id,
                header.producer_epoch,
                duplicate.first_seq,
                duplicate.last_seq,
                duplicate.first_offset,
            )
        return duplicate

    def on_append(
        self,
        header: BatchHeader,
        first_offset: int,
        last_offset: int,
        marker: EndTransactionMarker | None = None,
    ) -> AbortedTxn | None:
        """Record a batch appended at [first_offset, last_offset] (leader, follower or replay);
        ``marker`` is a control batch's end-transaction marker. Returns the entry for the
        ``.txnindex`` when the batch is an ABORT marker ending a transaction, else None.
        Cheap no-op for batches without a producer id."""
        if last_offset >= self.map_end_offset:
            self.map_end_offset = last_offset + 1
        pid = header.producer_id
        if pid < 0:
            return None
        if header.is_control:
            return None if marker is None else self._append_end_txn_marker(header, first_offset, marker)
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        elif header.producer_epoch < entry.producer_epoch:
            logger.warning(
                "%s: replicated batch at offset %d of producer %d has epoch %d < %d",
                self.dir.name,
                first_offset,
                pid,
                header.producer_epoch,
                entry.producer_epoch,
            )
        first_seq = header.base_sequence
        entry.add_batch(
            header.producer_epoch,
            BatchMetadata(
                first_seq,
                last_sequence(first_seq, header.last_offset_delta) if first_seq >= 0 else -1,
                first_offset,
                last_offset,
                header.max_timestamp,
            ),
        )
        if header.is_transactional:
            if entry.current_txn_first_offset < 0:
                entry.current_txn_first_offset = first_offset
                self.transactions.begin(pid, first_offset)
        elif entry.current_txn_first_offset >= 0:
            logger.warning(
                "%s: replicated non-transactional batch at offset %d of producer %d inside its "
                "transaction started at %d",
                self.dir.name,
                first_offset,
                pid,
                entry.current_txn_first_offset,
            )
        now = self.time_ms()
        if now - self._last_expiration_check_ms >= self.expiration_check_interval_ms:
            self.remove_expired(now)
        return None

    def _append_end_txn_marker(
        self, header: BatchHeader, offset: int, marker: EndTransactionMarker
    ) -> AbortedTxn | None:
        pid = header.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        elif (
            header.producer_epoch < entry.producer_epoch or marker.coordinator_epoch < entry.coordinator_epoch
        ):
            logger.warning(
                "%s: replicated marker at offset %d of producer %d has epoch %d (current %d), "
                "coordinator epoch %d (current %d)",
                self.dir.name,
                offset,
                pid,
                header.producer_epoch,
                entry.producer_epoch,
                marker.coordinator_epoch,
                entry.coordinator_epoch,
            )
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(pid, entry.current_txn_first_offset, offset, not marker.committed)
        if header.producer_epoch != entry.producer_epoch:
            entry.batches.clear()
            entry.producer_epoch = header.producer_epoch
        entry.current_txn_first_offset = -1
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp_ms = header.max_timestamp
        if completed is None:
            return None
        last_stable_offset = self.transactions.last_stable_offset_for(completed)
        self.transactions.complete(completed)
        if not completed.is_aborted:
            return None
        return AbortedTxn(pid, completed.first_offset, offset, last_stable_offset)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest ongoing or unreplicated transaction, or None."""
        return self.transactions.first_unstable_offset()

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below ``high_watermark`` become stable."""
        self.transactions.on_high_watermark_updated(high_watermark)

    def remove_expired(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        now = self.time_ms() if now_ms is None else now_ms
        self._last_expiration_check_ms = now
        doomed = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now - e.last_timestamp_ms >= self.producer_id_expiration_ms
        ]
        for pid in doomed:
            del self.producers[pid]
        if doomed:
            logger.info("%s: expired %d producer id(s)", self.dir.name, len(doomed))
        return len(doomed)

    # -- snapshots -------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        out = []
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return []
        for entry in entries:
            offset = parse_snapshot_file_name(entry.name)
            if offset is not None:
                out.append(offset)
        return sorted(out)

    def take_snapshot(self, offset: int | None = None, *, sync: bool = False) -> Path | None:
        """Write the state as ``<offset>.snapshot`` (default: ``map_end_offset``); the state must
        cover exactly the batches below ``offset``. Older snapshots beyond the last
        :data:`MAX_SNAPSHOTS_KEPT` are deleted. Returns the path (None if it exists already)."""
        at = self.map_end_offset if offset is None else offset
        self.remove_expired()
        path = self.dir / snapshot_file_name(at)
        if path.exists() and offset is None and not sync:
            return None
        data = encode_snapshot(
            (
                e.producer_id,
                e.producer_epoch,
                e.last_timestamp_ms,
                e.current_txn_first_offset,
                e.coordinator_epoch,
                [(m.first_seq, m.last_seq, m.first_offset, m.last_offset, m.timestamp_ms) for m in e.batches],
            )
            for e in self.producers.values()
        )
        write_atomically(path, data, fsync=sync)
        for old in self.snapshot_offsets()[:-MAX_SNAPSHOTS_KEPT]:
            self._delete_snapshot(old)
        return path

    def _delete_snapshot(self, offset: int) -> None:
        try:
            (self.dir / snapshot_file_name(offset)).unlink()
        except FileNotFoundError:  # already gone (deleted with its segment, or never written)
            pass

    def delete_snapshots_after(self, offset: int) -> None:
        """Delete snapshots at offsets > ``offset`` (after truncation)."""
        for snap in self.snapshot_offsets():
            if snap > offset:
                self._delete_snapshot(snap)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshots at offsets < ``offset`` (their data is gone)."""
        for snap in self.snapshot_offsets():
            if snap < offset:
                self._delete_snapshot(snap)

    def _read_snapshot(self, offset: int) -> dict[int, ProducerStateEntry] | None:
        path = self.dir / snapshot_file_name(offset)
        try:
            data = path.read_bytes()
        except OSError as exc:
            logger.warning("%s: cannot read %s: %s", self.dir.name, path.name, exc)
            return None
        try:
            decoded = decode_snapshot(data)
        except ValueError as exc:
            logger.warning("%s: ignoring corrupt producer snapshot %s: %s", self.dir.name, path.name, exc)
            return None
        out: dict[int, ProducerStateEntry] = {}
        for pid, epoch, last_ts, txn_first_offset, coordinator_epoch, batches in decoded:
            entry = out[pid] = ProducerStateEntry(pid, epoch, last_ts, txn_first_offset, coordinator_epoch)
            entry.batches.extend(BatchMetadata(*b) for b in batches)
        return out

    # -- loading / truncation --------------------------------------------------------------

    def load(
        self,
        log_start_offset: int,
        log_end_offset: int,
        replay: Callable[[int], Iterable[ReplayItem]],
        *,
        replay_from_at_most: int | None = None,
        on_aborted: Callable[[AbortedTxn], None] | None = None,
    ) -> None:
        """Rebuild the state for a log holding [log_start_offset, log_end_offset): the newest
        valid snapshot within that range (and at or below ``replay_from_at_most``), then
        ``replay(from_offset)`` (the batch headers, with offsets, and control batches' markers,
        from that offset to the end) applied on top; ``on_aborted`` gets every aborted
        transaction the replay completes (a ``.txnindex`` rebuild). Snapshots above the log end
        and below the log start are deleted."""
        self.producers = {}
        self.transactions = OngoingTransactions()
        self.map_end_offset = log_start_offset
        self.delete_snapshots_after(log_end_offset)
        start = log_start_offset
        for snap in reversed(self.snapshot_offsets()):
            if snap < log_start_offset:
                break
            if replay_from_at_most is not None and snap > replay_from_at_most:
                continue
            state = self._read_snapshot(snap)
            if state is not None:
                self.producers = state
                start = snap
                break
            self._delete_snapshot(snap)
        self.delete_snapshots_before(start)
        for entry in self.producers.values():
            if entry.current_txn_first_offset >= 0:
                self.transactions.begin(entry.producer_id, entry.current_txn_first_offset)
        self.map_end_offset = start
        replayed = 0
        for header, marker in replay(start):
            if header.base_offset >= start:
                aborted = self.on_append(header, header.base_offset, header.last_offset, marker)
                if aborted is not None and on_aborted is not None:
                    on_aborted(aborted)
                replayed += 1
        self.map_end_offset = max(self.map_end_offset, log_end_offset)
        if self.producers or replayed:
            logger.info(
                "%s: producer state loaded: %d producer(s), snapshot at %d, %d batch(es) replayed",
                self.dir.name,
                len(self.producers),
                start,
                replayed,
            )
        self.remove_expired()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything (the log restarts empty at ``offset``)."""
        self.producers = {}
        self.transactions = OngoingTransactions()
        self.map_end_offset = offset
        for snap in self.snapshot_offsets():
            self._delete_snapshot(snap)
