"""Wires the transaction coordinator into a broker (what ``KafkaServer`` calls).

``TransactionCoordinatorService(ctx)`` builds the :class:`TransactionCoordinator` from the broker
config (``transaction.*`` keys), sets ``ctx.transaction_coordinator`` for the API handlers,
follows leadership of ``__transaction_state`` partitions through
``ctx.replica_manager.add_leadership_listener`` (Kafka's ``onElection`` / ``onResignation``:
load and resend pending markers on election, unload on resignation), aborts transactions open
longer than their timeout every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``,
removes ids idle longer than ``transactional.id.expiration.ms`` every
``transaction.remove.expired.transaction.cleanup.interval.ms``, and creates
``__transaction_state`` on first use (``transaction.state.log.num.partitions`` /
``.replication.factor`` / ``.min.isr`` / ``.segment.bytes``, cleanup.policy=compact,
compression none, unclean election off: Kafka's ``transactionTopicConfigs``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from broker.controller.controller import CreatableTopicSpec
from broker.coordinator.group.offsets_log import ReplicaManagerAppender
from broker.coordinator.internal_topic import InternalTopicCreator
from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from broker.coordinator.transaction.transaction_marker_channel_manager import (
    BrokerMarkerSender,
    TransactionMarkerChannelManager,
)
from broker.coordinator.transaction.transaction_state_manager import (
    TransactionConfig,
    TransactionStateManager,
)
from broker.tasks import await_cancelled
from spark_kafkalite.protocol.internal_topics import TRANSACTION_STATE_TOPIC_NAME

__all__ = ["TransactionCoordinatorService", "transaction_config_from"]

logger = logging.getLogger(__name__)


def transaction_config_from(config: Any) -> TransactionConfig:
    """TransactionConfig from broker keys."""
    return TransactionConfig(
        num_partitions=config["transaction.state.log.num.partitions"],
        max_timeout_ms=config["transaction.max.timeout.ms"],
        transactional_id_expiration_ms=config["transactional.id.expiration.ms"],
        abort_timed_out_transaction_cleanup_interval_ms=config[
            "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        ],
        remove_expired_transactional_id_cleanup_interval_ms=config[
            "transaction.remove.expired.transaction.cleanup.interval.ms"
        ],
        load_buffer_bytes=config["transaction.state.log.load.buffer.size"],
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinatorService:
    """The transaction coordinator of one broker. Build it once ``ctx.replica_manager`` exists;
    :meth:`startup` inside the event loop once metadata is ready, :meth:`shutdown` on stop."""

    def __init__(self, ctx: Any, generate_producer_id: Any) -> None:
        self.ctx = ctx
        config = ctx.config
        self.config = transaction_config_from(config)
        self.replication_factor: int = config["transaction.state.log.replication.factor"]
        self.min_isr: int = config["transaction.state.log.min.isr"]
        self.segment_bytes: int = config["transaction.state.log.segment.bytes"]
        self.state_manager = TransactionStateManager(
            self.config, ReplicaManagerAppender(ctx.replica_manager), _now_ms
        )
        self.markers = TransactionMarkerChannelManager(
            self.state_manager,
            self._leader_of,
            BrokerMarkerSender(
                ctx.replica_manager.broker_endpoint,
                f"broker-{ctx.node_id}-txn-marker-sender",
                config["request.timeout.ms"],
                config.inter_broker_security,
            ),
        )
        self.coordinator = TransactionCoordinator(self.state_manager, self.markers, generate_producer_id)
        self._internal_topic = InternalTopicCreator(
            ctx, TRANSACTION_STATE_TOPIC_NAME, self._transaction_state_topic_spec, logger
        )
        self._tasks: list[asyncio.Task[None]] = []
        ctx.transaction_coordinator = self.coordinator
        ctx.transaction_coordinator_service = self

    def _leader_of(self, topic: str, partition: int) -> int | None:
        registration = self.ctx.image.partition(topic, partition)
        if registration is None:
            return None
        leader = int(registration.leader)
        if leader >= 0 and not self.ctx.image.is_alive(leader):
            return -1
        return leader

    # -- lifecycle ------------------------------------------------------------------------------
    def startup(self) -> None:
        self.coordinator.startup()
        self.ctx.replica_manager.add_leadership_listener(self.on_leadership_change)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(
                self._periodic(
                    self.config.abort_timed_out_transaction_cleanup_interval_ms,
                    self.coordinator.abort_timed_out_transactions,
                ),
                name="txn-abort-timed-out",
            ),
            loop.create_task(
                self._periodic(
                    self.config.remove_expired_transactional_id_cleanup_interval_ms,
                    self.coordinator.remove_expired_transactional_ids,
                ),
                name="txn-remove-expired",
            ),
        ]

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
            await await_cancelled(task, f"transaction coordinator task {task.get_name()}")
        self._tasks = []
        self.coordinator.shutdown()
        await self.markers.close()

    # -- leadership -----------------------------------------------------------------------------
    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """ReplicaManager leadership listener (Kafka's ``onElection`` / ``onResignation``)."""
        if topic != TRANSACTION_STATE_TOPIC_NAME or not self.coordinator.active:
            return
        if partition >= self.config.num_partitions:
            logger.warning(
                "%s has partition %d but transaction.state.log.num.partitions=%d: ignored",
                topic,
                partition,
                self.config.num_partitions,
            )
            return
        manager = self.state_manager
        if not is_leader:
            count = manager.unload_partition(partition)
            logger.info("resigned as transaction coordinator of %s-%d (%d id(s))", topic, partition, count)
            return
        if manager.owned.get(partition) == leader_epoch or manager.loading.get(partition) == leader_epoch:
            return
        replica = self.ctx.replica_manager.partition(TRANSACTION_STATE_TOPIC_NAME, partition)
        if replica is None:
            logger.warning("%s-%d is not hosted here: not loaded", topic, partition)
            return
        logger.info("elected transaction coordinator of %s-%d (epoch %d)", topic, partition, leader_epoch)
        manager.begin_loading(partition, leader_epoch)
        self.coordinator.spawn(
            manager.load_partition(partition, leader_epoch, replica.log, self._resend_markers)
        )

    def _resend_markers(self, coordinator_epoch: int, metadata: Any, complete: Any) -> None:
        committed = complete.state.state_name == "CompleteCommit"
        logger.info(
            "resending %s markers of transactional id %s after loading",
            "COMMIT" if committed else "ABORT",
            metadata.transactional_id,
        )
        self.markers.add_txn_markers_to_send(coordinator_epoch, committed, metadata, complete)

    # -- the internal topic ----------------------------------------------------------------------
    async def ensure_transaction_state_topic(self) -> tuple[int, str | None]:
        """Create ``__transaction_state`` if missing; (error code, message). FindCoordinator
        answers COORDINATOR_NOT_AVAILABLE while it cannot be created (Kafka's ``getCoordinator``)."""
        return await self._internal_topic.ensure()

    def _transaction_state_topic_spec(self) -> CreatableTopicSpec:
        return CreatableTopicSpec(
            TRANSACTION_STATE_TOPIC_NAME,
            self.config.num_partitions,
            self.replication_factor,
            configs={
                "cleanup.policy": "compact",
                "compression.type": "producer",  # our appends are uncompressed (Kafka: none)
                "unclean.leader.election.enable": "false",
                "min.insync.replicas": str(self.min_isr),
                "segment.bytes": str(self.segment_bytes),
            },
        )

    # -- timeouts -------------------------------------------------------------------------------
    @staticmethod
    async def _periodic(interval_ms: int, job: Any) -> None:
        interval_s = max(interval_ms, 10) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except Exception:
                logger.exception(
                    "transaction coordinator job %s failed", getattr(job, "__name__", job)
                )  # a partial has no __name__
