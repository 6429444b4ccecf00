"""Java's ``TransactionManager`` (KIP-98, KIP-360, KIP-447): the producer's sequence state
(``txn_partition_map``, a ``TxnPartitionMap``: the idempotence rules are in that module) and,
with a ``transactional.id``, the transaction state machine.

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

A send and ``begin_commit`` / ``begin_abort`` are atomic with respect to each other (Java makes
``maybeAddPartition`` and ``beginCommit`` / ``beginAbort`` synchronized): the move to
COMMITTING / ABORTING happens under the ``RecordAccumulator``'s lock, which closes the open
batches, and a record that needs a new batch is refused under that lock
(:meth:`fail_if_not_accepting_sends`) once the transaction stopped accepting records. So a
record either joined the transaction before it began completing (EndTxn waits for its batch)
or its ``send`` raises ``IllegalStateError``; none can be drained after EndTxn and land past
the transaction's marker, in a transaction no coordinator knows (the LSO would be stuck on
brokers without KIP-890 verification). Records pay nothing for it: the check is per new batch.
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
    NONE,
    ProducerIdAndEpoch,
    TxnPartitionMap,
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
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    ClusterAuthorizationFailedError,
    ErrorCode,
    KafkaError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
)
from spark_kafkalite.protocol.internal_topics import CoordinatorType

if TYPE_CHECKING:
    from spark_kafkalite.client.producer.producer_batch import ProducerBatch
    from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator

__all__ = ["TransactionManager"]

log = logging.getLogger(__name__)

_FATAL_BATCH_ERRORS = (
    ClusterAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    ProducerFencedError,
    UnsupportedVersionError,
)


class TransactionManager:
    """The sequence state of an idempotent producer (``txn_partition_map``) and, with a
    ``transactional_id``, the transaction state machine (module docstring). Times in ms."""

    def __init__(
        self,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        retry_backoff_ms: float = 100.0,
    ) -> None:
        self.txn_partition_map = TxnPartitionMap(transactional=transactional_id is not None)
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
        #: between ``begin_transaction`` and ``begin_commit`` / ``begin_abort``: records may
        #: start new batches (read by the accumulator under its lock)
        self.accepting_sends = False
        #: the accumulator whose appends this transaction manager gates (set by it)
        self.accumulator: RecordAccumulator | None = None

    @property
    def is_transactional(self) -> bool:
        """True when ``transactional.id`` is set (KIP-98 transactions, not only idempotence)."""
        return self.transactional_id is not None

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch:
        """The current producer id and epoch (``-1, -1`` before InitProducerId answered)."""
        return self.txn_partition_map.producer_id_and_epoch

    def should_stop_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """True if ``first`` (the head of ``tp``'s queue) must not be sent now (Java
        ``RecordAccumulator.shouldStopDrainBatchesForPartition``): its sequence must wait, or a
        transactional producer sends only to partitions already added to the transaction
        (``isSendToPartitionAllowed``)."""
        if self.transactional_id is not None and (
            tp not in self.partitions_in_transaction or self.state is State.FATAL_ERROR
        ):
            return True
        return self.txn_partition_map.should_stop_drain(tp, first)

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException, *, expired: bool) -> None:
        """``batch`` failed for good (or ``expired`` with an unknown outcome)."""
        if self.transactional_id is not None:
            self._handle_failed_transactional_batch(batch, error)
            return
        self.txn_partition_map.handle_failed_batch(batch, error, expired=expired)

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
            self.accepting_sends = True

    def begin_commit(self) -> TransactionalRequestResult:
        """Start committing the open transaction (Java ``beginCommit``): appends stop, the
        remaining AddPartitionsToTxn and EndTxn(commit) are queued (then InitProducerId when an epoch
        bump is due). Returns the result ``commit_transaction`` waits on; a retry after a timeout gets
        the same result.

        Raises:
            IllegalStateError: no transaction is open, or another call is pending.
            ProducerFencedError / KafkaError: the producer is in an error state."""
        with self.lock:

            def make() -> TransactionalRequestResult:
                self._maybe_fail_with_error()
                self._stop_accepting_sends(State.COMMITTING_TRANSACTION)
                return self._begin_completing_transaction(committed=True)

            return self._cached_result(make, State.COMMITTING_TRANSACTION, "commitTransaction")

    def begin_abort(self) -> TransactionalRequestResult:
        """Start aborting the transaction (Java ``beginAbort``), also from ABORTABLE_ERROR:
        appends stop and EndTxn(abort) is queued (then InitProducerId with the current id and epoch
        when an epoch bump is due, KIP-360). Returns the result ``abort_transaction`` waits on.

        Raises:
            IllegalStateError: no transaction is open, or another call is pending.
            KafkaError: the producer is in FATAL_ERROR."""
        with self.lock:

            def make() -> TransactionalRequestResult:
                if self.state is not State.ABORTABLE_ERROR:
                    self._maybe_fail_with_error()
                self._stop_accepting_sends(State.ABORTING_TRANSACTION)
                self.new_partitions_in_transaction.clear()
                return self._begin_completing_transaction(committed=False)

            return self._cached_result(make, State.ABORTING_TRANSACTION, "abortTransaction")

    def _stop_accepting_sends(self, target: State) -> None:
        """Move to ``target`` (COMMITTING / ABORTING) with the accumulator's appends held off and
        its open batches closed (module docstring)."""

        def stop() -> None:
            self.transition_to(target)
            self.accepting_sends = False

        if self.accumulator is None:  # no records can be sent (a state machine on its own)
            stop()
        else:
            self.accumulator.hold_appends(stop)

    def fail_if_not_accepting_sends(self) -> None:
        """Called by the accumulator, under its lock, before a record of a transactional
        producer starts a new batch (module docstring).

        Raises:
            IllegalStateError: the transaction is being committed or aborted, or none is open
                (Java ``maybeAddPartition`` -> ``failIfNotReadyForSend``).
        """
        if not self.accepting_sends:
            raise IllegalStateError(f"cannot call send in state {self.state.name}")

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
        """Queue AddOffsetsToTxn then TxnOffsetCommit of ``offsets`` for the group of
        ``group_metadata`` (``group_id``, and for KIP-447 ``generation_id``, ``member_id``,
        ``group_instance_id``); Java ``sendOffsetsToTransaction``. Returns the result to wait on.

        Raises:
            IllegalStateError: not transactional, no transaction open, or another call pending.
            ProducerFencedError / KafkaError: the producer is in an error state."""
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
            # the common case, read without the lock: a send racing begin_commit may pass here;
            # the accumulator refuses its record then (fail_if_not_accepting_sends)
            return
        with self.lock:
            self._maybe_fail_with_error()
            self._throw_if_pending_state("send")
            if not self.txn_partition_map.has_producer_id():
                raise IllegalStateError(
                    "cannot perform a 'send' before completing a call to init_transactions "
                    "when transactions are enabled"
                )
            if self.state is not State.IN_TRANSACTION:
                raise IllegalStateError(f"cannot call send in state {self.state.name}")

    # -- transactions: Sender side ----------------------------------------------------------

    def maybe_add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions with queued batches join the transaction (AddPartitionsToTxn is queued by
        ``next_request``) while it is open or committing (the batches queued while committing
        were appended before ``begin_commit``: later records are refused)."""
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
        """Queue ``handler`` by its priority, then in arrival order (Java ``enqueueRequest``)."""
        heapq.heappush(self._pending_requests, (handler.priority, next(self._request_order), handler))

    def has_pending_requests(self) -> bool:
        """True while a transactional request is queued or in flight."""
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
            handler = self._pending_requests[0][2]
            if handler.is_end_txn and has_incomplete_batches:
                return None
            heapq.heappop(self._pending_requests)
            if self.has_error() and not (
                self.state is State.ABORTABLE_ERROR and isinstance(handler, FindCoordinatorHandler)
            ):
                handler.result.fail(self._error())
                return None
            if handler.is_end_txn and not self.transaction_started:
                log.debug("not sending EndTxn for a transaction without partitions or offsets")
                handler.result.done()
                if self.state is not State.FATAL_ERROR:
                    self.complete_transaction()
                return heapq.heappop(self._pending_requests)[2] if self._pending_requests else None
            return handler

    def lookup_coordinator(self, key_type: int, key: str) -> None:
        """Forget the coordinator of ``key_type`` and queue a FindCoordinator for it."""
        self._coordinators[key_type] = None
        self.enqueue_request(FindCoordinatorHandler(self, key_type, key))

    def set_coordinator(self, key_type: int, node_id: int, host: str, port: int) -> None:
        """Record ``(node_id, host, port)`` as the coordinator of ``key_type``
        (``CoordinatorType``) from a FindCoordinator answer."""
        self._coordinators[key_type] = (node_id, host, port)

    def coordinator(self, key_type: int) -> tuple[int, str, int] | None:
        """``(node id, host, port)`` of the known coordinator of ``key_type``, or None."""
        return self._coordinators.get(key_type)

    def transition_to(self, target: State, error: KafkaError | None = None) -> None:
        """Java ``transitionTo``.

        Raises:
            IllegalStateError: the transition is not valid from the current state.
            ValueError: an error state without ``error``.
        """
        if target in (State.FATAL_ERROR, State.ABORTABLE_ERROR) and error is None:
            raise ValueError(f"transition to {target.name} needs the error that caused it")
        if not is_transition_valid(self.state, target):
            raise IllegalStateError(
                f"TransactionalId {self.transactional_id}: invalid transition attempted from state "
                f"{self.state.name} to state {target.name}"
            )
        if error is not None and target in (State.FATAL_ERROR, State.ABORTABLE_ERROR):
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
        """Enter ABORTABLE_ERROR with ``error`` (the application must abort); ignored while
        aborting or in FATAL_ERROR (Java ``transitionToAbortableError``)."""
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
        """Enter FATAL_ERROR with ``error`` and fail a pending call's result with it (Java
        ``transitionToFatalError``): every later call raises ``error``."""
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

    def _handle_failed_transactional_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        """Java ``handleFailedBatch`` / ``maybeTransitionToErrorState`` for a transactional
        producer: fatal when fenced or unauthorized, else abortable (with an epoch bump after
        the abort: the partition's sequence may now have a gap)."""
        self.txn_partition_map.remove_in_flight(batch)
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
        """True in ABORTABLE_ERROR or FATAL_ERROR (Java ``hasError``)."""
        return self.state in (State.ABORTABLE_ERROR, State.FATAL_ERROR)

    def _error(self) -> KafkaError:
        """The error of an error state (``transition_to`` sets it on entering one)."""
        if self.last_error is None:
            raise RuntimeError(
                f"TransactionalId {self.transactional_id}: state {self.state.name} has no error"
            )
        return self.last_error

    def fatal_error(self) -> KafkaError:
        """The error that put the producer in FATAL_ERROR. Raises ``RuntimeError`` in another state."""
        if self.state is not State.FATAL_ERROR:
            raise RuntimeError(
                f"TransactionalId {self.transactional_id}: state {self.state.name} is not fatal"
            )
        return self._error()

    def has_fatal_error(self) -> bool:
        """True in FATAL_ERROR (Java ``hasFatalError``)."""
        return self.state is State.FATAL_ERROR

    def has_abortable_error(self) -> bool:
        """True in ABORTABLE_ERROR (Java ``hasAbortableError``)."""
        return self.state is State.ABORTABLE_ERROR

    def is_aborting(self) -> bool:
        """True while the transaction is being aborted (Java ``isAborting``)."""
        return self.state is State.ABORTING_TRANSACTION

    def is_completing(self) -> bool:
        """True while the transaction is being committed or aborted (Java ``isCompleting``)."""
        return self.state in (State.COMMITTING_TRANSACTION, State.ABORTING_TRANSACTION)

    def transaction_coordinator_key(self) -> tuple[int, str]:
        """``(CoordinatorType.TRANSACTION, transactional.id)``: the FindCoordinator key of
        the transaction coordinator."""
        return CoordinatorType.TRANSACTION, self.transactional_id or ""
