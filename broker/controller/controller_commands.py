"""Controller commands and the deterministic metadata state machine they drive.

Every change to cluster metadata is a *command* proposed to the Raft quorum
(:mod:`broker.controller.quorum`). When the command is committed, every node runs
:meth:`MetadataStateMachine.execute` on it, in log order, against the same image: it validates
the command, computes metadata records (Kafka's ``ControllerResult``), applies them, and returns
a result for the proposer. Nothing in ``execute`` reads a clock, draws random numbers or looks
at local configuration: topic ids, placement seeds and controller settings travel inside the
command, so all nodes compute identical records and images.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from broker.controller import acl_control, scram_control
from broker.controller.broker_lifecycle import (
    alive_after,
    fence_broker_records,
    partition_record,
    register_broker_records,
    unfence_broker_records,
)
from broker.controller.controller import CreatableTopicSpec, CreatePartitionsSpec
from broker.controller.election import Election, change_partition
from broker.controller.metadata_image import (
    MetadataImage,
    MetadataRecord,
    PartitionRegistration,
    ProducerIdsRecord,
)
from broker.controller.producer_id_block import PRODUCER_ID_BLOCK_SIZE
from broker.controller.replication_control import (
    ControllerSettings,
    ReplicationControl,
)
from broker.controller.resource_configs import alter_resource_configs
from broker.controller.scram_control import ScramDeletion, ScramUpsertion
from spark_kafkalite.protocol.acl import AclBinding, AclBindingFilter
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = [
    "CreateTopicsCmd",
    "DeleteTopicsCmd",
    "CreatePartitionsCmd",
    "AlterConfigsCmd",
    "AlterResourceConfigsCmd",
    "AlterPartitionCmd",
    "AlterPartitionsCmd",
    "AllocateProducerIdsCmd",
    "RegisterBrokerCmd",
    "HeartbeatCmd",
    "HeartbeatResult",
    "FenceBrokerCmd",
    "ElectLeadersCmd",
    "CreateAclsCmd",
    "DeleteAclsCmd",
    "AlterUserScramCredentialsCmd",
    "Command",
    "MetadataStateMachine",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CreateTopicsCmd:
    specs: tuple[CreatableTopicSpec, ...]
    topic_ids: tuple[uuid.UUID, ...]
    seed: int


@dataclass(frozen=True, slots=True)
class DeleteTopicsCmd:
    names: tuple[str | None, ...]
    topic_ids: tuple[uuid.UUID | None, ...] | None


@dataclass(frozen=True, slots=True)
class CreatePartitionsCmd:
    specs: tuple[CreatePartitionsSpec, ...]
    seed: int


@dataclass(frozen=True, slots=True)
class AlterConfigsCmd:
    incremental: bool
    resources: tuple[tuple[str, tuple[tuple[Any, ...], ...]], ...]
    broker_values: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AlterResourceConfigsCmd:
    """AlterConfigs / IncrementalAlterConfigs of BROKER and GROUP resources
    (:func:`~broker.controller.resource_configs.alter_resource_configs`)."""

    incremental: bool
    changes: tuple[tuple[int, str, tuple[tuple[Any, ...], ...]], ...]
    broker_values: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class AlterPartitionCmd:
    """Kafka's AlterPartition for one partition (KIP-497)."""

    broker_id: int
    broker_epoch: int
    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionsCmd:
    """Several AlterPartition items in one Raft entry (Kafka's ``AlterPartitionManager`` sends
    every queued ISR change in one request); each item is checked on its own, in order."""

    items: tuple[AlterPartitionCmd, ...]


@dataclass(frozen=True, slots=True)
class AllocateProducerIdsCmd:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class RegisterBrokerCmd:
    """BrokerRegistration (KIP-631); ``incarnation_id`` is fresh per process start."""

    node_id: int
    endpoints: Mapping[str, tuple[str, int]]
    rack: str | None
    incarnation_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class HeartbeatCmd:
    """BrokerHeartbeat: ``metadata_offset`` is the offset of the broker's applied image."""

    node_id: int
    epoch: int
    metadata_offset: int
    want_fence: bool = False
    want_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class FenceBrokerCmd:
    """Proposed by the active controller when a broker's session expired."""

    node_id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class ElectLeadersCmd:
    """ElectLeaders (API 43): ``partitions`` None = every partition."""

    election: Election
    partitions: tuple[tuple[str, int], ...] | None


