"""Per-partition idempotent-producer state (Kafka's ``ProducerStateManager``,
``ProducerStateEntry`` and ``ProducerAppendInfo``; KIP-98, KIP-360).

For every producer id that wrote to the partition the broker keeps its epoch and the metadata of
its last :data:`NUM_BATCHES_TO_RETAIN` (5) batches: first/last sequence, first/last offset and
max timestamp. Only batch headers are looked at (``producer_id``, ``producer_epoch``,
``base_sequence``, ``last_offset_delta``), never records.

Rules for batches from clients (:meth:`ProducerStateManager.check_client_append`, applied by
the leader before it appends), as Kafka 3.x/4.x:

* a batch whose epoch equals the producer's and whose (first, last) sequence equals one of the
  retained batches is a *duplicate*: nothing is appended and the produce response carries the
  original offsets with no error (``UnifiedLog.analyzeAndValidateProducerState``; modern brokers
  never send DUPLICATE_SEQUENCE_NUMBER);
* epoch older than the producer's current one -> ``INVALID_PRODUCER_EPOCH``;
* newer epoch: the first sequence must be 0 -> else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* same epoch: first sequence must be last sequence + 1 (``Int.MAX_VALUE`` wraps to 0) -> else
  ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
* unknown producer id (new, expired, or its batches were deleted): any sequence is accepted.
  ``UNKNOWN_PRODUCER_ID`` is no longer returned by Kafka brokers (KIP-360), nor here.

Replicated batches (followers, log recovery) update the state without these checks, so
deduplication survives a leader change. Batches appended by the broker's own coordinators
(:attr:`AppendOrigin.COORDINATOR`: transaction markers, transactional offset commits) get the
epoch checks but no sequence checks (Kafka's ``AppendOrigin``).

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

import enum
import logging
import os
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from spark_kafkalite.atomic_file import write_atomically
from spark_kafkalite.protocol.control_records import EndTransactionMarker
from spark_kafkalite.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from spark_kafkalite.protocol.record_batch import BatchHeader

from .ongoing_transactions import CompletedTxn, OngoingTransactions
from .producer_state_snapshot import decode_snapshot, encode_snapshot
from .transaction_index import AbortedTxn

__all__ = [
    "AppendOrigin",
    "ReplayItem",
    "NUM_BATCHES_TO_RETAIN",
    "SNAPSHOT_SUFFIX",
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateManager",
    "check_client_batch",
    "check_end_txn_marker",
    "last_sequence",
    "in_sequence",
    "snapshot_file_name",
    "parse_snapshot_file_name",
]

logger = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DEFAULT_EXPIRATION_CHECK_INTERVAL_MS = 600_000
MAX_SNAPSHOTS_KEPT = 3
_INT32_MAX = 2**31 - 1

#: (header, marker) pairs a replay yields: the marker of a control batch, else None.
ReplayItem = tuple[BatchHeader, EndTransactionMarker | None]


class AppendOrigin(enum.Enum):
    """Who appends a batch (Kafka's ``AppendOrigin``): which producer-state checks apply."""

    CLIENT = "client"  # Produce: epoch, sequence and transaction checks
    COORDINATOR = "coordinator"  # our coordinators (markers, txn offset commits): no sequence checks
    REPLICATION = "replication"  # followers and log recovery: no checks


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One retained batch of a producer (Kafka's ``BatchMetadata``)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """The batch's last sequence, wrapping past ``Int.MAX_VALUE`` to 0
    (``DefaultRecordBatch.incrementSequence``)."""
    if base_sequence > _INT32_MAX - last_offset_delta:
        return last_offset_delta - (_INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """``next_seq`` directly follows ``last_seq`` (``Int.MAX_VALUE`` is followed by 0)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateEntry:
    """State of one producer id in one partition: its epoch, last (up to 5) batches, the first
    offset of its open transaction (-1: none) and the coordinator epoch of its last marker."""

    __slots__ = (
        "producer_id",
        "producer_epoch",
        "batches",
        "last_timestamp_ms",
        "current_txn_first_offset",
        "coordinator_epoch",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = -1,
        last_timestamp_ms: int = -1,
        current_txn_first_offset: int = -1,
        coordinator_epoch: int = -1,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp_ms = last_timestamp_ms
        self.current_txn_first_offset = current_txn_first_offset
        self.coordinator_epoch = coordinator_epoch

    @property
    def last_seq(self) -> int:
        """Last sequence written (-1 when no batch is retained)."""
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The retained batch with exactly this epoch and sequence range, or None."""
        if producer_epoch != self.producer_epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def add_batch(self, producer_epoch: int, meta: BatchMetadata) -> None:
        """Record an appended batch; a different epoch starts a fresh batch history."""
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch
        self.batches.append(meta)
        self.last_timestamp_ms = meta.timestamp_ms

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(id={self.producer_id}, epoch={self.producer_epoch}, "
            f"batches={list(self.batches)}, txn_first_offset={self.current_txn_first_offset})"
        )


def check_client_batch(
    entry: ProducerStateEntry | None,
    header: BatchHeader,
    where: str = "",
    origin: AppendOrigin = AppendOrigin.CLIENT,
) -> BatchMetadata | None:
    """Validate a data batch of an idempotent or transactional producer against its state
    (pure; see module docstring). Returns the retained metadata when the batch is a duplicate,
    else None. ``AppendOrigin.COORDINATOR`` skips the sequence checks (Kafka's
    ``ProducerAppendInfo.maybeValidateDataBatch``).

    Raises:
        InvalidRecordError: a client batch with a producer id and a negative base sequence.
        InvalidProducerEpochError: the epoch is older than the producer's current epoch.
        OutOfOrderSequenceNumberError: a gap (or a new epoch not starting at sequence 0).
        InvalidTxnStateError: a non-transactional batch while the producer's transaction is open.
    """
    if origin is not AppendOrigin.CLIENT:
        _check_epoch(entry, header, where)
        _check_txn_state(entry, header, where)
        return None
    pid = header.producer_id
    epoch = header.producer_epoch
    first_seq = header.base_sequence
    if first_seq < 0:
        raise InvalidRecordError(f"Invalid sequence number {first_seq} in record batch with producerId {pid}")
    if entry is None:
        return None  # unknown producer: any sequence is accepted (KIP-360)
    last_seq = last_sequence(first_seq, header.last_offset_delta)
    duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
    if duplicate is not None:
        return duplicate
    current_epoch = entry.producer_epoch
    if epoch < current_epoch:
        raise InvalidProducerEpochError(
            f"Epoch of producer {pid} at offset {header.base_offset} in {where} is {epoch}, "
            f"which is smaller than the last seen epoch {current_epoch}"
        )
    if epoch != current_epoch:
        if first_seq != 0 and current_epoch != -1:
            raise OutOfOrderSequenceNumberError(
                f"Invalid sequence number for new epoch of producer {pid} in {where}: {epoch} (request epoch), "
                f"{first_seq} (seq. number), {current_epoch} (current producer epoch)"
            )
    elif not (current_epoch == -1 or in_sequence(entry.last_seq, first_seq)):
        raise OutOfOrderSequenceNumberError(
            f"Out of order sequence number for producer {pid} in {where}: {first_seq} (incoming seq. number), "
            f"{entry.last_seq} (current end sequence number)"
        )
    _check_txn_state(entry, header, where)
    return None


def _check_epoch(entry: ProducerStateEntry | None, header: BatchHeader, where: str) -> None:
    if entry is not None and header.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"Epoch of producer {header.producer_id} at offset {header.base_offset} in {where} is "
            f"{header.producer_epoch}, which is smaller than the last seen epoch {entry.producer_epoch}"
        )


def _check_txn_state(entry: ProducerStateEntry | None, header: BatchHeader, where: str) -> None:
    if entry is not None and entry.current_txn_first_offset >= 0 and not header.is_transactional:
        raise InvalidTxnStateError(
            f"Expected transactional write from producer {header.producer_id} in {where} at offset "
            f"{header.base_offset}: its transaction started at offset {entry.current_txn_first_offset}"
        )


def check_end_txn_marker(
    entry: ProducerStateEntry | None, header: BatchHeader, marker: EndTransactionMarker, where: str = ""
) -> None:
    """Validate an end-transaction marker the leader is about to append (Kafka's
    ``ProducerAppendInfo.appendEndTxnMarker`` checks, origin COORDINATOR; pure).

    Raises:
        InvalidProducerEpochError: the marker's epoch is older than the producer's.
        TransactionCoordinatorFencedError: its coordinator epoch is older than the last marker's.
    """
    _check_epoch(entry, header, where)
    if entry is not None and marker.coordinator_epoch < entry.coordinator_epoch:
        raise TransactionCoordinatorFencedError(
            f"Invalid coordinator epoch for producer {header.producer_id} in {where}: "
            f"{marker.coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)"
        )


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
