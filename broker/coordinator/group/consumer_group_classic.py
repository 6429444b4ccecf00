"""Classic-protocol members in a KIP-848 consumer group: KIP-848's online upgrade and mixed groups
(Kafka's ``GroupMetadataManager.convertToConsumerGroup`` / ``classicGroupJoinToConsumerGroup`` /
``classicGroupSyncToConsumerGroup`` / ``classicGroupHeartbeatToConsumerGroup`` and the classic
LeaveGroup of a consumer group, ``convertToClassicGroup``; Kafka's default migration policy
``bidirectional``).

- **Upgrade**: a consumer-protocol member (ConsumerGroupHeartbeat, epoch 0) joining a classic
  group of protocol type ``consumer`` that has members converts it: each classic member becomes
  a consumer group member keeping its subscription (from its JoinGroup metadata), its assignment
  and its session timeout; the group epoch and assignment epoch start at the classic generation;
  the classic record is deleted and the consumer group records written. Parked JoinGroup /
  SyncGroup requests are answered REBALANCE_IN_PROGRESS.
- **Mixed group**: classic members then (and new ones joining a consumer group) use
  JoinGroup / SyncGroup / Heartbeat / LeaveGroup as before, while the broker assigns: JoinGroup
  reconciles the member like a heartbeat (its owned partitions are the ones its subscription
  metadata reports) and answers at once with the member epoch as generation and no leader
  (nobody runs a client-side assignor); SyncGroup returns the member's partitions encoded with the
  ConsumerProtocol version of its metadata; Heartbeat answers REBALANCE_IN_PROGRESS when the
  member is behind the group epoch, must revoke partitions, or can now receive unreleased ones, so
  it rejoins (within its rebalance timeout, else it is removed); LeaveGroup removes it. Its
  session is its JoinGroup ``session.timeout.ms``.
- **Downgrade**: when the last consumer-protocol member leaves (or is fenced) and classic
  members remain, the group turns classic again (Kafka's ``convertToClassicGroup``) and rebalances.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from broker.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from broker.coordinator.group.consumer_group import ConsumerGroup
from broker.coordinator.group.consumer_group_member import Assignment, ConsumerGroupMember, MemberState
from broker.coordinator.group.consumer_group_record_helpers import (
    current_assignment_record,
    group_epoch_record,
    group_tombstones,
    member_metadata_record,
    member_tombstones,
    partition_metadata_record,
    target_assignment_epoch_record,
    target_assignment_record,
)
from broker.coordinator.group.offsets_log import KeyValue
from spark_kafkalite.protocol.consumer_protocol import (
    ASSIGNMENT_HIGHEST_VERSION,
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from spark_kafkalite.protocol.consumer_protocol import Assignment as ProtocolAssignment
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.group_records import encode_group_metadata_key
from spark_kafkalite.protocol.schema_io import I16
from spark_kafkalite.protocol.types import TopicPartition

if TYPE_CHECKING:
    from broker.controller.metadata_image import MetadataImage
    from broker.coordinator.group.consumer_group_coordinator import ConsumerGroupCoordinator
    from broker.coordinator.group.rebalance import GroupRebalancer

__all__ = ["ClassicMembers"]

logger = logging.getLogger(__name__)

E = ErrorCode


def _to_ids(partitions: tuple[TopicPartition, ...], topics: Mapping[str, Any]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for tp in partitions:
        topic = topics.get(tp.topic)
        if topic is not None:
            out.setdefault(topic.topic_id, set()).add(int(tp.partition))
    return {t: frozenset(ps) for t, ps in out.items()}


def _encode_assignment(member: ConsumerGroupMember, image: MetadataImage) -> bytes:
    """The member's assigned partitions as ConsumerProtocolAssignment bytes, in the version of
    its subscription metadata (Kafka's ``prepareAssignment``)."""
    partitions = tuple(
        TopicPartition(name, p)
        for topic_id, parts in sorted(member.assigned_partitions.items(), key=lambda kv: str(kv[0]))
        if (name := image.topic_ids.get(topic_id)) is not None
        for p in sorted(parts)
    )
    protocols = member.classic_protocols or ()
    metadata = protocols[0][1] if protocols else b""
    version = I16.unpack_from(metadata)[0] if len(metadata) >= 2 else 0
    return encode_assignment(ProtocolAssignment(partitions), max(0, min(version, ASSIGNMENT_HIGHEST_VERSION)))


class ClassicMembers:
    """Args: ``consumer`` (the KIP-848 coordinator: reconciliation, timers, appends),
    ``rebalance`` (the classic side's timers, cancelled on upgrade)."""

    def __init__(self, consumer: ConsumerGroupCoordinator, rebalance: GroupRebalancer) -> None:
        self.consumer = consumer
        self.rebalance = rebalance

    def _topics(self) -> Mapping[str, Any]:
        return self.consumer.topics()

    # -- upgrade ----------------------------------------------------------------------------------
    def can_upgrade(self, holder: GroupMetadata) -> bool:
        """Kafka's ``validateOnlineUpgrade``: a classic group of the consumer protocol type with a
        selected protocol, within ``group.consumer.max.size``."""
        return (
            bool(holder.members)
            and holder.protocol_type == CONSUMER_PROTOCOL_TYPE
            and holder.protocol_name is not None
            and len(holder.members) <= self.consumer.config.max_size
        )

    def upgrade(self, holder: GroupMetadata, records: list[KeyValue]) -> ConsumerGroup:
        """Convert the classic group ``holder`` into a consumer group (see the module docstring).

        Raises:
            ConsumerProtocolError: a member's metadata or assignment is malformed.
        """
        topics = self._topics()
        protocol = holder.protocol_name or ""
        group = ConsumerGroup(holder.group_id)
        generation = holder.generation_id
        members = []
        for m in holder.members.values():
            subscription = decode_subscription(m.metadata(protocol))
            assigned = _to_ids(decode_assignment(m.assignment).partitions, topics)
            members.append(
                ConsumerGroupMember(
                    m.member_id,
                    instance_id=m.group_instance_id,
                    rack_id=subscription.rack_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=subscription.topics,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    member_epoch=generation,
                    previous_member_epoch=generation,
                    state=MemberState.STABLE,
                    assigned_partitions=assigned,
                    classic_session_timeout_ms=m.session_timeout_ms,
                    classic_protocols=tuple(m.protocols),
                )
            )
        # the classic side lets go: parked requests rejoin, its timers stop, its record goes
        for m in list(holder.members.values()):
            self.rebalance.cancel_heartbeat(holder, m.member_id)
            if m.awaiting_join is not None:
                holder.invoke_join_callback(m, JoinResult(m.member_id, int(E.rebalance_in_progress)))
            holder.invoke_sync_callback(m, SyncResult(int(E.rebalance_in_progress)))
        for member_id in holder.pending_members:
            self.rebalance.cancel_heartbeat(holder, member_id)
        self.rebalance.cancel_timer(holder, "join_timer")
        self.rebalance.cancel_timer(holder, "sync_timer")
        holder.members.clear()
        holder.static_members.clear()
        holder.pending_members.clear()
        holder.pending_sync_members.clear()
        holder.supported_protocols.clear()
        holder.num_awaiting_join = 0
        holder.state = GroupState.EMPTY
        holder.protocol_name = None
        holder.leader_id = None
        holder.protocol_type = CONSUMER_PROTOCOL_TYPE
        holder.consumer = group
        records.append((encode_group_metadata_key(holder.group_id), None))
        # the consumer group starts where the classic generation was
        group.group_epoch = group.assignment_epoch = generation
        for member in members:
            group.update_member(member)
            group.target_assignment[member.member_id] = dict(member.assigned_partitions)
        metadata = {}
        for name in group.subscribed_topic_names(topics):
            topic = topics.get(name)
            if topic is not None:
                metadata[name] = (topic.topic_id, topic.num_partitions)
        group.subscription_metadata = metadata
        group.metadata_checked_for = topics
        records.append(group_epoch_record(group.group_id, generation))
        records.append(partition_metadata_record(group.group_id, metadata))
        for member in members:
            records.append(member_metadata_record(group.group_id, member))
            records.append(
                target_assignment_record(group.group_id, member.member_id, member.assigned_partitions)
            )
        records.append(target_assignment_epoch_record(group.group_id, generation))
        for member in members:
            records.append(current_assignment_record(group.group_id, member))
            self.consumer.schedule_session_timeout(
                group, member.member_id, member.classic_session_timeout_ms or 0
            )
        logger.info(
            "upgraded classic group %s (generation %d, %d member(s)) to a consumer group",
            holder.group_id,
            generation,
            len(members),
        )
        return group

    # -- downgrade --------------------------------------------------------------------------------
    def maybe_downgrade(self, group: ConsumerGroup, leaving_id: str, records: list[KeyValue]) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMembers`` + ``convertToClassicGroup``: when
        ``leaving_id`` leaves (or is fenced) and every other member uses the classic protocol,
        the group becomes a classic group again (generation = the group epoch, each member with
        its current partitions, the classic record written, the consumer group records deleted)
        and a rebalance starts, so the members rejoin through JoinGroup. Returns whether it did
        (the leaving member is then gone too)."""
        remaining = [m for member_id, m in group.members.items() if member_id != leaving_id]
        if not remaining or not all(m.uses_classic_protocol for m in remaining):
            return False
        holder = self.consumer.manager.get_group(group.group_id)
        if holder is None or holder.consumer is not group or holder.members:
            return False
        image = self.consumer.image()
        for member_id in group.members:
            records.extend(member_tombstones(group.group_id, member_id))
        records.extend(group_tombstones(group.group_id))
        group.dead = True
        self.consumer.cancel_all_timers(group)
        holder.consumer = None
        holder.generation_id = group.group_epoch
        for m in remaining:
            protocols = list(m.classic_protocols or ())
            holder.add(
                MemberMetadata(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.classic_session_timeout_ms or 0,
                    CONSUMER_PROTOCOL_TYPE,
                    protocols,
                    assignment=_encode_assignment(m, image),
                )
            )
        holder.protocol_type = CONSUMER_PROTOCOL_TYPE
        holder.protocol_name = holder.select_protocol()
        holder.leader_id = remaining[0].member_id
        holder.state = GroupState.STABLE
        assignment = {m.member_id: m.assignment for m in holder.members.values()}
        records.append(self.consumer.manager.group_metadata_record(holder, assignment))
        for member in holder.members.values():
            self.rebalance.complete_and_schedule_heartbeat(holder, member)
        self.rebalance.maybe_prepare_rebalance(
            holder, f"downgrade of group {holder.group_id} from consumer to classic"
        )
        logger.info(
            "downgraded consumer group %s (epoch %d, %d classic member(s)) to a classic group",
            group.group_id,
            group.group_epoch,
            len(remaining),
        )
        return True

    # -- JoinGroup --------------------------------------------------------------------------------
    def join(
        self,
        holder: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> tuple[JoinResult, list[KeyValue]]:
        """A JoinGroup to the consumer group of ``holder``: the answer and the records to append
        before it is sent."""
        group = holder.consumer
        if group is None:
            raise RuntimeError(f"group {holder.group_id} is not a consumer group")
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            return JoinResult(member_id, int(E.inconsistent_group_protocol)), []
        if member_id == "":
            member_id = str(uuid.uuid4())
            if require_known_member_id:  # KIP-394
                return JoinResult(member_id, int(E.member_id_required)), []
        if len(group.members) >= self.consumer.config.max_size and member_id not in group.members:
            return JoinResult(member_id, int(E.group_max_size_reached)), []
        try:
            subscription = decode_subscription(protocols[0][1])
        except ConsumerProtocolError:
            return JoinResult(member_id, int(E.inconsistent_group_protocol)), []
        records: list[KeyValue] = []
        member = group.members.get(member_id)
        if member is None and instance_id is not None:
            existing = group.static_member(instance_id)
            if existing is not None:  # the instance's new process takes over its partitions
                member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
                target = group.target_assignment.get(existing.member_id, {})
                self.consumer.remove_quietly(group, existing.member_id, records)
                group.update_member(member)
                group.target_assignment[member_id] = target
                records.append(target_assignment_record(group.group_id, member_id, target))
        elif member is not None and not member.uses_classic_protocol:
            return JoinResult(member_id, int(E.unknown_member_id)), []
        base = member if member is not None else ConsumerGroupMember(member_id)
        updated = replace(
            base,
            instance_id=instance_id,
            rack_id=subscription.rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=subscription.topics,
            rebalance_timeout_ms=rebalance_timeout_ms,
            classic_session_timeout_ms=session_timeout_ms,
            classic_protocols=tuple(protocols),
        )
        topics = self._topics()
        owned = [(t, sorted(ps)) for t, ps in _to_ids(subscription.owned_partitions, topics).items()]
        reconciled = self.consumer.update_and_reconcile(group, member, updated, owned, topics, records)
        self.consumer.cancel_join_timeout(group, member_id)
        self.consumer.schedule_session_timeout(group, member_id, session_timeout_ms)
        return JoinResult(
            member_id,
            0,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
            leader_id="",
            members=[],
        ), records

    def join_and_answer(
        self,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        callback: JoinCallback,
    ) -> None:
        """JoinGroup of a classic member to a consumer group: answered once its records are
        written (:class:`ClassicMembers`)."""
        result, records = self.join(
            group,
            member_id,
            instance_id,
            require_known_member_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            protocols,
        )
        if not records:
            callback(result)
            return

        async def append_then_answer() -> None:
            code = await self.consumer.manager.append_records(group.group_id, records)
            callback(JoinResult(result.member_id, code) if code else result)

        self.consumer.spawn(append_then_answer())

    def convert_empty_consumer_group(self, group: GroupMetadata) -> None:
        """A classic member joins an empty consumer group: it becomes a classic group (its
        offsets stay), the consumer group records are deleted (Kafka's conversion of an empty
        group)."""
        consumer = group.consumer
        if consumer is None:
            return
        consumer.dead = True
        self.consumer.cancel_all_timers(consumer)
        group.consumer = None
        group.protocol_type = None
        self.consumer.spawn(
            self.consumer.manager.append_records(group.group_id, group_tombstones(group.group_id))
        )

    def _member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> tuple[int, ConsumerGroupMember | None]:
        """Kafka's ``validateConsumerGroupMember`` + the member must use the classic protocol."""
        if instance_id is not None:
            member = group.static_member(instance_id)
            if member is None:
                return int(E.unknown_member_id), None
            if member.member_id != member_id:
                return int(E.fenced_instance_id), None
        else:
            member = group.members.get(member_id)
            if member is None:
                return int(E.unknown_member_id), None
        if not member.uses_classic_protocol:
            return int(E.unknown_member_id), None
        return 0, member

    # -- SyncGroup --------------------------------------------------------------------------------
    def sync(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> SyncResult:
        error, member = self._member(group, member_id, instance_id)
        if member is None:
            return SyncResult(error)
        if generation_id != member.member_epoch:
            return SyncResult(int(E.illegal_generation))
        protocols = member.classic_protocols or ()
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            protocol_name is not None and protocol_name not in {name for name, _ in protocols}
        ):
            return SyncResult(int(E.inconsistent_group_protocol))
        # Kafka's throwIfRebalanceInProgress: behind the group epoch, the member must rejoin, unless
        # it is revoking partitions (it rejoined already: it gets the partitions it keeps)
        if member.member_epoch < group.group_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return SyncResult(int(E.rebalance_in_progress))
        self.consumer.schedule_session_timeout(
            group, member.member_id, member.classic_session_timeout_ms or 0
        )
        assignment = _encode_assignment(member, self.consumer.image())
        return SyncResult(
            0, assignment, CONSUMER_PROTOCOL_TYPE, protocol_name or (protocols[0][0] if protocols else None)
        )

    # -- Heartbeat / LeaveGroup ---------------------------------------------------------------------
    def heartbeat(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        error, member = self._member(group, member_id, instance_id)
        if member is None:
            return error
        if generation_id != member.member_epoch:
            return int(E.illegal_generation)
        self.consumer.schedule_session_timeout(
            group, member.member_id, member.classic_session_timeout_ms or 0
        )
        waiting = member.state is MemberState.UNRELEASED_PARTITIONS and any(
            group.partition_epoch(t, p) != -1
            for t, parts in group.target_assignment.get(member.member_id, {}).items()
            for p in parts
            if p not in member.assigned_partitions.get(t, frozenset())
        )
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (member.state is MemberState.UNRELEASED_PARTITIONS and not waiting)
        ):
            self.consumer.schedule_join_timeout_if_absent(
                group, member.member_id, member.rebalance_timeout_ms
            )
            return int(E.rebalance_in_progress)
        return 0

    def leave(
        self, group: ConsumerGroup, members: list[tuple[str, str | None]]
    ) -> tuple[list[tuple[str, str | None, int]], list[KeyValue]]:
        """LeaveGroup of classic members of a consumer group: per member (id, instance id, error)
        and the records removing those that left."""
        results = []
        records: list[KeyValue] = []
        for member_id, instance_id in members:
            if member_id == "" and instance_id is not None:
                found = group.static_member(instance_id)
                error, member = (0, found) if found is not None else (int(E.unknown_member_id), None)
            else:
                error, member = self._member(group, member_id, instance_id)
            if member is not None:
                self.consumer.remove(group, member.member_id, records, "left the group (LeaveGroup)")
            results.append((member_id, instance_id, error))
        return results, records
