"""The transaction coordinator's request logic (Kafka's ``TransactionCoordinator.scala``):
InitProducerId with a transactional id, AddPartitionsToTxn / AddOffsetsToTxn, EndTxn, the abort
of timed-out transactions, DescribeTransactions and ListTransactions.

Runs on the broker's event loop: the checks and the ``prepare_*`` of a transition run without
awaiting (Kafka's ``txnMetadata.inLock``); the only awaits are the log append and producer id
allocation, after which the state is looked up again. Errors are ``ErrorCode`` ints; the API
handlers map PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for the request versions that predate it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from broker.coordinator.task_tracker import TaskTracker
from broker.coordinator.transaction.transaction_marker_channel_manager import TransactionMarkerChannelManager
from broker.coordinator.transaction.transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransactionStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from broker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from spark_kafkalite.protocol.errors import ErrorCode, InvalidRegularExpressionError
from spark_kafkalite.protocol.regex import compile_re2

__all__ = ["TransactionCoordinator", "InitProducerIdResult", "TransactionDescription"]

logger = logging.getLogger(__name__)

E = ErrorCode
S = TransactionState
TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """One DescribeTransactions entry (times in ms; start -1 when no transaction is open)."""

    error: int
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_timestamp_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


class TransactionCoordinator:
    """Args:
    state_manager: the transactional-id cache and its log.
    markers: sends WriteTxnMarkers and writes Complete* (Kafka's ``TransactionMarkerChannelManager``).
    generate_producer_id: ``async () -> int`` (the broker's ProducerIdManager).
    """

    def __init__(
        self,
        state_manager: TransactionStateManager,
        markers: TransactionMarkerChannelManager,
        generate_producer_id: Callable[[], Awaitable[int]],
    ) -> None:
        self.state_manager = state_manager
        self.markers = markers
        self.generate_producer_id = generate_producer_id
        self.active = False
        self._tasks = TaskTracker("transaction coordinator")

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background until it ends or the coordinator shuts down."""
        return self._tasks.spawn(coro)

    def startup(self) -> None:
        self.active = True
        self.state_manager.shutting_down = False

    def shutdown(self) -> None:
        self.active = False
        self.state_manager.shutting_down = True
        self.markers.shutdown()
        self._tasks.cancel_all()

    # -- InitProducerId ------------------------------------------------------------------------
    async def handle_init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitProducerIdResult:
        """Kafka's ``handleInitProducerId`` for a non-empty transactional id; ``expected`` is the
        (producer id, epoch) a KIP-360 client sends (v3+), None when both are -1."""
        if not transactional_id:
            return InitProducerIdResult(int(E.invalid_request))
        if not self.state_manager.validate_transaction_timeout_ms(timeout_ms):
            return InitProducerIdResult(int(E.invalid_transaction_timeout))
        error, current = self.state_manager.get_transaction_state(transactional_id)
        if error:
            return InitProducerIdResult(error)
        if current is None:
            try:
                producer_id = await self.generate_producer_id()
            except Exception:  # noqa: BLE001 - retriable: the producer id block is not there yet
                return InitProducerIdResult(int(E.coordinator_load_in_progress))
            created = TransactionMetadata(
                transactional_id,
                producer_id,
                NO_PRODUCER_ID,
                NO_PRODUCER_ID,
                NO_PRODUCER_EPOCH,
                NO_PRODUCER_EPOCH,
                timeout_ms,
                S.EMPTY,
                txn_last_update_timestamp_ms=self.state_manager.now_ms(),
            )
            error, current = self.state_manager.put_transaction_state_if_not_exists(created)
            if error:
                return InitProducerIdResult(error)
        if current is None:  # put_transaction_state_if_not_exists answers the stored state
            raise RuntimeError(f"transactional id {transactional_id} has no state after it was created")
        rotation_id: int | None = None
        metadata = current.metadata
        if metadata.is_producer_epoch_exhausted and metadata.pending_state is None:
            try:  # allocated before the checks (no await between them and the prepare)
                rotation_id = await self.generate_producer_id()
            except Exception:  # noqa: BLE001 - retriable, as above
                return InitProducerIdResult(int(E.coordinator_load_in_progress))
            error, current = self.state_manager.get_transaction_state(transactional_id)
            if error or current is None:
                return InitProducerIdResult(error or int(E.not_coordinator))
            metadata = current.metadata
        coordinator_epoch = current.coordinator_epoch
        result = self._prepare_init_producer_id_transit(timeout_ms, metadata, expected, rotation_id)
        if isinstance(result, int):
            return InitProducerIdResult(result)
        if result.state is S.PREPARE_EPOCH_FENCE:
            # abort the open transaction, then let the client retry (it bumps the epoch again)
            error = await self._end_transaction(
                transactional_id, result.producer_id, result.producer_epoch, False, from_client=False
            )
            return InitProducerIdResult(error or int(E.concurrent_transactions))
        error = await self.state_manager.append_transaction_to_log(
            transactional_id, coordinator_epoch, result
        )
        if error:
            return InitProducerIdResult(error)
        logger.info(
            "initialized transactional id %s with producer id %d and epoch %d",
            transactional_id,
            result.producer_id,
            result.producer_epoch,
        )
        return InitProducerIdResult(0, result.producer_id, result.producer_epoch)

    def _prepare_init_producer_id_transit(
        self,
        timeout_ms: int,
        metadata: TransactionMetadata,
        expected: tuple[int, int] | None,
        rotation_id: int | None,
    ) -> TxnTransitMetadata | int:
        """Kafka's ``prepareInitProducerIdTransit``: the transit, or an error code."""
        if metadata.pending_transition_in_progress:
            return int(E.concurrent_transactions)
        if expected is not None:
            pid, epoch = expected
            valid = (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or pid == metadata.producer_id
                or (pid == metadata.previous_producer_id and is_epoch_exhausted(epoch))
            )
            if not valid:
                return int(E.producer_fenced)
        state = metadata.state
        now = self.state_manager.now_ms()
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            return int(E.concurrent_transactions)
        if state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            if metadata.is_producer_epoch_exhausted and (
                expected is None or expected[1] == metadata.producer_epoch
            ):
                if rotation_id is None:  # exhausted while we awaited: the client retries
                    return int(E.concurrent_transactions)
                return metadata.prepare_producer_id_rotation(
                    rotation_id, timeout_ms, now, expected is not None
                )
            transit = metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now
            )
            return int(E.producer_fenced) if transit is None else transit
        if state is S.ONGOING:
            return metadata.prepare_fence_producer_epoch()
        raise IllegalTransactionStateError(
            f"Found transactionalId {metadata.transactional_id} with state {state.state_name}. "
            "This is illegal as we should never have transitioned to this state."
        )

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------
    async def handle_add_partitions_to_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, partitions: set[TopicPartition]
    ) -> int:
        """Kafka's ``handleAddPartitionsToTransaction``: the error code for every partition."""
        if not transactional_id:
            return int(E.invalid_request)
        error, current = self.state_manager.get_transaction_state(transactional_id)
        if error:
            return error
        if current is None:
            return int(E.invalid_producer_id_mapping)
        metadata = current.metadata
        if metadata.producer_id != producer_id:
            return int(E.invalid_producer_id_mapping)
        if metadata.producer_epoch != producer_epoch:
            return int(E.producer_fenced)
        if metadata.pending_transition_in_progress or metadata.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return int(E.concurrent_transactions)
        if metadata.state is S.ONGOING and partitions <= metadata.topic_partitions:
            return 0
        transit = metadata.prepare_add_partitions(partitions, self.state_manager.now_ms())
        return await self.state_manager.append_transaction_to_log(
            transactional_id, current.coordinator_epoch, transit
        )

    # -- EndTxn --------------------------------------------------------------------------------
    async def handle_end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool
    ) -> int:
        """Kafka's ``handleEndTransaction`` (transaction version 0/1): answered once the
        Prepare* record is durable; markers are then sent in the background."""
        return await self._end_transaction(
            transactional_id, producer_id, producer_epoch, committed, from_client=True
        )

    async def _end_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool, from_client: bool
    ) -> int:
        if not transactional_id:
            return int(E.invalid_request)
        error, current = self.state_manager.get_transaction_state(transactional_id)
        if error:
            return error
        if current is None:
            return int(E.invalid_producer_id_mapping)
        metadata = current.metadata
        coordinator_epoch = current.coordinator_epoch
        if metadata.producer_id != producer_id:
            return int(E.invalid_producer_id_mapping)
        # clients must match the epoch exactly; the coordinator's own aborts carry the bumped one
        if (
            from_client and producer_epoch != metadata.producer_epoch
        ) or producer_epoch < metadata.producer_epoch:
            return int(E.producer_fenced)
        if metadata.pending_transition_in_progress and metadata.pending_state is not S.PREPARE_EPOCH_FENCE:
            return int(E.concurrent_transactions)
        state = metadata.state
        is_epoch_fence = False
        if state is S.ONGOING:
            next_state = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
            if next_state is S.PREPARE_ABORT and metadata.pending_state is S.PREPARE_EPOCH_FENCE:
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = metadata.prepare_abort_or_commit(next_state, self.state_manager.now_ms())
        elif state is S.COMPLETE_COMMIT:
            return 0 if committed else self._invalid_state(metadata, committed)
        elif state is S.COMPLETE_ABORT:
            return self._invalid_state(metadata, committed) if committed else 0
        elif state is S.PREPARE_COMMIT:
            return int(E.concurrent_transactions) if committed else self._invalid_state(metadata, committed)
        elif state is S.PREPARE_ABORT:
            return self._invalid_state(metadata, committed) if committed else int(E.concurrent_transactions)
        elif state is S.EMPTY:
            return self._invalid_state(metadata, committed)
        else:
            raise IllegalTransactionStateError(
                f"Found transactionalId {transactional_id} with state {state.state_name}. "
                "This is illegal as we should never have transitioned to this state."
            )
        error = await self.state_manager.append_transaction_to_log(
            transactional_id, coordinator_epoch, transit
        )
        if error:
            if is_epoch_fence:
                error_now, again = self.state_manager.get_transaction_state(transactional_id)
                if not error_now and again is not None and again.coordinator_epoch == coordinator_epoch:
                    again.metadata.has_failed_epoch_fence = True
            return error
        # the Prepare* record is durable: answer now, send the markers in the background
        error, again = self.state_manager.get_transaction_state(transactional_id)
        if error:
            return error
        if again is None:
            raise IllegalTransactionStateError(f"transactional id {transactional_id} vanished from the cache")
        if again.coordinator_epoch != coordinator_epoch:
            return int(E.not_coordinator)
        metadata = again.metadata
        if metadata.producer_id != producer_id:
            return int(E.invalid_producer_id_mapping)
        if metadata.producer_epoch != producer_epoch:
            return int(E.producer_fenced)
        if metadata.pending_transition_in_progress:
            return int(E.concurrent_transactions)
        expected = S.PREPARE_COMMIT if committed else S.PREPARE_ABORT
        if metadata.state is not expected:
            return self._invalid_state(metadata, committed)
        complete = metadata.prepare_complete(self.state_manager.now_ms())
        self.markers.add_txn_markers_to_send(coordinator_epoch, committed, metadata, complete)
        logger.info(
            "transactional id %s (producer id %d, epoch %d): %s prepared, writing markers to %d partition(s)",
            transactional_id,
            producer_id,
            producer_epoch,
            "commit" if committed else "abort",
            len(metadata.topic_partitions),
        )
        return 0

    @staticmethod
    def _invalid_state(metadata: TransactionMetadata, committed: bool) -> int:
        logger.debug(
            "TransactionalId %s's state is %s, but received transaction marker result to send: %s",
            metadata.transactional_id,
            metadata.state.state_name,
            "COMMIT" if committed else "ABORT",
        )
        return int(E.invalid_txn_state)

    # -- timeouts ------------------------------------------------------------------------------
    async def abort_timed_out_transactions(self) -> int:
        """Fence and abort every transaction open longer than its timeout (Kafka's
        ``abortTimedOutTransactions``); returns how many aborts were started."""
        started = 0
        for transactional_id, producer_id, _epoch in self.state_manager.timed_out_transactions():
            error, current = self.state_manager.get_transaction_state(transactional_id)
            if error or current is None:
                continue
            metadata = current.metadata
            if metadata.producer_id != producer_id or metadata.pending_transition_in_progress:
                continue
            transit = metadata.prepare_fence_producer_epoch()
            logger.info(
                "aborting transactional id %s (producer id %d): open longer than its timeout of %d ms",
                transactional_id,
                producer_id,
                metadata.txn_timeout_ms,
            )
            started += 1
            error = await self._end_transaction(
                transactional_id, transit.producer_id, transit.producer_epoch, False, from_client=False
            )
            if error:
                logger.info(
                    "abort of timed-out transactional id %s failed with error %d", transactional_id, error
                )
        return started

    async def remove_expired_transactional_ids(self) -> int:
        """Write a tombstone for, and forget, every id in Empty / CompleteCommit / CompleteAbort
        whose last update is older than ``transactional.id.expiration.ms`` (Kafka's
        ``TransactionStateManager.removeExpiredTransactionalIds``); returns how many."""
        manager = self.state_manager
        deadline = manager.now_ms() - manager.config.transactional_id_expiration_ms
        expired = [
            m
            for m in manager.all_transactions()
            if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
            and m.pending_state is None
            and m.txn_last_update_timestamp_ms <= deadline
        ]
        removed = 0
        for m in expired:
            error, current = manager.get_transaction_state(m.transactional_id)
            if error or current is None or current.metadata is not m or m.pending_state is not None:
                continue
            error = await manager.append_transaction_to_log(
                m.transactional_id, current.coordinator_epoch, m.prepare_dead()
            )
            if error:
                logger.info("expiring transactional id %s failed with error %d", m.transactional_id, error)
            else:
                removed += 1
                logger.info(
                    "transactional id %s expired (idle since %d)",
                    m.transactional_id,
                    m.txn_last_update_timestamp_ms,
                )
        return removed

    # -- DescribeTransactions / ListTransactions ------------------------------------------------
    def handle_describe_transactions(self, transactional_id: str) -> TransactionDescription:
        """Kafka's ``handleDescribeTransactions``: TRANSACTIONAL_ID_NOT_FOUND for unknown or Dead ids."""
        if not self.active:
            return TransactionDescription(int(E.coordinator_not_available), transactional_id)
        error, current = self.state_manager.get_transaction_state(transactional_id)
        if error:
            return TransactionDescription(error, transactional_id)
        if current is None or current.metadata.state is S.DEAD:
            return TransactionDescription(int(E.transactional_id_not_found), transactional_id)
        m = current.metadata
        return TransactionDescription(
            0,
            transactional_id,
            m.state.state_name,
            m.txn_timeout_ms,
            m.txn_start_timestamp_ms,
            m.producer_id,
            m.producer_epoch,
            tuple(sorted(m.topic_partitions)),
        )

    def handle_list_transactions(
        self,
        state_filters: list[str],
        producer_id_filters: set[int],
        duration_filter_ms: int,
        transactional_id_pattern: str | None = None,
    ) -> tuple[int, list[str], list[tuple[str, int, str]]]:
        """(error, unknown state filters, [(transactional id, producer id, state name)]) of the
        loaded partitions (Kafka's ``TransactionStateManager.listTransactionStates``): filters by
        state names (unknown names are reported and ignored), producer ids, (v1, KIP-994) a start
        more than ``duration_filter_ms`` ago (-1 = no filter) and (v2, KIP-1152) ids the RE2
        regular expression ``transactional_id_pattern`` matches whole (None or "" = no filter);
        the filters combine with AND. INVALID_REGULAR_EXPRESSION for a pattern RE2 refuses,
        COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if not self.active:
            return int(E.coordinator_not_available), [], []
        if self.state_manager.loading:
            return int(E.coordinator_load_in_progress), [], []
        id_pattern = None
        if transactional_id_pattern:
            try:
                id_pattern = compile_re2(transactional_id_pattern)
            except InvalidRegularExpressionError as exc:
                logger.info("ListTransactions: %s", exc)
                return int(E.invalid_regular_expression), [], []
        states: set[TransactionState] = set()
        unknown: list[str] = []
        for name in state_filters:
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                states.add(state)
        now = self.state_manager.now_ms()
        out = []
        for m in self.state_manager.all_transactions():
            if m.state is S.DEAD:  # being expired
                continue
            if states and m.state not in states:
                continue
            if producer_id_filters and m.producer_id not in producer_id_filters:
                continue
            if duration_filter_ms >= 0 and now - m.txn_start_timestamp_ms <= duration_filter_ms:
                continue
            if id_pattern is not None and id_pattern.fullmatch(m.transactional_id) is None:
                continue
            out.append((m.transactional_id, m.producer_id, m.state.state_name))
        return 0, unknown, out
