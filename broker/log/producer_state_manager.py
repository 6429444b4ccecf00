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
deduplication survives a leader change.

Persistence: ``<20-digit offset>.snapshot`` files in the partition directory hold the state of
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
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from broker.atomic_file import write_atomically
from spark_kafkalite.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceNumberError,
)
from spark_kafkalite.protocol.record_batch import BatchHeader

from .log_results import LogAppendInfo
from .producer_state_snapshot import decode_snapshot, encode_snapshot

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "SNAPSHOT_SUFFIX",
    "BatchMetadata",
    "ProducerStateEntry",
    "ProducerStateManager",
    "check_client_batch",
    "last_sequence",
    "in_sequence",
    "snapshot_file_name",
    "parse_snapshot_file_name",
    "load_producer_state",
    "reload_producer_state",
    "on_replicated_batches",
    "snapshot_on_close",
    "snapshot_on_roll",
    "duplicate_append_info",
]

logger = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DEFAULT_EXPIRATION_CHECK_INTERVAL_MS = 600_000
MAX_SNAPSHOTS_KEPT = 3
_INT32_MAX = 2**31 - 1


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
    """State of one producer id in one partition: its epoch and last (up to 5) batches."""

    __slots__ = ("producer_id", "producer_epoch", "batches", "last_timestamp_ms")

    def __init__(self, producer_id: int, producer_epoch: int = -1, last_timestamp_ms: int = -1) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        self.last_timestamp_ms = last_timestamp_ms

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
            f"batches={list(self.batches)})"
        )


