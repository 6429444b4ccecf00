"""What request handlers need from the broker: config, metadata image, controller, logs.

Plays the part of the dependencies Kafka injects into ``KafkaApis`` (``MetadataCache``,
``ReplicaManager``, controller channel). ``image`` is replaced (never mutated) whenever metadata
records are applied.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.apis.metadata_cache import MetadataResponseCache
from broker.config import KafkaConfig
from broker.controller.controller import Controller
from broker.controller.metadata_image import MetadataImage, PartitionRegistration
from broker.controller.publish_queue import MetadataPublishQueue
from broker.dynamic_broker_config import DynamicBrokerConfig
from broker.replication.delayed_fetch import FetchPurgatory
from spark_kafkalite.protocol.errors import (
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    from broker.coordinator.group.group_coordinator import GroupCoordinator
    from broker.coordinator.group.service import GroupCoordinatorService
    from broker.coordinator.share.service import ShareService
    from broker.coordinator.transaction.service import TransactionCoordinatorService
    from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
    from broker.log.log_manager import LogManager
    from broker.log.unified_log import UnifiedLog
    from broker.replication.fetch_session_cache import FetchSessionCache
    from broker.replication.replica_manager import ReplicaManager
    from broker.security.authorizer import StandardAuthorizer

__all__ = ["BrokerContext"]


@dataclass(eq=False)
class BrokerContext:
    """Shared broker state for request handlers.

    Attributes:
        config: the broker config.
        node_id: this broker's id.
        image: the current metadata image (replaced on every metadata change).
        controller: the :class:`~broker.controller.controller.Controller` (single node or
            Raft quorum).
        log_manager: the partition logs.
        fetch_purgatory: long-polling fetches waiting for data.
        replica_manager: leader/follower state of the local partitions, acks=all waits,
            replica fetchers (Kafka's ``ReplicaManager``; every produce, fetch and leader
            lookup goes through it).
        fetch_session_cache: KIP-227 fetch sessions (created on first use by
            ``broker.replication.fetch_session_cache.fetch_session_cache_for``).
        group_coordinator / group_coordinator_service: the classic group coordinator and the
            service that loads ``__consumer_offsets`` partitions (set when it starts).
        authorizer: the ACL authorizer (``authorizer.class.name``); None = every request is
            allowed.
        transaction_coordinator / transaction_coordinator_service: the transaction coordinator
            and the service that loads ``__transaction_state`` partitions (set when it starts).
        request_workers: the bounded pool (``num.io.threads``) for CPU-heavy request work that
            releases the GIL (decompression, CRC-32C of large batches), off the event loop.
        metadata_cache: encoded Metadata topic entries per image change.
        dynamic_config: the dynamic broker configs over ``config`` (the server passes its
            own; a fresh one, without dynamic configs, when not given).
        share_service: KIP-932 share groups and share partitions (created on first use by
            ``broker.coordinator.share.service.share_service_for``).
        metadata_publish_queue: applies committed metadata deltas to the logs and replication
            in order (large ones in slices); ``applied()`` waits for what was published.
    """

    config: KafkaConfig
    node_id: int
    image: MetadataImage
    controller: Controller
    log_manager: LogManager
    fetch_purgatory: FetchPurgatory
    replica_manager: ReplicaManager
    fetch_session_cache: FetchSessionCache | None = None
    group_coordinator: GroupCoordinator | None = None
    group_coordinator_service: GroupCoordinatorService | None = None
    authorizer: StandardAuthorizer | None = None
    transaction_coordinator: TransactionCoordinator | None = None
    transaction_coordinator_service: TransactionCoordinatorService | None = None
    request_workers: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(8, thread_name_prefix="request-worker")
    )
    metadata_cache: MetadataResponseCache = field(default_factory=MetadataResponseCache)
    metadata_publish_queue: MetadataPublishQueue = field(default_factory=MetadataPublishQueue)
    dynamic_config: DynamicBrokerConfig = field(default=None)  # type: ignore[assignment]
    share_service: ShareService | None = None

    def __post_init__(self) -> None:
        if self.dynamic_config is None:
            self.dynamic_config = DynamicBrokerConfig(self.config, self.node_id)

    def leader_log(
        self, topic: str, partition: int, current_leader_epoch: int = -1
    ) -> tuple[PartitionRegistration, UnifiedLog]:
        """The registration and local log of a partition this broker leads (Kafka's
        ``ReplicaManager.getPartitionOrException`` + ``Partition.localLogWithEpochOrThrow``).

        Raises:
            UnknownTopicOrPartitionError: unknown topic or partition.
            NotLeaderOrFollowerError: this broker does not lead it or has no log for it.
            FencedLeaderEpochError / UnknownLeaderEpochError: ``current_leader_epoch`` (>= 0)
                is older / newer than the partition's leader epoch (KIP-320).
        """
        registration = self.image.partition(topic, partition)
        if registration is None:
            raise UnknownTopicOrPartitionError(
                f"This server does not host this topic-partition {topic}-{partition}"
            )
        # Leadership as applied locally (Partition.make_leader), same as the image's.
        return registration, self.replica_manager.leader_partition(topic, partition, current_leader_epoch).log
