"""``Controller``: what the broker needs from its controller, one protocol for both kinds.

Kafka's brokers talk to the active controller through ``ControllerApis`` / the forwarding
manager; here the server and the request handlers hold a ``Controller``:
:class:`~broker.controller.single_node_controller.SingleNodeController` for a standalone broker,
:class:`~broker.controller.quorum_controller.QuorumController` (Raft quorum, with the broker's
``BrokerLifecycleManager`` inside) for a cluster. The server never asks which one it has.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from broker.controller.acl_control import AclDeleteResult
    from broker.controller.metadata_image import PartitionRegistration
    from broker.controller.scram_control import AlterResult, ScramDeletion, ScramUpsertion
    from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter
    from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = ["Controller", "CreatableTopicSpec", "CreatePartitionsSpec", "CreateTopicOutcome"]


@dataclass(frozen=True, slots=True)
class CreatableTopicSpec:
    """One topic of a CreateTopics request. -1 = broker default for partitions and RF;
    ``assignments`` maps partition -> broker ids (then both counts must be -1)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreateTopicOutcome:
    """Result for one topic: ``error`` is None on success (or when validate_only passed);
    ``configs`` are its validated overrides (canonical strings)."""

    name: str
    error: KafkaError | None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatePartitionsSpec:
    """One topic of a CreatePartitions request: the new total ``count`` and, optionally, the
    replicas of each new partition (``count`` - current entries)."""

    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


class Controller(Protocol):
    """The controller API of one broker (see the module docstring)."""

    @property
    def controller_id(self) -> int:
        """The active controller's node id, -1 while there is none."""
        ...

    @property
    def replays_metadata_log(self) -> bool:
        """True when :meth:`startup` rebuilds the metadata image by replaying a replicated log
        (the broker then publishes the image whole once caught up, as Kafka's broker does after
        its initial catch-up); False when it commits bootstrap records the broker applies at once."""
        ...

    # -- lifecycle (KafkaServer) ------------------------------------------------------------
    async def startup(self, endpoints: Mapping[str, tuple[str, int]], rack: str | None) -> None:
        """Bring this broker into the cluster metadata: register it and wait until it is
        unfenced (quorum), or commit the bootstrap records (single node).

        Raises:
            OSError: the controller could not bind or read its files.
        """
        ...

    def start_background(self) -> None:
        """Start periodic work (heartbeats, active-controller duties) after :meth:`startup`."""
        ...

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Move this broker's leaderships away before it stops (Kafka's controlled shutdown);
        True when done or nothing to do."""
        ...

    async def stop(self) -> None:
        """Stop background work; no metadata is applied after this."""
        ...

    # -- requests (API handlers, replica manager, coordinators) ------------------------------
    async def create_topics(
        self, specs: Sequence[CreatableTopicSpec], validate_only: bool = False
    ) -> list[CreateTopicOutcome]: ...

    async def delete_topics(
        self, names: Sequence[str | None], topic_ids: Sequence[uuid.UUID | None] | None = None
    ) -> list[tuple[str | None, uuid.UUID | None, KafkaError | None]]: ...

    async def create_partitions(
        self, specs: Sequence[CreatePartitionsSpec], validate_only: bool = False
    ) -> list[tuple[str, KafkaError | None]]: ...

    async def incremental_alter_topic_configs(
        self,
        resources: Sequence[tuple[str, Sequence[tuple[str, int, str | None]]]],
        broker_values: Mapping[str, Any],
        validate_only: bool = False,
    ) -> list[KafkaError | None]: ...

    async def alter_topic_configs(
        self, resources: Sequence[tuple[str, Sequence[tuple[str, str | None]]]], validate_only: bool = False
    ) -> list[KafkaError | None]: ...

    async def alter_resource_configs(
        self,
        changes: Sequence[tuple[int, str, Sequence[tuple[Any, ...]]]],
        incremental: bool,
        broker_values: Mapping[str, Any],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        """AlterConfigs / IncrementalAlterConfigs of BROKER and GROUP resources: one error (or
        None) per ``(resource type, name, entries)``
        (:func:`~broker.controller.resource_configs.alter_resource_configs`)."""
        ...

    async def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        new_isr: tuple[int, ...],
        partition_epoch: int,
    ) -> tuple[ErrorCode, PartitionRegistration | None]: ...

    async def elect_preferred_leaders(
        self, partitions: Sequence[tuple[str, int]] | None = None, unclean: bool = False
    ) -> dict[tuple[str, int], ErrorCode]: ...

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]: ...

    async def create_acls(self, acls: Sequence[AclBinding]) -> list[KafkaError | None]:
        """CreateAcls: one error (None = created or already present) per ACL
        (:func:`~broker.controller.acl_control.create_acls`)."""
        ...

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """DeleteAcls: per filter its error and the ACLs it deleted
        (:func:`~broker.controller.acl_control.delete_acls`)."""
        ...

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[AlterResult]:
        """AlterUserScramCredentials: one (user, error, message) per user
        (:func:`~broker.controller.scram_control.alter_user_scram_credentials`)."""
        ...