@dataclass(frozen=True, slots=True)
class CreateAclsCmd:
    """CreateAcls: the ACLs and the ids drawn for them by the proposer."""

    acls: tuple[AclBinding, ...]
    acl_ids: tuple[uuid.UUID, ...]


@dataclass(frozen=True, slots=True)
class DeleteAclsCmd:
    """DeleteAcls: the filters."""

    filters: tuple[AclBindingFilter, ...]


@dataclass(frozen=True, slots=True)
class AlterUserScramCredentialsCmd:
    """AlterUserScramCredentials: deletions and upsertions (salted passwords from the client)."""

    deletions: tuple[ScramDeletion, ...]
    upsertions: tuple[ScramUpsertion, ...]


Command = (
    CreateTopicsCmd
    | DeleteTopicsCmd
    | CreatePartitionsCmd
    | AlterConfigsCmd
    | AlterResourceConfigsCmd
    | AlterPartitionCmd
    | AlterPartitionsCmd
    | AllocateProducerIdsCmd
    | RegisterBrokerCmd
    | HeartbeatCmd
    | FenceBrokerCmd
    | ElectLeadersCmd
    | CreateAclsCmd
    | DeleteAclsCmd
    | AlterUserScramCredentialsCmd
)


@dataclass
class MetadataStateMachine:
    """The replicated metadata image and the command interpreter (pure: no I/O, no clock).

    Attributes:
        image: the current image (``image.offset`` counts the records applied).
    """

    image: MetadataImage
    #: broker -> epoch of a controlled shutdown in progress: heartbeats of that incarnation do
    #: not unfence it again (part of the replicated state: snapshots carry it).
    shutdown_epochs: dict[int, int] = field(default_factory=dict)
    #: broker -> (incarnation id, broker epoch) of its last registration: a retried
    #: registration of the same process start gets the same epoch (no new fencing).
    incarnations: dict[int, tuple[uuid.UUID, int]] = field(default_factory=dict)

    def execute(self, settings: ControllerSettings, command: Command) -> tuple[list[MetadataRecord], Any]:
        """Run ``command``: returns the records applied (possibly none) and the result for the
        proposer. Never raises for a bad command (the result carries the error); an internal
        inconsistency leaves the image unchanged and returns UNKNOWN_SERVER_ERROR."""
        try:
            records, result = self._dispatch(settings, command)
            if records:
                self.image = self.image.apply(records)[0]
            return records, result
        except Exception:  # noqa: BLE001 - a bug must not wedge the Raft apply loop
            logger.exception("controller command failed: %r", command)
            return [], ErrorCode.unknown_server_error

    # -- dispatch ------------------------------------------------------------------------------
    def _unclean(self, settings: ControllerSettings) -> Any:
        def lookup(topic: str) -> bool:
            overrides = self.image.topic_config(topic)
            if "unclean.leader.election.enable" in overrides:
                return overrides["unclean.leader.election.enable"] == "true"
            return settings.unclean_leader_election_enable

        return lookup

    def _dispatch(self, settings: ControllerSettings, cmd: Command) -> tuple[list[MetadataRecord], Any]:
        image = self.image
        control = ReplicationControl(settings)
        if isinstance(cmd, HeartbeatCmd):
            return self._heartbeat(settings, cmd)
        if isinstance(cmd, AlterPartitionCmd):
            return self._alter_partition(cmd)
        if isinstance(cmd, AlterPartitionsCmd):
            return self._alter_partitions(cmd)
        if isinstance(cmd, RegisterBrokerCmd):
            previous = self.incarnations.get(cmd.node_id)
            current = image.brokers.get(cmd.node_id)
            if (
                previous is not None
                and current is not None
                and previous == (cmd.incarnation_id, current.epoch)
            ):
                return [], (ErrorCode.none, current.epoch)
            records, epoch = register_broker_records(
                image, cmd.node_id, cmd.endpoints, cmd.rack, self._unclean(settings)
            )
            self.shutdown_epochs.pop(cmd.node_id, None)
            self.incarnations[cmd.node_id] = (cmd.incarnation_id, epoch)
            return records, (ErrorCode.none, epoch)
        if isinstance(cmd, FenceBrokerCmd):
            broker = image.brokers.get(cmd.node_id)
            if broker is None or broker.epoch != cmd.epoch:
                return [], ErrorCode.stale_broker_epoch
            return fence_broker_records(image, cmd.node_id, self._unclean(settings)), ErrorCode.none
        if isinstance(cmd, CreateTopicsCmd):
            return control.create_topics(image, cmd.specs, False, cmd.topic_ids, cmd.seed)
        if isinstance(cmd, DeleteTopicsCmd):
            return control.delete_topics(image, cmd.names, cmd.topic_ids)
        if isinstance(cmd, CreatePartitionsCmd):
            return control.create_partitions(image, cmd.specs, False, cmd.seed)
        if isinstance(cmd, AlterConfigsCmd):
            return control.alter_topic_configs(
                image, cmd.incremental, cmd.resources, cmd.broker_values, False
            )
        if isinstance(cmd, AlterResourceConfigsCmd):
            return alter_resource_configs(image, cmd.incremental, cmd.changes, cmd.broker_values, False)
        if isinstance(cmd, AllocateProducerIdsCmd):
            broker = image.brokers.get(cmd.broker_id)
            if broker is None or broker.epoch != cmd.broker_epoch:
                return [], (ErrorCode.stale_broker_epoch, -1, 0)
            first = image.next_producer_id
            record = ProducerIdsRecord(cmd.broker_id, cmd.broker_epoch, first + PRODUCER_ID_BLOCK_SIZE)
            return [record], (ErrorCode.none, first, PRODUCER_ID_BLOCK_SIZE)
        if isinstance(cmd, ElectLeadersCmd):
            return self._elect_leaders(settings, cmd)
        if isinstance(cmd, CreateAclsCmd):
            return acl_control.create_acls(image, cmd.acls, cmd.acl_ids)
        if isinstance(cmd, DeleteAclsCmd):
            return acl_control.delete_acls(image, cmd.filters)
        if isinstance(cmd, AlterUserScramCredentialsCmd):
            return scram_control.alter_user_scram_credentials(image, cmd.deletions, cmd.upsertions)
        raise TypeError(f"unknown controller command {cmd!r}")

    # -- heartbeats ------------------------------------------------------------------------------
    def heartbeat_state(self, node_id: int, epoch: int, metadata_offset: int) -> HeartbeatResult:
        """The answer to a heartbeat that changes nothing (Kafka's active controller answers those
        from ``BrokerHeartbeatManager`` without writing the log): STALE_BROKER_EPOCH for another
        incarnation, else the broker's fenced / shutdown state. Read-only."""
        broker = self.image.brokers.get(node_id)
        if broker is None or broker.epoch != epoch:
            return HeartbeatResult(ErrorCode.stale_broker_epoch)
        caught_up = metadata_offset >= broker.epoch
        if self.shutdown_epochs.get(node_id) == epoch:
            return HeartbeatResult(ErrorCode.none, caught_up, True, True)
        return HeartbeatResult(ErrorCode.none, caught_up, broker.fenced)

    def _heartbeat(self, settings: ControllerSettings, cmd: HeartbeatCmd) -> tuple[list[MetadataRecord], Any]:
        image = self.image
        broker = image.brokers.get(cmd.node_id)
        if broker is None or broker.epoch != cmd.epoch:
            return [], HeartbeatResult(ErrorCode.stale_broker_epoch)
        unclean = self._unclean(settings)
        caught_up = cmd.metadata_offset >= broker.epoch
        if cmd.want_shutdown:
            self.shutdown_epochs[cmd.node_id] = cmd.epoch
            records = fence_broker_records(image, cmd.node_id, unclean)
            return records, HeartbeatResult(ErrorCode.none, caught_up, True, True)
        if cmd.want_fence:
            return fence_broker_records(image, cmd.node_id, unclean), HeartbeatResult(
                ErrorCode.none, caught_up, True
            )
        if self.shutdown_epochs.get(cmd.node_id) == cmd.epoch:
            return [], HeartbeatResult(ErrorCode.none, caught_up, True, True)
        if broker.fenced and caught_up:
            return unfence_broker_records(image, cmd.node_id, unclean), HeartbeatResult(
                ErrorCode.none, True, False
            )
        return [], HeartbeatResult(ErrorCode.none, caught_up, broker.fenced)

    # -- AlterPartition ------------------------------------------------------------------------
    def _alter_partitions(self, cmd: AlterPartitionsCmd) -> tuple[list[MetadataRecord], Any]:
        """Each item as :meth:`_alter_partition`, against the registrations the earlier items of
        the batch set; the result is one (error code, registration) per item."""
        records: list[MetadataRecord] = []
        results: list[tuple[ErrorCode, Any]] = []
        changed: dict[tuple[uuid.UUID, int], PartitionRegistration] = {}
        for item in cmd.items:
            item_records, result = self._alter_partition(item, changed)
            records.extend(item_records)
            results.append(result)
            if item_records:
                changed[(item.topic_id, item.partition)] = result[1]
        return records, results

    def _alter_partition(
        self,
        cmd: AlterPartitionCmd,
        changed: Mapping[tuple[uuid.UUID, int], PartitionRegistration] | None = None,
    ) -> tuple[list[MetadataRecord], Any]:
        """``ReplicationControlManager.alterPartition`` checks, in Kafka's order; ``changed``
        holds registrations set by earlier items of the same batch (not yet in the image)."""
        image = self.image
        broker = image.brokers.get(cmd.broker_id)
        if broker is None or broker.epoch != cmd.broker_epoch or broker.fenced:
            return [], (ErrorCode.stale_broker_epoch, None)
        topic = image.topic_by_id(cmd.topic_id)
        if topic is None:
            return [], (ErrorCode.unknown_topic_id, None)
        reg = (changed or {}).get((cmd.topic_id, cmd.partition)) or topic.partitions.get(cmd.partition)
        if reg is None:
            return [], (ErrorCode.unknown_topic_or_partition, None)
        if reg.leader != cmd.broker_id:
            return [], (ErrorCode.not_leader_or_follower, None)
        if cmd.leader_epoch != reg.leader_epoch:
            return [], (ErrorCode.fenced_leader_epoch, None)
        if cmd.partition_epoch != reg.partition_epoch:
            return [], (ErrorCode.invalid_update_version, None)
        new_isr = tuple(cmd.new_isr)
        if (
            len(set(new_isr)) != len(new_isr)
            or any(b not in reg.replicas for b in new_isr)
            or reg.leader not in new_isr
        ):
            return [], (ErrorCode.invalid_request, None)
        if any(b not in reg.isr and not image.is_alive(b) for b in new_isr):
            return [], (ErrorCode.ineligible_replica, None)
        if new_isr == reg.isr:
            return [], (ErrorCode.none, reg)
        new = replace(reg, isr=new_isr, partition_epoch=reg.partition_epoch + 1)
        return [partition_record(image, topic.name, new)], (ErrorCode.none, new)

    # -- ElectLeaders ----------------------------------------------------------------------------
    def _elect_leaders(
        self, settings: ControllerSettings, cmd: ElectLeadersCmd
    ) -> tuple[list[MetadataRecord], Any]:
        """Per partition: NONE (elected), ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE /
        ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION."""
        image = self.image
        alive = alive_after(image, {})
        wanted: Sequence[tuple[str, int]]
        if cmd.partitions is None:
            wanted = [(name, p) for name in sorted(image.topics) for p in image.topics[name].partitions]
        else:
            wanted = cmd.partitions
        records: list[MetadataRecord] = []
        results: dict[tuple[str, int], ErrorCode] = {}
        for name, index in wanted:
            reg = image.partition(name, index)
            if reg is None:
                results[(name, index)] = ErrorCode.unknown_topic_or_partition
                continue
            if cmd.election is Election.PREFERRED:
                if reg.leader == reg.replicas[0]:
                    results[(name, index)] = ErrorCode.election_not_needed
                    continue
                new = change_partition(reg, alive, election=Election.PREFERRED, unclean_enabled=False)
                if new is None or new.leader != reg.replicas[0]:
                    results[(name, index)] = ErrorCode.preferred_leader_not_available
                    continue
            else:
                if reg.leader >= 0 and alive(reg.leader):
                    results[(name, index)] = ErrorCode.election_not_needed
                    continue
                new = change_partition(reg, alive, election=Election.UNCLEAN, unclean_enabled=True)
                if new is None or new.leader < 0:
                    results[(name, index)] = ErrorCode.eligible_leaders_not_available
                    continue
            records.append(partition_record(image, name, new))
            results[(name, index)] = ErrorCode.none
        return records, results

    @staticmethod
    def imbalanced_partitions(image: MetadataImage) -> list[tuple[str, int]]:
        """Partitions whose preferred replica (``replicas[0]``) is alive and in the ISR but not
        the leader (candidates for preferred-leader election)."""
        out: list[tuple[str, int]] = []
        for name in sorted(image.topics):
            for reg in image.topics[name].partitions.values():
                preferred = reg.replicas[0] if reg.replicas else -1
                if reg.leader != preferred and preferred in reg.isr and image.is_alive(preferred):
                    out.append((name, reg.partition))
        return out
