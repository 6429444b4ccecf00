"""The cache of transactional ids per ``__transaction_state`` partition and its persistence
(Kafka's ``TransactionStateManager``).

A transactional id lives in partition ``Utils.abs(transactionalId.hashCode) %
transaction.state.log.num.partitions``; this broker coordinates the ids of the partitions it
leads. On becoming leader (coordinator epoch = the partition's leader epoch) it *loads* the
partition (replays its records, latest value per id wins, tombstone = removed) and answers
COORDINATOR_LOAD_IN_PROGRESS meanwhile; transactions found in PrepareCommit / PrepareAbort get
their markers sent again. On losing leadership it *unloads* them (NOT_COORDINATOR afterwards).

Every transition is appended (acks=-1, ``replica_manager.append_records(internal=True)``) before
it is applied; append errors become coordinator errors as in Kafka's ``appendTransactionToLog``:
UNKNOWN_TOPIC_OR_PARTITION / NOT_ENOUGH_REPLICAS* / REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE,
NOT_LEADER_OR_FOLLOWER / KAFKA_STORAGE_ERROR -> NOT_COORDINATOR, too large -> UNKNOWN_SERVER_ERROR,
and a coordinator epoch that changed meanwhile -> NOT_COORDINATOR.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from broker.coordinator.group.group_metadata_manager import partition_for_group
from broker.coordinator.group.offsets_log import (
    OffsetsAppender,
    read_partition,
    storage_error_to_coordinator_error,
)
from broker.coordinator.transaction.transaction_metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from spark_kafkalite.protocol.transaction_records import (
    TransactionRecordFormatError,
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_key,
    encode_transaction_log_value,
)

__all__ = ["TransactionStateManager", "CoordinatorEpochAndTxnMetadata", "TransactionConfig"]

logger = logging.getLogger(__name__)

E = ErrorCode


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    """Broker keys of the transaction coordinator (Kafka's ``TransactionStateManagerConfig`` /
    ``TransactionLogConfig``), all in ms or bytes as named."""

    num_partitions: int = 50
    max_timeout_ms: int = 900000
    transactional_id_expiration_ms: int = 604800000
    abort_timed_out_transaction_cleanup_interval_ms: int = 10000
    remove_expired_transactional_id_cleanup_interval_ms: int = 3600000
    load_buffer_bytes: int = 5 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CoordinatorEpochAndTxnMetadata:
    coordinator_epoch: int
    metadata: TransactionMetadata


def _append_error(code: int) -> int:
    return storage_error_to_coordinator_error(code)


class TransactionStateManager:
    """Cache + persistence of transactional ids (see the module docstring).

    Args:
        config: the coordinator's broker keys.
        appender: how records reach ``__transaction_state`` (acks=-1).
        now_ms: wall clock, ms.
    """

    def __init__(
        self, config: TransactionConfig, appender: OffsetsAppender, now_ms: Callable[[], int]
    ) -> None:
        self.config = config
        self.appender = appender
        self.now_ms = now_ms
        #: partition -> coordinator epoch of the partitions loaded here
        self.owned: dict[int, int] = {}
        #: partition -> coordinator epoch of the partitions being loaded
        self.loading: dict[int, int] = {}
        self._metadata: dict[int, dict[str, TransactionMetadata]] = {}
        self.shutting_down = False

    # -- ownership --------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        """Kafka's ``partitionFor``: ``Utils.abs(transactionalId.hashCode) % num_partitions``."""
        return partition_for_group(transactional_id, self.config.num_partitions)

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        """``0 < timeout_ms <= transaction.max.timeout.ms``."""
        return 0 < timeout_ms <= self.config.max_timeout_ms

    def get_transaction_state(
        self, transactional_id: str
    ) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        """(error, cached state or None) (Kafka's ``getTransactionState``): COORDINATOR_NOT_AVAILABLE
        while shutting down, COORDINATOR_LOAD_IN_PROGRESS while the partition loads,
        NOT_COORDINATOR when it is not led here."""
        if self.shutting_down:
            return int(E.coordinator_not_available), None
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return int(E.coordinator_load_in_progress), None
        epoch = self.owned.get(partition)
        if epoch is None:
            return int(E.not_coordinator), None
        metadata = self._metadata.get(partition, {}).get(transactional_id)
        return 0, None if metadata is None else CoordinatorEpochAndTxnMetadata(epoch, metadata)

    def put_transaction_state_if_not_exists(
        self, metadata: TransactionMetadata
    ) -> tuple[int, CoordinatorEpochAndTxnMetadata | None]:
        """Add ``metadata`` unless its id is cached already; (error, the cached state)."""
        error, existing = self.get_transaction_state(metadata.transactional_id)
        if error or existing is not None:
            return error, existing
        partition = self.partition_for(metadata.transactional_id)
        self._metadata.setdefault(partition, {})[metadata.transactional_id] = metadata
        return 0, CoordinatorEpochAndTxnMetadata(self.owned[partition], metadata)

    def all_transactions(self) -> Iterable[TransactionMetadata]:
        """Every cached transactional id of the loaded partitions."""
        for partition in self.owned:
            yield from self._metadata.get(partition, {}).values()

    def timed_out_transactions(self) -> list[tuple[str, int, int]]:
        """``(transactional id, producer id, epoch)`` of Ongoing transactions without a pending
        transition that started more than their timeout ago (Kafka's ``timedOutTransactions``)."""
        now = self.now_ms()
        return [
            (m.transactional_id, m.producer_id, m.producer_epoch)
            for m in self.all_transactions()
            if m.state is TransactionState.ONGOING
            and m.pending_state is None
            and m.txn_start_timestamp_ms + m.txn_timeout_ms < now
        ]

    # -- persistence ------------------------------------------------------------------------
    async def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        retry_on_error: Callable[[int], bool] = lambda _code: False,
    ) -> int:
        """Append ``transit`` (acks=-1), then apply it to the cached metadata; returns the error
        code (0 = applied). On error the pending state is cleared unless ``retry_on_error(code)``
        (the caller will try again) or the coordinator epoch moved on."""
        error, current = self.get_transaction_state(transactional_id)
        if error:
            return error
        if current is None or current.coordinator_epoch != coordinator_epoch:
            return int(E.not_coordinator)
        value = (
            None
            if transit.state is TransactionState.DEAD
            else encode_transaction_log_value(transit.to_log_value())
        )
        code = await self.appender.append(
            TRANSACTION_STATE_TOPIC_NAME,
            self.partition_for(transactional_id),
            [(encode_transaction_log_key(transactional_id), value)],
            transit.txn_timeout_ms,
        )
        code = _append_error(code)
        error, current = self.get_transaction_state(transactional_id)
        if code == 0:
            if error:
                logger.info(
                    "transactional id %s: cached metadata unavailable (error %d) after the append",
                    transactional_id,
                    error,
                )
                return error
            if current is None or current.coordinator_epoch != coordinator_epoch:
                return int(E.not_coordinator)
            if transit.state is TransactionState.DEAD:
                self._metadata.get(self.partition_for(transactional_id), {}).pop(transactional_id, None)
                current.metadata.pending_state = None
                current.metadata.state = TransactionState.DEAD
            else:
                current.metadata.complete_transition_to(transit)
            return 0
        logger.info(
            "appending transactional id %s's transition to %s to %s failed with error %d",
            transactional_id,
            transit.state.state_name,
            TRANSACTION_STATE_TOPIC_NAME,
            code,
        )
        if (
            current is not None
            and current.coordinator_epoch == coordinator_epoch
            and not retry_on_error(code)
        ):
            current.metadata.pending_state = None
        return code

    # -- load / unload ------------------------------------------------------------------------
    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        self.owned.pop(partition, None)
        self._metadata.pop(partition, None)
        self.loading[partition] = coordinator_epoch

    async def load_partition(
        self,
        partition: int,
        coordinator_epoch: int,
        log: Any,
        send_markers: Callable[[int, TransactionMetadata, TxnTransitMetadata], None],
    ) -> None:
        """Replay ``log`` (``__transaction_state-partition``) into the cache, then resend the
        markers of transactions in PrepareCommit / PrepareAbort through ``send_markers(
        coordinator_epoch, metadata, complete_transit)`` (Kafka's
        ``loadTransactionsForTxnTopicPartition``). Abandoned if the epoch moved on meanwhile."""
        values: dict[str, TransactionMetadata | None] = {}
        records = 0
        try:
            if log is not None:
                async for key, value in read_partition(log, self.config.load_buffer_bytes):
                    records += 1
                    try:
                        transactional_id = decode_transaction_log_key(key)
                        if transactional_id is None:
                            continue
                        values[transactional_id] = (
                            None
                            if value is None
                            else TransactionMetadata.from_log_value(
                                transactional_id, decode_transaction_log_value(value)
                            )
                        )
                    except (TransactionRecordFormatError, ValueError) as exc:
                        logger.warning(
                            "skipping an unreadable record in %s-%d: %s",
                            TRANSACTION_STATE_TOPIC_NAME,
                            partition,
                            exc,
                        )
        except Exception:
            logger.exception("failed loading %s-%d", TRANSACTION_STATE_TOPIC_NAME, partition)
            if self.loading.get(partition) == coordinator_epoch:
                del self.loading[partition]
            raise
        if self.loading.get(partition) != coordinator_epoch:
            logger.info(
                "abandoned loading %s-%d (coordinator epoch %d)",
                TRANSACTION_STATE_TOPIC_NAME,
                partition,
                coordinator_epoch,
            )
            return
        cache = {
            tid: m
            for tid, m in values.items()
            if m is not None and m.state is not TransactionState.DEAD and self.partition_for(tid) == partition
        }
        self._metadata[partition] = cache
        del self.loading[partition]
        self.owned[partition] = coordinator_epoch
        logger.info(
            "loaded %d transactional id(s) from %d record(s) of %s-%d (coordinator epoch %d)",
            len(cache),
            records,
            TRANSACTION_STATE_TOPIC_NAME,
            partition,
            coordinator_epoch,
        )
        now = self.now_ms()
        for metadata in cache.values():
            if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                send_markers(coordinator_epoch, metadata, metadata.prepare_complete(now))

    def unload_partition(self, partition: int) -> int:
        """Forget the transactional ids of ``partition``; returns how many."""
        self.loading.pop(partition, None)
        self.owned.pop(partition, None)
        return len(self._metadata.pop(partition, {}))
