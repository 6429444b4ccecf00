"""One producer's state in one partition and the checks a batch passes against it before it
is appended (Kafka's ``ProducerStateEntry``, ``BatchMetadata`` and the validation of
``ProducerAppendInfo``; KIP-98, KIP-360). Pure functions over batch headers: no I/O.

For every producer id that wrote to the partition the broker keeps its epoch and the metadata of
its last :data:`NUM_BATCHES_TO_RETAIN` (5) batches: first/last sequence, first/last offset and
max timestamp. Only batch headers are looked at (``producer_id``, ``producer_epoch``,
``base_sequence``, ``last_offset_delta``), never records.

Rules for batches from clients (:meth:`~broker.log.producer_state_manager.ProducerStateManager.check_client_append`, applied by
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
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass

from spark_kafkalite.protocol.control_records import EndTransactionMarker
from spark_kafkalite.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceNumberError,
    TransactionCoordinatorFencedError,
)
from spark_kafkalite.protocol.record_batch import BatchHeader

__all__ = [
    "AppendOrigin",
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "ProducerStateEntry",
    "check_client_batch",
    "check_end_txn_marker",
    "last_sequence",
    "in_sequence",
]

NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = 2**31 - 1


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
        """Last offset written (-1 when no batch is retained)."""
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
