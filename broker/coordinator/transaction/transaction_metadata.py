"""The state of one transactional id and its state machine (Kafka's ``TransactionMetadata.scala``,
``TransactionState``, ``TxnTransitMetadata``).

Every change is two-step: a ``prepare_*`` method checks the transition, sets ``pending_state``
and returns the new value as a :class:`TxnTransitMetadata`; the coordinator appends it to
``__transaction_state`` (acks=all) and only then applies it with
:meth:`TransactionMetadata.complete_transition_to` (or clears ``pending_state`` if the append
failed). While a transition is pending most requests get CONCURRENT_TRANSACTIONS.

States (id written to the log): Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3,
CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7 (never persisted: the in-memory
"bump the epoch, then abort" step of a fence). Allowed previous states are Kafka's
(``TransactionState.validPreviousStates``).

Illegal transitions raise :class:`IllegalTransactionStateError` (Kafka's
``IllegalStateException``): they are coordinator bugs, never client errors.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from spark_kafkalite.protocol.transaction_records import TransactionLogValue

__all__ = [
    "TransactionState",
    "TxnTransitMetadata",
    "TransactionMetadata",
    "IllegalTransactionStateError",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "is_epoch_exhausted",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_SHORT_MAX = 32767

TopicPartition = tuple[str, int]


class IllegalTransactionStateError(RuntimeError):
    """A transition the state machine does not allow (a coordinator bug)."""


class TransactionState(enum.Enum):
    """Kafka's ``TransactionState``: (id written to the log, name shown by DescribeTransactions /
    ListTransactions)."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        """Raises: ValueError for an unknown id."""
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state named ``name`` (as Kafka spells it), or None."""
        for state in cls:
            if state.state_name == name:
                return state
        return None


