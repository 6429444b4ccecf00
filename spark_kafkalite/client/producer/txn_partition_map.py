"""The sequence state of an idempotent (or transactional) producer: its producer id and epoch
and, per partition, the sequence bookkeeping (Java ``TxnPartitionMap`` / ``TxnPartitionEntry``
and ``ProducerIdAndEpoch``, with the sequence half of Java's ``TransactionManager``; KIP-98,
KIP-360). Owned by the ``TransactionManager`` (as ``txn_partition_map``).

Holds the producer id and epoch (from InitProducerId) and, per partition, the next sequence to
assign, the last acknowledged sequence and the batches that carry a sequence but are not yet
complete (in sequence order). Used only by the Sender thread (the accumulator's ``drain`` asks
``should_stop_drain``, through the ``TransactionManager``, and calls ``assign_sequence``).

Rules, as Java's client (3.x):

* a sequence is assigned when a batch is first drained; a retried batch keeps its sequence;
* a queued retry is sent only when it is the lowest in-flight sequence of its partition (so a
  retry never overtakes an earlier batch); new batches wait while the partition has an
  *unresolved* sequence (a batch that expired after it was sent: the broker may or may not have
  it) or in-flight batches of an older producer id/epoch;
* OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next one after the last acknowledged
  sequence is retried as is (an earlier batch failed and will be retried first);
  for the next batch it means a real gap (the broker lost the producer's state), and
  UNKNOWN_PRODUCER_ID means the same: the producer *bumps its epoch locally* and restarts that
  partition's sequences at 0 (the in-flight batches are renumbered and retried). The broker
  accepts a higher epoch starting at sequence 0;
* a batch that fails for good (e.g. MESSAGE_TOO_LARGE) after getting a sequence leaves a hole:
  the epoch is bumped for its partition as well; an expired batch marks its sequence unresolved,
  resolved once the partition has nothing in flight (bump unless the last acknowledged sequence
  is the one before the next sequence);
* INVALID_PRODUCER_EPOCH (our epoch is older than the broker's) fails the batch and resets the
  producer id: a new InitProducerId is sent;
* the renumbering of a partition waits until none of its batches is on the wire, so that a late
  success of an old attempt cannot mix with the new numbering (a simplification of Java's
  ``sequenceHasBeenReset`` handling).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from spark_kafkalite.client.producer.producer_batch import ProducerBatch

__all__ = [
    "ProducerIdAndEpoch",
    "TxnPartitionEntry",
    "TxnPartitionMap",
    "increment_sequence",
    "NONE",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "MAX_EPOCH",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT32_MAX = 2**31 - 1
MAX_EPOCH = 2**15 - 1

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """A producer id and its epoch (Java ``ProducerIdAndEpoch``; KIP-98): -1 / -1 until
    InitProducerId answered."""

    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH

    @property
    def is_valid(self) -> bool:
        """True once a producer id was assigned (>= 0)."""
        return self.producer_id >= 0


NONE = ProducerIdAndEpoch()


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past ``Int.MAX_VALUE`` to 0 (Java ``incrementSequence``)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass(slots=True)
class TxnPartitionEntry:
    """One partition's sequence state (Java ``TxnPartitionEntry``): the producer id/epoch its
    sequences belong to, the next sequence, the last acknowledged one and the batches in flight
    in sequence order."""

    producer_id_and_epoch: ProducerIdAndEpoch
    next_sequence: int = 0
    last_acked_sequence: int = -1
    in_flight: list[ProducerBatch] = field(default_factory=list)  # sorted by base_sequence

    def add(self, batch: ProducerBatch) -> None:
        """Insert ``batch`` among the in-flight batches, kept sorted by base sequence."""
        keys = [b.base_sequence for b in self.in_flight]
        self.in_flight.insert(bisect.bisect_right(keys, batch.base_sequence), batch)

    def remove(self, batch: ProducerBatch) -> None:
        """Forget ``batch`` (acknowledged or failed); no-op when it is not in flight."""
        try:
            self.in_flight.remove(batch)
        except ValueError:
            pass


class TxnPartitionMap:
    """The producer id and epoch and every partition's ``TxnPartitionEntry``, with the partitions
    whose sequence is unresolved or must be renumbered after an epoch bump (module docstring).
    ``transactional``: a transactional producer never bumps its epoch locally (the
    ``TransactionManager`` aborts, then bumps through InitProducerId)."""

    def __init__(self, transactional: bool) -> None:
        self.transactional = transactional
        self.producer_id_and_epoch: ProducerIdAndEpoch = NONE
        self._partitions: dict[TopicPartition, TxnPartitionEntry] = {}
        self._unresolved: dict[TopicPartition, int] = {}
        self._to_rewrite: set[TopicPartition] = set()
        self._epoch_bump_required = False

    # -- producer id -----------------------------------------------------------------------

    def has_producer_id(self) -> bool:
        """True once InitProducerId assigned a producer id."""
        return self.producer_id_and_epoch.is_valid

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """Use ``producer_id`` / ``epoch`` from now on; partitions waiting for an epoch bump
        restart their sequences at 0, their in-flight batches renumbered (KIP-360)."""
        log.info("producer id %d epoch %d", producer_id, epoch)
        self.producer_id_and_epoch = ProducerIdAndEpoch(producer_id, epoch)
        for tp in list(self._to_rewrite):
            self._start_sequences_at_beginning(tp)
        self._to_rewrite.clear()

    def reset_producer_id(self) -> None:
        """Forget the producer id: the Sender sends a new InitProducerId; every partition starts
        over at sequence 0 with the new id once its in-flight batches are done."""
        log.info("resetting producer id %s", self.producer_id_and_epoch)
        self.producer_id_and_epoch = NONE
        self._epoch_bump_required = False

    # -- draining (called by the accumulator under its lock, Sender thread) -----------------

    def _entry(self, tp: TopicPartition) -> TxnPartitionEntry:
        entry = self._partitions.get(tp)
        if entry is None:
            entry = self._partitions[tp] = TxnPartitionEntry(self.producer_id_and_epoch)
        return entry

    def should_stop_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """True if ``first`` (the head of ``tp``'s queue) must not be sent now for its sequence
        (Java ``RecordAccumulator.shouldStopDrainBatchesForPartition``)."""
        if not self.producer_id_and_epoch.is_valid or tp in self._to_rewrite:
            return True
        entry = self._partitions.get(tp)
        if first.base_sequence == NO_SEQUENCE:
            if (
                entry is not None
                and entry.in_flight
                and entry.producer_id_and_epoch != self.producer_id_and_epoch
            ):
                return True  # older id/epoch still in flight: sequence 0 of the new epoch must wait
            if tp in self._unresolved:
                return True
            return False
        if entry is not None and entry.in_flight and entry.in_flight[0].base_sequence != first.base_sequence:
            return True  # a retry waits for the batch before it
        return False

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Give a never-sent ``batch`` its producer id, epoch and sequence."""
        if batch.base_sequence != NO_SEQUENCE:
            return
        entry = self._entry(batch.tp)
        if entry.producer_id_and_epoch != self.producer_id_and_epoch and not entry.in_flight:
            self._restart(entry)
        pie = self.producer_id_and_epoch
        batch.is_transactional = self.transactional
        batch.set_producer_state(pie.producer_id, pie.epoch, entry.next_sequence)
        entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
        entry.add(batch)

    def _restart(self, entry: TxnPartitionEntry) -> None:
        entry.producer_id_and_epoch = self.producer_id_and_epoch
        entry.next_sequence = 0
        entry.last_acked_sequence = -1

    # -- completions -----------------------------------------------------------------------

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        entry = self._partitions.get(batch.tp)
        if entry is None or batch.base_sequence == NO_SEQUENCE:
            return
        entry.remove(batch)
        if (
            batch.producer_id == entry.producer_id_and_epoch.producer_id
            and batch.producer_epoch == entry.producer_id_and_epoch.epoch
        ):
            entry.last_acked_sequence = max(entry.last_acked_sequence, batch.last_sequence)

    def is_next_sequence(self, tp: TopicPartition, sequence: int) -> bool:
        entry = self._partitions.get(tp)
        last = entry.last_acked_sequence if entry is not None else -1
        return sequence - last == 1

    def can_retry(self, batch: ProducerBatch, error: KafkaError) -> bool:
        """Whether ``error`` for ``batch`` is worth a retry with idempotence (Java
        ``TransactionManager.canRetry``); may request an epoch bump for the partition."""
        code = error.error_code
        tp = batch.tp
        if code == ErrorCode.unknown_producer_id:
            if self.transactional:
                return False  # fails the batch: abortable, then the epoch is bumped
            self.request_epoch_bump(tp)
            return True
        if code == ErrorCode.out_of_order_sequence_number:
            if tp not in self._unresolved and not self.is_next_sequence(tp, batch.base_sequence):
                return True  # an earlier batch failed; it is retried first
            if self.transactional:
                return False
            self.request_epoch_bump(tp)  # a real gap
            return True
        return error.retriable

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        """``batch`` is no longer in flight (a transactional failure: the ``TransactionManager``
        decides what follows)."""
        entry = self._partitions.get(batch.tp)
        if entry is not None:
            entry.remove(batch)

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException, *, expired: bool) -> None:
        """``batch`` of an idempotent producer failed for good (or ``expired`` with an unknown
        outcome)."""
        entry = self._partitions.get(batch.tp)
        if entry is None or batch.base_sequence == NO_SEQUENCE:
            return
        entry.remove(batch)
        if expired and batch.attempts > 0:
            previous = self._unresolved.get(batch.tp, -1)
            self._unresolved[batch.tp] = max(previous, batch.last_sequence)
            return
        if expired:
            self.request_epoch_bump(batch.tp)  # never sent but numbered: a hole
            return
        if getattr(error, "error_code", None) == ErrorCode.invalid_producer_epoch:
            self.reset_producer_id()
            self._to_rewrite.add(batch.tp)
            return
        self.request_epoch_bump(batch.tp)

    # -- epoch bumps -----------------------------------------------------------------------

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        if tp in self._partitions:
            self._to_rewrite.add(tp)
        self._epoch_bump_required = True

    def maybe_resolve_sequences(self) -> None:
        """Unresolved partitions with nothing in flight: fine if the last acknowledged sequence
        directly precedes the next one, else bump the epoch (Java ``maybeResolveSequences``)."""
        for tp in list(self._unresolved):
            entry = self._partitions.get(tp)
            if entry is not None and entry.in_flight:
                continue
            del self._unresolved[tp]
            if entry is not None and not self.is_next_sequence(tp, entry.next_sequence):
                log.info(
                    "%s: no in-flight batches, last acknowledged sequence %d, next %d: bumping the epoch",
                    tp,
                    entry.last_acked_sequence,
                    entry.next_sequence,
                )
                self.request_epoch_bump(tp)

    def maybe_bump_epoch(self, on_wire: Callable[[TopicPartition], bool]) -> bool:
        """Perform a requested epoch bump once no partition to renumber has a batch on the wire:
        epoch + 1 locally (a new producer id via InitProducerId at the maximum epoch), then the
        partitions' in-flight batches are renumbered from 0. Returns True if it bumped."""
        if not self._epoch_bump_required or not self.producer_id_and_epoch.is_valid:
            return False
        if any(on_wire(tp) for tp in self._to_rewrite):
            return False
        self._epoch_bump_required = False
        pie = self.producer_id_and_epoch
        if pie.epoch >= MAX_EPOCH:
            self.reset_producer_id()
            return True
        self.set_producer_id_and_epoch(pie.producer_id, pie.epoch + 1)
        return True

    def _start_sequences_at_beginning(self, tp: TopicPartition) -> None:
        entry = self._entry(tp)
        self._restart(entry)
        pie = self.producer_id_and_epoch
        for batch in entry.in_flight:
            batch.set_producer_state(pie.producer_id, pie.epoch, entry.next_sequence)
            entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
        self._unresolved.pop(tp, None)
        log.info(
            "%s: sequences restart at 0 with %s (%d batch(es) renumbered)", tp, pie, len(entry.in_flight)
        )

    def reset_sequence_numbers(self) -> None:
        """After an epoch bump every partition restarts at sequence 0 (nothing is in flight)."""
        self._partitions.clear()
        self._unresolved.clear()
        self._to_rewrite.clear()

    def sequence_of(self, tp: TopicPartition) -> int:
        """Next sequence for ``tp`` (tests)."""
        entry = self._partitions.get(tp)
        return entry.next_sequence if entry is not None else 0

    def in_flight_count(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        return len(entry.in_flight) if entry is not None else 0