def check_client_batch(
    entry: ProducerStateEntry | None, header: BatchHeader, where: str = ""
) -> BatchMetadata | None:
    """Validate a client batch of an idempotent producer against its state (pure; see module
    docstring). Returns the retained metadata when the batch is a duplicate, else None.

    Raises:
        InvalidRecordError: a producer id with a negative base sequence.
        InvalidProducerEpochError: the epoch is older than the producer's current epoch.
        OutOfOrderSequenceNumberError: a gap (or a new epoch not starting at sequence 0).
    """
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
    return None


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
        self.dir = Path(dir)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.expiration_check_interval_ms = expiration_check_interval_ms
        self.time_ms = time_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self._last_expiration_check_ms = time_ms()

    # -- append path -----------------------------------------------------------------------

    def check_client_append(self, header: BatchHeader) -> BatchMetadata | None:
        """Leader-side validation of a client batch with a producer id; the duplicate's
        metadata, or None to append. Raises as :func:`check_client_batch`."""
        duplicate = check_client_batch(self.producers.get(header.producer_id), header, self.dir.name)
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

    def on_append(self, header: BatchHeader, first_offset: int, last_offset: int) -> None:
        """Record a batch appended at [first_offset, last_offset] (leader, follower or replay).
        Cheap no-op for batches without a producer id."""
        if last_offset >= self.map_end_offset:
            self.map_end_offset = last_offset + 1
        pid = header.producer_id
        if pid < 0 or header.is_control:
            return
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
        now = self.time_ms()
        if now - self._last_expiration_check_ms >= self.expiration_check_interval_ms:
            self.remove_expired(now)

    def remove_expired(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        now = self.time_ms() if now_ms is None else now_ms
        self._last_expiration_check_ms = now
        doomed = [
            pid
            for pid, e in self.producers.items()
            if now - e.last_timestamp_ms >= self.producer_id_expiration_ms
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
        except FileNotFoundError:
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
        for pid, epoch, last_ts, batches in decoded:
            entry = out[pid] = ProducerStateEntry(pid, epoch, last_ts)
            entry.batches.extend(BatchMetadata(*b) for b in batches)
        return out

    # -- loading / truncation --------------------------------------------------------------

    def load(
        self,
        log_start_offset: int,
        log_end_offset: int,
        replay: Callable[[int], Iterable[BatchHeader]],
    ) -> None:
        """Rebuild the state for a log holding [log_start_offset, log_end_offset): the newest
        valid snapshot within that range, then ``replay(from_offset)`` (the batch headers, with
        offsets, from that offset to the end) applied on top. Snapshots above the log end and
        below the log start are deleted."""
        self.producers = {}
        self.map_end_offset = log_start_offset
        self.delete_snapshots_after(log_end_offset)
        start = log_start_offset
        for snap in reversed(self.snapshot_offsets()):
            if snap < log_start_offset:
                break
            state = self._read_snapshot(snap)
            if state is not None:
                self.producers = state
                start = snap
                break
            self._delete_snapshot(snap)
        self.delete_snapshots_before(start)
        self.map_end_offset = start
        replayed = 0
        for header in replay(start):
            if header.base_offset >= start:
                self.on_append(header, header.base_offset, header.last_offset)
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
        self.map_end_offset = offset
        for snap in self.snapshot_offsets():
            self._delete_snapshot(snap)


# -- UnifiedLog glue (kept here so that unified_log.py only carries one-line hooks) -----------


class _LogView(Protocol):
    """What the glue needs from a ``UnifiedLog`` (structural typing: no import cycle)."""

    dir: Path
    segments: list[Any]
    log_start_offset: int
    log_end_offset: int
    time_ms: Callable[[], int]


def _replay_from(log: _LogView) -> Callable[[int], Iterable[BatchHeader]]:
    def replay(from_offset: int) -> Iterable[BatchHeader]:
        if from_offset >= log.log_end_offset:
            return
        segments = list(log.segments)
        first = 0
        for i, seg in enumerate(segments):  # the segment holding from_offset (by base offsets only)
            if seg.base_offset <= from_offset:
                first = i
        for i, seg in enumerate(segments[first:]):
            position = 0
            if i == 0 and seg.base_offset < from_offset:
                found = seg.find_batch(from_offset)  # via the offset index
                if found is None:
                    continue
                position = found[0]
            for _, header in seg.iter_batches(position):
                if header.base_offset >= from_offset:
                    yield header

    return replay


def load_producer_state(log: _LogView) -> ProducerStateManager:
    """A ``ProducerStateManager`` for a freshly loaded log: newest snapshot + header replay.
    ``producer.id.expiration.ms`` comes from ``log.config.producer_id_expiration_ms`` when the
    ``LogConfig`` has it (else 24 h)."""
    config = getattr(log, "config", None)
    manager = ProducerStateManager(
        log.dir,
        producer_id_expiration_ms=int(
            getattr(config, "producer_id_expiration_ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS)
        ),
        time_ms=log.time_ms,
    )
    manager.load(log.log_start_offset, log.log_end_offset, _replay_from(log))
    return manager


def reload_producer_state(log: _LogView, manager: ProducerStateManager) -> None:
    """After a truncation: rebuild from the newest snapshot at or below the new log end
    (Kafka's ``truncateAndReload``)."""
    manager.load(log.log_start_offset, log.log_end_offset, _replay_from(log))


def on_replicated_batches(manager: ProducerStateManager, batches: Iterable[tuple[int, BatchHeader]]) -> None:
    """Follower append: update the state from (position, header) pairs that carry offsets."""
    for _, header in batches:
        manager.on_append(header, header.base_offset, header.last_offset)


def snapshot_on_close(manager: ProducerStateManager, log_end_offset: int) -> None:
    """Clean shutdown: snapshot at the log end offset (fsynced); I/O errors are logged only."""
    try:
        if manager.map_end_offset == log_end_offset:
            manager.take_snapshot(log_end_offset, sync=True)
    except OSError as exc:
        logger.warning("%s: cannot write producer snapshot: %s", manager.dir.name, exc)


def snapshot_on_roll(manager: ProducerStateManager, new_base_offset: int) -> None:
    """Segment roll: snapshot the state at the new segment's base offset (Kafka's roll)."""
    if manager.map_end_offset > new_base_offset:
        return  # the state covers batches above the roll point (should not happen)
    try:
        manager.take_snapshot(new_base_offset)
    except OSError as exc:
        logger.warning("%s: cannot write producer snapshot: %s", manager.dir.name, exc)


def duplicate_append_info(meta: BatchMetadata, log_start_offset: int) -> LogAppendInfo:
    """The ``LogAppendInfo`` answered for a duplicate batch: the original offsets, nothing
    appended (``records_count`` 0)."""
    return LogAppendInfo(
        first_offset=meta.first_offset,
        last_offset=meta.last_offset,
        max_timestamp_ms=meta.timestamp_ms,
        log_append_time_ms=-1,
        valid_bytes=0,
        records_count=0,
        log_start_offset=log_start_offset,
    )