S = TransactionState

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's ``TransactionMetadata.isEpochExhausted``: the epoch is at ``Short.MAX_VALUE - 1``
    or above (``Short.MAX_VALUE`` stays reserved so the coordinator can always fence)."""
    return epoch >= _SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """A prepared new value of a transactional id (Kafka's ``TxnTransitMetadata``)."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp_ms: int
    txn_last_update_timestamp_ms: int

    def to_log_value(self) -> TransactionLogValue:
        """The ``TransactionLogValue`` to append (partitions sorted, grouped by topic)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.txn_timeout_ms,
            self.state.id,
            tuple((t, tuple(ps)) for t, ps in by_topic.items()),
            self.txn_last_update_timestamp_ms,
            self.txn_start_timestamp_ms,
            self.previous_producer_id,
            self.next_producer_id,
        )


@dataclass(eq=False)
class TransactionMetadata:
    """The cached state of ``transactional_id`` (see the module docstring). Timestamps are ms
    since the epoch, -1 when unset."""

    transactional_id: str
    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp_ms: int = -1
    txn_last_update_timestamp_ms: int = -1
    pending_state: TransactionState | None = None
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        """The metadata a loaded ``TransactionLogValue`` describes (Kafka's ``readTxnRecordValue``).

        Raises:
            ValueError: unknown state id.
        """
        return cls(
            transactional_id,
            value.producer_id,
            value.previous_producer_id,
            value.next_producer_id,
            value.producer_epoch,
            NO_PRODUCER_EPOCH,
            value.transaction_timeout_ms,
            TransactionState.from_id(value.state),
            {(t, p) for t, ps in value.partitions for p in ps},
            value.start_timestamp_ms,
            value.last_update_timestamp_ms,
        )

    # -- queries ---------------------------------------------------------------------------
    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker was written for ``tp`` (only while markers are being sent).

        Raises:
            IllegalTransactionStateError: not in PrepareCommit / PrepareAbort.
        """
        if self.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            raise IllegalTransactionStateError(
                f"Transaction metadata's current state is {self.state.state_name}, and its pending state is "
                f"{self.pending_state} while trying to remove partitions whose txn marker has been sent"
            )
        self.topic_partitions.discard(tp)

    # -- prepare ---------------------------------------------------------------------------
    def prepare_no_transit(self) -> TxnTransitMetadata:
        return self._transit(
            self.state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """Epoch + 1 into PrepareEpochFence (not bumped again after a failed fence write).

        Raises:
            IllegalTransactionStateError: the epoch is already ``Short.MAX_VALUE``.
        """
        if self.producer_epoch == _SHORT_MAX:
            raise IllegalTransactionStateError(
                f"Cannot fence producer with epoch equal to Short.MaxValue since this would overflow"
                f" ({self.transactional_id})"
            )
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE,
            self.producer_id,
            bumped,
            NO_PRODUCER_EPOCH,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )

    def prepare_increment_producer_epoch(
        self, new_txn_timeout_ms: int, expected_producer_epoch: int | None, update_timestamp_ms: int
    ) -> TxnTransitMetadata | None:
        """Into Empty with epoch + 1 (Kafka's ``prepareIncrementProducerEpoch``, KIP-360 rules);
        None = PRODUCER_FENCED (nothing prepared).

        Raises:
            IllegalTransactionStateError: the epoch is exhausted (rotate the producer id instead).
        """
        if self.is_producer_epoch_exhausted:
            raise IllegalTransactionStateError(
                f"Cannot allocate any more producer epochs for producerId {self.producer_id}"
            )
        bumped = self.producer_epoch + 1
        if expected_producer_epoch is None:
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_producer_epoch == self.producer_epoch:
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_producer_epoch == self.last_producer_epoch:
            # a retry of an InitProducerId that succeeded: answer the current epoch again
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(
            S.EMPTY,
            self.producer_id,
            next_epoch,
            last_epoch,
            new_txn_timeout_ms,
            frozenset(),
            -1,
            update_timestamp_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, new_txn_timeout_ms: int, update_timestamp_ms: int, record_last_epoch: bool
    ) -> TxnTransitMetadata:
        """Into Empty with a new producer id and epoch 0 (exhausted epoch).

        Raises:
            IllegalTransactionStateError: a transaction is still open.
        """
        if self.has_pending_transaction:
            raise IllegalTransactionStateError(
                "Cannot rotate producer ids while a transaction is still pending"
            )
        return self._prepare(
            S.EMPTY,
            new_producer_id,
            0,
            self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            new_txn_timeout_ms,
            frozenset(),
            -1,
            update_timestamp_ms,
        )

    def prepare_add_partitions(
        self, added: set[TopicPartition] | frozenset[TopicPartition], update_timestamp_ms: int
    ) -> TxnTransitMetadata:
        """Into Ongoing with the union of partitions; the start time is set when a new
        transaction begins (from Empty / Complete*)."""
        start = (
            update_timestamp_ms
            if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
            else self.txn_start_timestamp_ms
        )
        return self._prepare(
            S.ONGOING,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions | set(added)),
            start,
            update_timestamp_ms,
        )

    def prepare_abort_or_commit(
        self, new_state: TransactionState, update_timestamp_ms: int
    ) -> TxnTransitMetadata:
        return self._prepare(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(self.topic_partitions),
            self.txn_start_timestamp_ms,
            update_timestamp_ms,
        )

    def prepare_complete(self, update_timestamp_ms: int) -> TxnTransitMetadata:
        """Into CompleteCommit / CompleteAbort (from PrepareCommit / PrepareAbort), no partitions."""
        new_state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(
            new_state,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp_ms,
            update_timestamp_ms,
        )

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(
            S.DEAD,
            self.producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.txn_timeout_ms,
            frozenset(),
            self.txn_start_timestamp_ms,
            self.txn_last_update_timestamp_ms,
        )

    def _transit(
        self,
        state: TransactionState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_ms: int,
        update_ms: int,
    ) -> TxnTransitMetadata:
        return TxnTransitMetadata(
            producer_id,
            self.producer_id,  # Kafka records the id the transition starts from
            self.next_producer_id,
            epoch,
            last_epoch,
            timeout_ms,
            state,
            partitions,
            start_ms,
            update_ms,
        )

    def _prepare(
        self,
        state: TransactionState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[TopicPartition],
        start_ms: int,
        update_ms: int,
    ) -> TxnTransitMetadata:
        """Kafka's ``prepareTransitionTo``."""
        if self.pending_state is not None:
            raise IllegalTransactionStateError(
                f"Preparing transaction state transition to {state.state_name} while it already has a "
                f"pending state {self.pending_state.state_name}"
            )
        if producer_id < 0:
            raise IllegalTransactionStateError(f"Illegal new producer id {producer_id}")
        if state is not S.DEAD and not 0 <= epoch <= _SHORT_MAX:
            raise IllegalTransactionStateError(f"Illegal new producer epoch {epoch}")
        if timeout_ms <= 0:
            raise IllegalTransactionStateError(f"Illegal transaction timeout {timeout_ms}")
        if self.txn_start_timestamp_ms > update_ms:
            raise IllegalTransactionStateError(
                f"Illegal update timestamp {update_ms} before the start timestamp {self.txn_start_timestamp_ms}"
            )
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransactionStateError(
                f"Preparing transaction state transition to {state.state_name} failed since the target state"
                f" {state.state_name} is not a valid previous state of the current state {self.state.state_name}"
                f" ({self.transactional_id})"
            )
        transit = self._transit(
            state, producer_id, epoch, last_epoch, timeout_ms, partitions, start_ms, update_ms
        )
        self.pending_state = state
        return transit

    # -- complete --------------------------------------------------------------------------
    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply ``transit`` once it is durable (Kafka's ``completeTransitionTo`` with its checks).

        Raises:
            IllegalTransactionStateError: no matching pending state, or the new value breaks an
                invariant (epoch, partitions, timeout, timestamps).
        """
        to_state = transit.state
        if self.pending_state is not to_state:
            self._transition_failure(transit)
        valid_epoch = (
            transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        )
        if to_state is S.EMPTY:  # from InitProducerId
            bump = transit.producer_epoch == self.producer_epoch + 1 or (
                transit.producer_epoch == 0 and transit.producer_id != self.producer_id
            )
            if (
                (self.producer_epoch != transit.producer_epoch and not bump)
                or transit.topic_partitions
                or transit.txn_start_timestamp_ms != -1
            ):
                self._transition_failure(transit)
        elif to_state is S.ONGOING:  # from AddPartitionsToTxn
            if (
                not valid_epoch
                or not self.topic_partitions <= transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
            ):
                self._transition_failure(transit)
        elif to_state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):  # from EndTxn
            if (
                not valid_epoch
                or self.topic_partitions != transit.topic_partitions
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or self.txn_start_timestamp_ms != transit.txn_start_timestamp_ms
            ):
                self._transition_failure(transit)
        elif to_state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):  # from the markers
            if (
                not valid_epoch
                or self.txn_timeout_ms != transit.txn_timeout_ms
                or transit.txn_start_timestamp_ms == -1
            ):
                self._transition_failure(transit)
        else:  # PrepareEpochFence is replaced by PrepareAbort before any append; Dead is removed
            self._transition_failure(transit)
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp_ms = transit.txn_start_timestamp_ms
        self.txn_last_update_timestamp_ms = transit.txn_last_update_timestamp_ms
        self.pending_state = None
        self.state = to_state

    def _transition_failure(self, transit: TxnTransitMetadata) -> None:
        raise IllegalTransactionStateError(
            f"TransactionalId {self.transactional_id} failed transition to state {transit} due to unexpected "
            f"metadata (current state {self.state.state_name}, pending {self.pending_state}, producer id "
            f"{self.producer_id}, epoch {self.producer_epoch})"
        )
