"""The share-group side of one broker (KIP-932): the share group coordinator (membership and
assignment, on the group's coordinator) and the share partition manager (share sessions and
per-partition delivery state, on the partition leaders), created on first use."""

from __future__ import annotations

import time
from typing import Any

from broker.coordinator.share.share_group_coordinator import ShareGroupCoordinator
from broker.coordinator.share.share_partition_manager import SharePartitionManager

__all__ = ["ShareService", "share_service_for"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class ShareService:
    """Holds :class:`ShareGroupCoordinator` and :class:`SharePartitionManager` and the broker
    configs they use (``group.share.delivery.count.limit``,
    ``group.share.partition.max.record.locks``, ``group.share.max.size``)."""

    def __init__(self, config: Any) -> None:
        self.delivery_count_limit: int = int(config["group.share.delivery.count.limit"])
        self.max_in_flight: int = int(config["group.share.partition.max.record.locks"])
        self.groups = ShareGroupCoordinator(_now_ms, max_size=int(config["group.share.max.size"]))
        self.partitions = SharePartitionManager(_now_ms)

    @staticmethod
    def now_ms() -> int:
        return _now_ms()


def share_service_for(ctx: Any) -> ShareService:
    """``ctx.share_service``, created from ``ctx.config`` on first use."""
    service: ShareService | None = ctx.share_service
    if service is None:
        service = ctx.share_service = ShareService(ctx.config)

        def on_leadership_change(topic: str, partition: int, is_leader: bool, leader_epoch: int) -> None:
            # another leader serves the partition now (or this one again, after a gap): the
            # share state kept here is stale either way (SharePartitionManager drops it)
            image_topic = ctx.image.topics.get(topic)
            if image_topic is not None:
                service.partitions.forget_partitions([(image_topic.topic_id, partition)])

        ctx.replica_manager.add_leadership_listener(on_leadership_change)
    return service
