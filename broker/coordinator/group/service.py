"""Wires the group coordinator into a broker (what ``KafkaServer`` calls).

``GroupCoordinatorService(ctx)`` builds the :class:`GroupCoordinator` from the broker config
(group.* / offsets.* keys), sets ``ctx.group_coordinator`` for the API handlers, follows
leadership of ``__consumer_offsets`` partitions through
``ctx.replica_manager.add_leadership_listener`` (Kafka's ``onLeadershipChange``: load on
election, unload on resignation), runs offset expiration every
``offsets.retention.check.interval.ms``, and creates ``__consumer_offsets`` on first use
(``offsets.topic.num.partitions`` / ``offsets.topic.replication.factor``, cleanup.policy=compact,
``offsets.topic.segment.bytes``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from broker.controller.controller import CreatableTopicSpec
from broker.coordinator.group.consumer_group_coordinator import ConsumerGroupConfig
from broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator
from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker.coordinator.group.offsets_log import ReplicaManagerAppender
from broker.coordinator.group.scheduler import AsyncioScheduler
from broker.coordinator.internal_topic import InternalTopicCreator
from broker.tasks import await_cancelled
from spark_kafkalite.protocol.internal_topics import GROUP_METADATA_TOPIC_NAME

__all__ = ["GroupCoordinatorService", "group_config_from"]

logger = logging.getLogger(__name__)


def group_config_from(config: Any) -> GroupConfig:
    """GroupConfig from broker keys."""
    return GroupConfig(
        min_session_timeout_ms=config["group.min.session.timeout.ms"],
        max_session_timeout_ms=config["group.max.session.timeout.ms"],
        initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
        max_size=config["group.max.size"],
        offsets_retention_ms=config["offsets.retention.minutes"] * 60_000,
        offsets_retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
        consumer=ConsumerGroupConfig(
            assignors=tuple(config["group.consumer.assignors"]),
            max_size=config["group.consumer.max.size"],
        ),
        consumer_session_timeout_ms=config["group.consumer.session.timeout.ms"],
    )


class GroupCoordinatorService:
    """The group coordinator of one broker. Build it once ``ctx.replica_manager`` exists (its
    appends and leadership changes are the only path, replicated or ISR of one); call
    :meth:`startup` once the metadata image and the ReplicaManager are ready (inside the event
    loop), :meth:`shutdown` on stop."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        config = ctx.config
        self.num_partitions: int = config["offsets.topic.num.partitions"]
        self.replication_factor: int = config["offsets.topic.replication.factor"]
        self.segment_bytes: int = config["offsets.topic.segment.bytes"]
        scheduler = AsyncioScheduler()
        manager = GroupMetadataManager(
            self.num_partitions,
            ReplicaManagerAppender(ctx.replica_manager),
            scheduler.now_ms,
            commit_timeout_ms=config["offsets.commit.timeout.ms"],
            max_metadata_bytes=config["offset.metadata.max.bytes"],
            load_buffer_bytes=config["offsets.load.buffer.size"],
        )
        self.coordinator = GroupCoordinator(manager, scheduler, group_config_from(config))
        self.coordinator.consumer.image_provider = lambda: ctx.image
        self._internal_topic = InternalTopicCreator(
            ctx, GROUP_METADATA_TOPIC_NAME, self._offsets_topic_spec, logger
        )
        self._expiration_task: asyncio.Task[None] | None = None
        ctx.group_coordinator = self.coordinator
        ctx.group_coordinator_service = self

    # -- lifecycle ------------------------------------------------------------------------------
    def startup(self) -> None:
        self.coordinator.startup()
        self.ctx.replica_manager.add_leadership_listener(self.on_leadership_change)
        self._expiration_task = asyncio.get_running_loop().create_task(
            self._expiration_loop(), name="group-offsets-expiration"
        )

    async def shutdown(self) -> None:
        if self._expiration_task is not None:
            self._expiration_task.cancel()
            await await_cancelled(self._expiration_task, "group offsets expiration task")
            self._expiration_task = None
        self.coordinator.shutdown()

    # -- leadership -----------------------------------------------------------------------------
    def on_leadership_change(self, topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
        """ReplicaManager leadership listener (Kafka's ``onElection`` / ``onResignation``)."""
        if topic != GROUP_METADATA_TOPIC_NAME or not self.coordinator.active:
            return
        if partition >= self.num_partitions:
            logger.warning(
                "%s has partition %d but offsets.topic.num.partitions=%d: ignored",
                topic,
                partition,
                self.num_partitions,
            )
            return
        if is_leader:
            logger.info("elected coordinator of %s-%d (leader epoch %d)", topic, partition, leader_epoch)
            replica = self.ctx.replica_manager.partition(GROUP_METADATA_TOPIC_NAME, partition)
            if replica is None:  # the ReplicaManager notifies only for partitions it hosts
                logger.warning("%s-%d is not hosted here: not loaded", topic, partition)
                return
            self.coordinator.on_elected(partition, leader_epoch, replica.log)
        else:
            logger.info("resigned as coordinator of %s-%d", topic, partition)
            self.coordinator.on_resigned(partition)

    def on_topics_deleted(self, topics: set[str]) -> None:
        """Deleted topics lose their committed offsets (tombstones written in the background)."""
        topics = {t for t in topics if t != GROUP_METADATA_TOPIC_NAME}
        if topics and self.coordinator.active:
            self.coordinator.spawn(self.coordinator.offsets.delete_offsets_of_topics(topics))

    # -- the internal topic ----------------------------------------------------------------------
    async def ensure_offsets_topic(self) -> tuple[int, str | None]:
        """Create ``__consumer_offsets`` if missing; (error code, message). Kafka answers
        FindCoordinator with COORDINATOR_NOT_AVAILABLE while it cannot be created (e.g. fewer
        live brokers than offsets.topic.replication.factor)."""
        return await self._internal_topic.ensure()

    def _offsets_topic_spec(self) -> CreatableTopicSpec:
        return CreatableTopicSpec(
            GROUP_METADATA_TOPIC_NAME,
            self.num_partitions,
            self.replication_factor,
            configs={
                "cleanup.policy": "compact",
                "segment.bytes": str(self.segment_bytes),
                "compression.type": "producer",
            },
        )

    # -- expiration -----------------------------------------------------------------------------
    async def _expiration_loop(self) -> None:
        interval_s = max(self.coordinator.config.offsets_retention_check_interval_ms, 100) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.coordinator.offsets.expire_offsets()
            except Exception:
                logger.exception("offset expiration failed")
