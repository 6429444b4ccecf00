"""Java's ``TransactionManager`` (with ``TxnPartitionMap``; KIP-98, KIP-360, KIP-447):
idempotent-producer bookkeeping and, with a ``transactional.id``, the transaction state machine.

Transactions (see ``transaction_state`` for the states, ``txn_request_handlers`` for the
requests): ``initialize_transactions`` (InitProducerId to the transaction coordinator found with
FindCoordinator key type 1) -> READY; ``begin_transaction`` -> IN_TRANSACTION; the Sender adds
each partition to the transaction (AddPartitionsToTxn) before its first batch of the
transaction is drained (Java registers it in ``send``; the wire order is the same) and batches
carry the transactional attribute; ``send_offsets_to_transaction`` sends AddOffsetsToTxn then
TxnOffsetCommit to the group coordinator; ``begin_commit`` / ``begin_abort`` queue EndTxn, sent
once every batch of the transaction is complete (an abort first fails the batches not yet sent
with ``TransactionAbortedError``); EndTxn is skipped when nothing was added. A failed batch or
request moves the producer to ABORTABLE_ERROR (only ``abort_transaction`` is allowed; after a
failed batch the abort is followed by an epoch bump, KIP-360) or, when fenced or unauthorized,
to FATAL_ERROR (every call raises; close the producer). Transactional methods are thread-safe
(``lock``); the requests themselves are sent by the Sender thread, one at a time.

Idempotence:

Holds the producer id and epoch (from InitProducerId) and, per partition, the next sequence to
assign, the last acknowledged sequence and the batches that carry a sequence but are not yet
complete (in sequence order). Used only by the Sender thread (the accumulator's ``drain`` calls
``should_stop_drain`` and ``assign_sequence`` on it).

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

import heapq
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.errors import IllegalStateError, TransactionAbortedError
from spark_kafkalite.client.producer.transaction_state import (
    State,
    TransactionalRequestResult,
    is_transition_valid,
)
from spark_kafkalite.client.producer.txn_partition_map import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NONE,
    ProducerIdAndEpoch,
    TxnPartitionEntry,
    increment_sequence,
)
from spark_kafkalite.client.producer.txn_request_handlers import (
    AddOffsetsToTxnHandler,
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnRequestHandler,
    fenced_error,
)
from spark_kafkalite.client.producer.txn_requests import COORDINATOR_KEY_TRANSACTION
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    KafkaError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
)

if TYPE_CHECKING:
    from spark_kafkalite.client.producer.producer_batch import ProducerBatch

__all__ = ["TransactionManager", "ProducerIdAndEpoch", "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE"]

log = logging.getLogger(__name__)

_FATAL_BATCH_ERRORS = (
    ClusterAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    ProducerFencedError,
    UnsupportedVersionError,
)


class TransactionManager:
    """Producer id, epoch and sequence numbers of an idempotent producer and, with a
    ``transactional_id``, the transaction state machine (module docstring). Times in ms."""

    def __init__(
        self,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        retry_backoff_ms: float = 100.0,
    ) -> None:
        self.producer_id_and_epoch: ProducerIdAndEpoch = NONE
        self._partitions: dict[TopicPartition, TxnPartitionEntry] = {}
        self._unresolved: dict[TopicPartition, int] = {}
        self._to_rewrite: set[TopicPartition] = set()
        self._epoch_bump_required = False
        self.epoch_bumps = 0  # observability / tests
        # -- transactions
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = int(transaction_timeout_ms)
        self.retry_backoff_ms = float(retry_backoff_ms)
        self.lock = threading.RLock()
        self.state = State.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.partitions_in_transaction: set[TopicPartition] = set()
        self.pending_partitions_in_transaction: set[TopicPartition] = set()
        self.new_partitions_in_transaction: set[TopicPartition] = set()
        self.transaction_started = False
        self.epoch_bump_required = False  # after the abort: InitProducerId with our id and epoch
        self.supports_epoch_bump = True  # InitProducerId v3+ (KIP-360); set by the Sender
        self.in_flight_request: TxnRequestHandler | None = None
        self._pending_requests: list[tuple[int, int, TxnRequestHandler]] = []
        self._request_order = itertools.count()
        self._coordinators: dict[int, tuple[int, str, int] | None] = {}
        self._pending_transition: tuple[TransactionalRequestResult, State, str] | None = None
        self._bump_after_end_txn: InitProducerIdHandler | None = None

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    # -- producer id -----------------------------------------------------------------------

    def has_producer_id(self) -> bool:
        return self.producer_id_and_epoch.is_valid

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
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
        """True if ``first`` (the head of ``tp``'s queue) must not be sent now (Java
        ``RecordAccumulator.shouldStopDrainBatchesForPartition``; a transactional producer sends
        only to partitions already added to the transaction, ``isSendToPartitionAllowed``)."""
        if not self.producer_id_and_epoch.is_valid or tp in self._to_rewrite:
            return True
        if self.transactional_id is not None and (
            tp not in self.partitions_in_transaction or self.state is State.FATAL_ERROR
        ):
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
        batch.is_transactional = self.transactional_id is not None
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
        transactional = self.transactional_id is not None
        if code == ErrorCode.unknown_producer_id:
            if transactional:
                return False  # fails the batch: abortable, then the epoch is bumped
            self.request_epoch_bump(tp)
            return True
        if code == ErrorCode.out_of_order_sequence_number:
            if tp not in self._unresolved and not self.is_next_sequence(tp, batch.base_sequence):
                return True  # an earlier batch failed; it is retried first
            if transactional:
                return False
            self.request_epoch_bump(tp)  # a real gap
            return True
        return error.retriable

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException, *, expired: bool) -> None:
        """``batch`` failed for good (or ``expired`` with an unknown outcome)."""
        if self.transactional_id is not None:
            self._handle_failed_transactional_batch(batch, error)
            return
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
        self.epoch_bumps += 1
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

    def sequence_of(self, tp: TopicPartition) -> int:
        """Next sequence for ``tp`` (tests)."""
        entry = self._partitions.get(tp)
        return entry.next_sequence if entry is not None else 0

    def in_flight_count(self, tp: TopicPartition) -> int:
        entry = self._partitions.get(tp)
        return len(entry.in_flight) if entry is not None else 0

    # -- transactions: user calls (Java TransactionManager, transactional half) -------------

    def _ensure_transactional(self) -> None:
        if self.transactional_id is None:
            raise IllegalStateError(
                "transactional method invoked on a non-transactional producer (set transactional.id)"
            )

    def _maybe_fail_with_error(self) -> None:
        """Java ``maybeFailWithError``: a fenced producer raises a fresh ``ProducerFencedError``,
        other errors a ``KafkaError`` caused by the last error."""
        error = self.last_error
        if self.state not in (State.ABORTABLE_ERROR, State.FATAL_ERROR) or error is None:
            return
        if isinstance(error, ProducerFencedError):
            raise fenced_error(self)
        raise KafkaError(
            f"cannot execute transactional method because we are in an error state ({self.state.name}): {error}"
        ) from error

    def _throw_if_pending_state(self, operation: str) -> None:
        pending = self._pending_transition
        if pending is not None and not pending[0].is_acked:
            raise IllegalStateError(
                f"cannot attempt operation `{operation}` because the previous call to `{pending[2]}` "
                "timed out and must be retried"
            )

    def _cached_result(
        self, make: Callable[[], TransactionalRequestResult], next_state: State, operation: str
    ) -> TransactionalRequestResult:
        """Java ``handleCachedTransactionRequestResult``: a call repeated after a timeout gets the
        same pending result."""
        self._ensure_transactional()
        pending = self._pending_transition
        if pending is not None:
            if pending[0].is_acked:
                self._pending_transition = None
            elif next_state is not pending[1]:
                raise IllegalStateError(
                    f"cannot attempt operation `{operation}` because the previous call to `{pending[2]}` "
                    "timed out and must be retried"
                )
            else:
                return pending[0]
        result = make()
        self._pending_transition = (result, next_state, operation)
        return result

    def initialize_transactions(
        self, bump: ProducerIdAndEpoch = NONE, after_end_txn: bool = False
    ) -> TransactionalRequestResult:
        """``init_transactions``: InitProducerId with the transactional id (fences older producers
        of the id and aborts their open transaction). ``bump`` (KIP-360, after an abort) asks
        for an epoch bump of our own producer id instead; ``after_end_txn``: queued only once
        the EndTxn(abort) before it completed (sent earlier, the bump would fence that EndTxn)."""
        with self.lock:
            self._maybe_fail_with_error()

            def make() -> TransactionalRequestResult:
                if not bump.is_valid:
                    self.transition_to(State.INITIALIZING)
                handler = InitProducerIdHandler(self, bump.producer_id, bump.epoch)
                if after_end_txn:
                    self._bump_after_end_txn = handler
                else:
                    self.enqueue_request(handler)
                return handler.result

            return self._cached_result(make, State.INITIALIZING, "initTransactions")

    def begin_transaction(self) -> None:
        """READY -> IN_TRANSACTION (local only; nothing is sent).

        Raises:
            IllegalStateError: not READY (e.g. before ``init_transactions``, or a transaction is open).
            ProducerFencedError / KafkaError: the producer is in an error state.
        """
        with self.lock:
            self._ensure_transactional()
            self._throw_if_pending_state("beginTransaction")
            self._maybe_fail_with_error()
            self.transition_to(State.IN_TRANSACTION)

    def begin_commit(self) -> TransactionalRequestResult:
        with self.lock:

            def make() -> TransactionalRequestResult:
                self._maybe_fail_with_error()
                self.transition_to(State.COMMITTING_TRANSACTION)
                return self._begin_completing_transaction(committed=True)

            return self._cached_result(make, State.COMMITTING_TRANSACTION, "commitTransaction")

    def begin_abort(self) -> TransactionalRequestResult:
        with self.lock:

            def make() -> TransactionalRequestResult:
                if self.state is not State.ABORTABLE_ERROR:
                    self._maybe_fail_with_error()
                self.transition_to(State.ABORTING_TRANSACTION)
                self.new_partitions_in_transaction.clear()
                return self._begin_completing_transaction(committed=False)

            return self._cached_result(make, State.ABORTING_TRANSACTION, "abortTransaction")

    def _begin_completing_transaction(self, committed: bool) -> TransactionalRequestResult:
        if self.new_partitions_in_transaction:
            self.enqueue_request(self._add_partitions_handler())
        # INVALID_PRODUCER_ID_MAPPING: the coordinator would refuse EndTxn; go to InitProducerId
        if self.last_error is None or self.last_error.error_code != ErrorCode.invalid_producer_id_mapping:
            handler = EndTxnHandler(self, committed)
            self.enqueue_request(handler)
            if not self.epoch_bump_required:
                return handler.result
            return self.initialize_transactions(self.producer_id_and_epoch, after_end_txn=True)
        return self.initialize_transactions(self.producer_id_and_epoch)

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_metadata: Mapping[str, Any]
    ) -> TransactionalRequestResult:
        with self.lock:
            self._ensure_transactional()
            self._throw_if_pending_state("sendOffsetsToTransaction")
            self._maybe_fail_with_error()
            if self.state is not State.IN_TRANSACTION:
                raise IllegalStateError(
                    f"cannot send offsets if a transaction is not in progress (state {self.state.name})"
                )
            result = TransactionalRequestResult("sendOffsetsToTransaction")
            self.enqueue_request(AddOffsetsToTxnHandler(self, result, offsets, group_metadata))
            return result

    def fail_if_not_ready_for_send(self) -> None:
        """A transactional ``send`` needs an open transaction (Java ``maybeAddPartition``).

        Raises:
            IllegalStateError: no ``init_transactions`` yet, no open transaction, or a previous
                call timed out and must be retried.
            ProducerFencedError / KafkaError: the producer is in an error state.
        """
        pending = self._pending_transition
        if self.state is State.IN_TRANSACTION and (pending is None or pending[0].is_acked):
            return  # the common case, read without the lock (a send racing a commit may pass)
        with self.lock:
            self._maybe_fail_with_error()
            self._throw_if_pending_state("send")
            if not self.has_producer_id():
                raise IllegalStateError(
                    "cannot perform a 'send' before completing a call to init_transactions "
                    "when transactions are enabled"
                )
            if self.state is not State.IN_TRANSACTION:
                raise IllegalStateError(f"cannot call send in state {self.state.name}")

    # -- transactions: Sender side ----------------------------------------------------------

    def maybe_add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions with queued batches join the transaction (AddPartitionsToTxn is queued by
        ``next_request``) while it is open or committing."""
        with self.lock:
            if self.state not in (State.IN_TRANSACTION, State.COMMITTING_TRANSACTION):
                return
            for tp in tps:
                if (
                    tp not in self.partitions_in_transaction
                    and tp not in self.pending_partitions_in_transaction
                ):
                    self.new_partitions_in_transaction.add(tp)

    def _add_partitions_handler(self) -> AddPartitionsToTxnHandler:
        self.pending_partitions_in_transaction.update(self.new_partitions_in_transaction)
        handler = AddPartitionsToTxnHandler(self, set(self.new_partitions_in_transaction))
        self.new_partitions_in_transaction.clear()
        return handler

    def enqueue_request(self, handler: TxnRequestHandler) -> None:
        heapq.heappush(self._pending_requests, (handler.priority, next(self._request_order), handler))

    def pending_requests_add(self, handler: TxnRequestHandler) -> None:
        self.enqueue_request(handler)

    def has_pending_requests(self) -> bool:
        return bool(self._pending_requests) or self.in_flight_request is not None

    def next_request(self, has_incomplete_batches: bool) -> TxnRequestHandler | None:
        """The next request to send (Java ``nextRequest``): EndTxn waits until every batch is
        complete; in an error state queued requests fail (FindCoordinator still goes out when
        the error is abortable); EndTxn is not sent when nothing joined the transaction."""
        with self.lock:
            if self.new_partitions_in_transaction:
                self.enqueue_request(self._add_partitions_handler())
            if not self._pending_requests:
                return None
            handler: TxnRequestHandler | None = self._pending_requests[0][2]
            assert handler is not None
            if handler.is_end_txn and has_incomplete_batches:
                return None
            heapq.heappop(self._pending_requests)
            if self.has_error() and not (
                self.state is State.ABORTABLE_ERROR and isinstance(handler, FindCoordinatorHandler)
            ):
                assert self.last_error is not None
                handler.result.fail(self.last_error)
                return None
            if handler.is_end_txn and not self.transaction_started:
                log.debug("not sending EndTxn for a transaction without partitions or offsets")
                handler.result.done()
                if self.state is not State.FATAL_ERROR:
                    self.complete_transaction()
                handler = heapq.heappop(self._pending_requests)[2] if self._pending_requests else None
            return handler

    def lookup_coordinator(self, key_type: int, key: str) -> None:
        """Forget the coordinator of ``key_type`` and queue a FindCoordinator for it."""
        self._coordinators[key_type] = None
        self.enqueue_request(FindCoordinatorHandler(self, key_type, key))

    def set_coordinator(self, key_type: int, node_id: int, host: str, port: int) -> None:
        self._coordinators[key_type] = (node_id, host, port)

    def coordinator(self, key_type: int) -> tuple[int, str, int] | None:
        """``(node id, host, port)`` of the known coordinator of ``key_type``, or None."""
        return self._coordinators.get(key_type)

    def transition_to(self, target: State, error: KafkaError | None = None) -> None:
        """Java ``transitionTo``.

        Raises:
            IllegalStateError: the transition is not valid from the current state.
        """
        if not is_transition_valid(self.state, target):
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id}: invalid transition attempted from state "
                f"{self.state.name} to state {target.name}"
            )
        if target in (State.FATAL_ERROR, State.ABORTABLE_ERROR):
            assert error is not None
            self.last_error = error
            log.info(
                "transactional.id %s: %s -> %s: %s",
                self.transactional_id,
                self.state.name,
                target.name,
                error,
            )
        else:
            self.last_error = None
        self.state = target

    def transition_to_abortable_error(self, error: KafkaError) -> None:
        with self.lock:
            if self.state is State.ABORTING_TRANSACTION:
                log.debug(
                    "not moving to ABORTABLE_ERROR (%s): the transaction is already being aborted", error
                )
                return
            if self.state is State.FATAL_ERROR:
                return
            self.transition_to(State.ABORTABLE_ERROR, error)

    def transition_to_fatal_error(self, error: KafkaError) -> None:
        with self.lock:
            self.transition_to(State.FATAL_ERROR, error)
            if self._pending_transition is not None:
                self._pending_transition[0].fail(error)

    def complete_transaction(self) -> None:
        """EndTxn done (or skipped): READY, or INITIALIZING when an epoch bump follows."""
        with self.lock:
            self.transition_to(State.INITIALIZING if self.epoch_bump_required else State.READY)
            if self._bump_after_end_txn is not None:
                self.enqueue_request(self._bump_after_end_txn)
                self._bump_after_end_txn = None
            self.epoch_bump_required = False
            self.transaction_started = False
            self.new_partitions_in_transaction.clear()
            self.pending_partitions_in_transaction.clear()
            self.partitions_in_transaction.clear()

    def reset_sequence_numbers(self) -> None:
        """After an epoch bump every partition restarts at sequence 0 (nothing is in flight)."""
        self._partitions.clear()
        self._unresolved.clear()
        self._to_rewrite.clear()

    def _handle_failed_transactional_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        """Java ``handleFailedBatch`` / ``maybeTransitionToErrorState`` for a transactional
        producer: fatal when fenced or unauthorized, else abortable (with an epoch bump after
        the abort: the partition's sequence may now have a gap)."""
        entry = self._partitions.get(batch.tp)
        if entry is not None:
            entry.remove(batch)
        if isinstance(error, TransactionAbortedError):
            return
        if isinstance(error, _FATAL_BATCH_ERRORS):
            self.transition_to_fatal_error(error)
            return
        with self.lock:
            if self.supports_epoch_bump and self.state is not State.COMMITTING_TRANSACTION:
                self.epoch_bump_required = True
            kafka_error = error if isinstance(error, KafkaError) else KafkaError(repr(error))
            self.transition_to_abortable_error(kafka_error)

    def has_error(self) -> bool:
        return self.state in (State.ABORTABLE_ERROR, State.FATAL_ERROR)

    def has_fatal_error(self) -> bool:
        return self.state is State.FATAL_ERROR

    def has_abortable_error(self) -> bool:
        return self.state is State.ABORTABLE_ERROR

    def is_aborting(self) -> bool:
        return self.state is State.ABORTING_TRANSACTION

    def is_completing(self) -> bool:
        return self.state in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)

    def transaction_coordinator_key(self) -> tuple[int, str]:
        return COORDINATOR_KEY_TRANSACTION, self.transactional_id or ""
