"""The KIP-848 side of the group coordinator: ConsumerGroupHeartbeat, ConsumerGroupDescribe,
session and rebalance timeouts, and the consumer group records in ``__consumer_offsets``
(Kafka's ``GroupMetadataManager.consumerGroupHeartbeat`` / ``consumerGroupLeave`` /
``consumerGroupDescribe`` with ``GroupCoordinatorRecordHelpers``).

One heartbeat, in Kafka's order:

1. validate the request (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION);
   epoch -1 leaves, -2 is a static member leaving temporarily (its partitions stay reserved
   until it rejoins with the same ``group.instance.id`` or its session expires);
2. get or create the group and the member: epoch 0 joins (a static member taking over the
   instance of one that left with -2; UNRELEASED_INSTANCE_ID if that one is still active),
   another epoch must be the member's current one or, when the member owns no partition it
   shouldn't, its previous one (else FENCED_MEMBER_EPOCH; UNKNOWN_MEMBER_ID for an unknown id);
3. update the member; a new member, a changed subscription or changed partition counts of the
   subscribed topics bump the group epoch;
4. a group epoch ahead of the target assignment epoch recomputes the target assignment with the
   group's assignor (``uniform`` / ``range``);
5. reconcile the member one step (:func:`~broker.coordinator.group.current_assignment_builder.reconcile`);
6. append the records of what changed (acks=-1), then answer with the member epoch, the
   heartbeat interval and the assignment when it changed or the request was a full one.

The in-memory state is changed before the append, as Kafka's timeline structures are; an append
that fails answers with its error (the partition's leadership moves on, and the next coordinator
loads what was written). Runs on the event loop; nothing awaits between reading and changing a
group.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from broker.controller.metadata_image import MetadataImage
from broker.coordinator.group.assignors import ASSIGNORS, AssignmentMember, PartitionAssignor
from broker.coordinator.group.classic_group import GroupState
from broker.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupState
from broker.coordinator.group.consumer_group_heartbeat_request import (
    ConsumerGroupConfig,
    HeartbeatError,
    HeartbeatRequest,
    HeartbeatResult,
    Owned,
    check_member_epoch,
    validate_heartbeat_request,
)
from broker.coordinator.group.consumer_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from broker.coordinator.group.consumer_group_record_helpers import (
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    member_tombstones,
    partition_metadata_record,
    target_assignment_epoch_record,
    target_assignment_record,
)
from broker.coordinator.group.current_assignment_builder import FencedMemberEpochError, reconcile
from broker.coordinator.group.offsets_log import KeyValue
from spark_kafkalite.protocol.consumer_protocol import ConsumerProtocolError
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.coordinator.group.classic_group import GroupMetadata
    from broker.coordinator.group.consumer_group_classic import ClassicMembers
    from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker.coordinator.group.scheduler import Scheduler

__all__ = ["ConsumerGroupCoordinator", "HeartbeatRequest", "HeartbeatResult", "ConsumerGroupConfig"]

logger = logging.getLogger(__name__)

E = ErrorCode
_EMPTY_IMAGE = MetadataImage("", -1)


def _subscription_changed(old: ConsumerGroupMember, new: ConsumerGroupMember) -> bool:
    return (
        old.subscribed_topic_names != new.subscribed_topic_names
        or old.subscribed_topic_regex != new.subscribed_topic_regex
        or old.server_assignor != new.server_assignor
    )


def _assigned_changed(old: ConsumerGroupMember | None, new: ConsumerGroupMember) -> bool:
    return old is None or old.assigned_partitions != new.assigned_partitions


class ConsumerGroupCoordinator:
    """Args: ``membership`` (the GroupCoordinator: ``validate_group_status``), ``manager``
    (group cache + appends), ``scheduler`` (clock + timers), ``config``, ``spawn`` (runs a
    background coroutine: appends after a timeout)."""

    def __init__(
        self,
        membership: Any,
        manager: GroupMetadataManager,
        scheduler: Scheduler,
        config: ConsumerGroupConfig,
        spawn: Callable[[Coroutine[Any, Any, Any]], Any],
    ) -> None:
        self.membership = membership
        self.manager = manager
        self.scheduler = scheduler
        self.config = config
        self.spawn = spawn
        #: the broker's current metadata image (set by the service; empty in unit tests)
        self.image_provider: Callable[[], MetadataImage] = lambda: _EMPTY_IMAGE
        #: classic members in consumer groups (upgrade, JoinGroup / SyncGroup / Heartbeat / LeaveGroup)
        self.classic: ClassicMembers | None = None
        self.assignors: dict[str, PartitionAssignor] = {}
        for name in config.assignors:
            if name not in ASSIGNORS:
                raise ValueError(
                    f"group.consumer.assignors: unknown assignor {name!r} (known: {sorted(ASSIGNORS)})"
                )
            self.assignors[name] = ASSIGNORS[name]

    def image(self) -> MetadataImage:
        return self.image_provider()

    def topics(self) -> Mapping[str, Any]:
        return self.image_provider().topics

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------------
    async def heartbeat(self, request: HeartbeatRequest, topics: Mapping[str, Any]) -> HeartbeatResult:
        """Handle one heartbeat; ``topics`` is the metadata image's topic mapping (name ->
        TopicImage with ``topic_id`` and ``num_partitions``)."""
        error = self.membership.validate_group_status(request.group_id)
        if error:
            return HeartbeatResult(error)
        try:
            validate_heartbeat_request(request, self.assignors)
            records: list[KeyValue] = []
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                holder, result = self._leave(request, records)
            else:
                holder, result = self._heartbeat(request, topics, records)
        except HeartbeatError as exc:
            return HeartbeatResult(exc.code, str(exc))
        if records:
            code = await self.manager.append_records(holder.group_id, records)
            if code:
                return HeartbeatResult(code)
        return result

    def _group(
        self, group_id: str, create: bool, records: list[KeyValue] | None = None
    ) -> tuple[GroupMetadata, ConsumerGroup]:
        holder = self.manager.get_or_create_group(group_id, create=create)
        if holder is None or (holder.consumer is None and not create):
            raise HeartbeatError(E.group_id_not_found, f"Group {group_id} not found.")
        if holder.members and create and records is not None and self.classic is not None:
            if not self.classic.can_upgrade(holder):
                raise HeartbeatError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
            try:  # KIP-848 online upgrade: the classic members become members of a consumer group
                return holder, self.classic.upgrade(holder, records)
            except ConsumerProtocolError as exc:
                raise HeartbeatError(
                    E.group_id_not_found,
                    f"Cannot upgrade the classic group {group_id} to a consumer group: {exc}",
                ) from None
        if holder.members or holder.pending_members:
            raise HeartbeatError(E.group_id_not_found, f"Group {group_id} is not a consumer group.")
        if holder.is_state(GroupState.DEAD):
            raise HeartbeatError(E.coordinator_not_available, f"Group {group_id} is being deleted.")
        if holder.consumer is None:
            holder.consumer = ConsumerGroup(group_id)
            holder.protocol_type = "consumer"
        return holder, holder.consumer

    def _find_member(
        self, group: ConsumerGroup, r: HeartbeatRequest, records: list[KeyValue]
    ) -> ConsumerGroupMember | None:
        """The member before this heartbeat (None for a new one)."""
        joining = r.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        if r.instance_id is None:
            member = group.members.get(r.member_id)
            if joining:
                if member is not None:  # rejoining from scratch: its partitions are released
                    group.remove_member(member.member_id)
                    self._cancel_timers(group, member.member_id)
                    records.extend(member_tombstones(group.group_id, member.member_id))
                return None
            if member is None:
                raise HeartbeatError(
                    E.unknown_member_id, f"Member {r.member_id} is not a member of group {group.group_id}."
                )
            check_member_epoch(member, r.member_epoch, r.owned)
            return member
        existing = group.static_member(r.instance_id)
        if joining:
            if existing is None:
                return None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and existing.member_id != r.member_id:
                raise HeartbeatError(
                    E.unreleased_instance_id,
                    f"Static member {existing.member_id} with instance id {r.instance_id} is not released.",
                )
            # the rejoining instance takes over the member's assignment under its new id
            target = group.target_assignment.get(existing.member_id)
            group.remove_member(existing.member_id)
            self._cancel_timers(group, existing.member_id)
            records.extend(member_tombstones(group.group_id, existing.member_id))
            replacement = replace(existing, member_id=r.member_id, member_epoch=0, previous_member_epoch=0)
            group.update_member(replacement)
            if target is not None:
                group.target_assignment[r.member_id] = target
                records.append(target_assignment_record(group.group_id, r.member_id, target))
            return replacement
        if existing is None:
            raise HeartbeatError(E.unknown_member_id, f"Instance id {r.instance_id} is unknown.")
        if existing.member_id != r.member_id:
            raise HeartbeatError(
                E.fenced_instance_id,
                f"Static member {r.member_id} with instance id {r.instance_id} was fenced by member {existing.member_id}.",
            )
        check_member_epoch(existing, r.member_epoch, r.owned)
        return existing

    def _heartbeat(
        self, r: HeartbeatRequest, topics: Mapping[str, Any], records: list[KeyValue]
    ) -> tuple[GroupMetadata, HeartbeatResult]:
        holder, group = self._group(r.group_id, r.member_epoch == JOIN_GROUP_MEMBER_EPOCH, records)
        if len(group.members) >= self.config.max_size and r.member_id not in group.members:
            raise HeartbeatError(
                E.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        member = self._find_member(group, r, records)
        base = member if member is not None else ConsumerGroupMember(r.member_id)
        updated = replace(
            base,
            instance_id=r.instance_id if r.instance_id is not None else base.instance_id,
            rack_id=r.rack_id if r.rack_id is not None else base.rack_id,
            rebalance_timeout_ms=r.rebalance_timeout_ms
            if r.rebalance_timeout_ms != -1
            else base.rebalance_timeout_ms,
            server_assignor=r.server_assignor if r.server_assignor is not None else base.server_assignor,
            subscribed_topic_names=r.subscribed_topic_names
            if r.subscribed_topic_names is not None
            else base.subscribed_topic_names,
            subscribed_topic_regex=(r.subscribed_topic_regex or None)
            if r.subscribed_topic_regex is not None
            else base.subscribed_topic_regex,
            client_id=r.client_id,
            client_host=r.client_host,
        )
        reconciled = self.update_and_reconcile(group, member, updated, r.owned, topics, records)
        self.schedule_session_timeout(group, reconciled.member_id, r.session_timeout_ms)
        self._maybe_schedule_rebalance_timeout(group, updated, reconciled)
        full = r.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            r.rebalance_timeout_ms != -1 and r.subscribed_topic_names is not None and r.owned is not None
        )
        send_assignment = full or _assigned_changed(member, reconciled)
        return holder, HeartbeatResult(
            0,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=r.heartbeat_interval_ms,
            assignment=reconciled.assigned_partitions if send_assignment else None,
        )

    def update_and_reconcile(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember | None,
        updated: ConsumerGroupMember,
        owned: Owned | None,
        topics: Mapping[str, Any],
        records: list[KeyValue],
    ) -> ConsumerGroupMember:
        """Steps 3-5 of a heartbeat (or of a classic member's JoinGroup) for ``updated``, the
        member with this request's changes applied (``member``: before them, None when new):
        the group epoch, the target assignment, one reconciliation step; appends the records
        to ``records`` and returns the reconciled member (already in the group).

        Raises:
            HeartbeatError: FENCED_MEMBER_EPOCH (a member in an unknown state).
        """
        base = member if member is not None else ConsumerGroupMember(updated.member_id)
        bump = member is None or _subscription_changed(base, updated)
        if member is None or updated != base:
            records.append(member_metadata_record(group.group_id, updated))
        group.update_member(updated)
        # 1. subscription metadata and the group epoch
        if bump or group.metadata_checked_for is not topics:
            metadata = {}
            for name in group.subscribed_topic_names(topics):
                topic = topics.get(name)
                if topic is not None:
                    metadata[name] = (topic.topic_id, topic.num_partitions)
            group.metadata_checked_for = topics
            if metadata != group.subscription_metadata:
                group.subscription_metadata = metadata
                records.append(partition_metadata_record(group.group_id, metadata))
                bump = True
        if bump:
            group.group_epoch += 1
            records.append(group_epoch_record(group.group_id, group.group_epoch))
            logger.info("consumer group %s: bumped group epoch to %d", group.group_id, group.group_epoch)
        # 2. the target assignment
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group, topics, records)
        # 3. reconcile the member
        target = group.target_assignment.get(updated.member_id, {})
        try:
            reconciled = reconcile(updated, group.assignment_epoch, target, group.partition_epoch, owned)
        except FencedMemberEpochError as exc:
            raise HeartbeatError(E.fenced_member_epoch, str(exc)) from None
        if reconciled != updated or member is None or base.member_epoch != reconciled.member_epoch:
            group.update_member(reconciled)
            records.append(current_assignment_record(group.group_id, reconciled))
        return reconciled

    def _update_target_assignment(
        self, group: ConsumerGroup, topics: Mapping[str, Any], records: list[KeyValue]
    ) -> None:
        """Kafka's ``updateTargetAssignment`` / ``TargetAssignmentBuilder``: run the group's
        assignor over the members (static members that left temporarily keep their slot) and
        write the members whose target changed plus the new assignment epoch."""
        assignor = self.assignors[group.preferred_assignor(self.config.assignors[0])]
        partition_counts = {topic_id: count for topic_id, count in group.subscription_metadata.values()}
        members = {}
        for member_id, member in group.members.items():
            ids = frozenset(
                group.subscription_metadata[name][0]
                for name in group.member_topic_names(member, topics)
                if name in group.subscription_metadata
            )
            members[member_id] = AssignmentMember(ids, group.target_assignment.get(member_id, {}))
        new_target = assignor.assign(members, partition_counts)
        for member_id, assignment in new_target.items():
            assignment = {t: ps for t, ps in assignment.items() if ps}
            if group.target_assignment.get(member_id) != assignment:
                group.target_assignment[member_id] = assignment
                records.append(target_assignment_record(group.group_id, member_id, assignment))
        group.assignment_epoch = group.group_epoch
        records.append(target_assignment_epoch_record(group.group_id, group.assignment_epoch))
        logger.info(
            "consumer group %s: target assignment of epoch %d computed by %s for %d member(s)",
            group.group_id,
            group.assignment_epoch,
            assignor.name,
            len(members),
        )

    # -- leaving ---------------------------------------------------------------------------------
    def _leave(self, r: HeartbeatRequest, records: list[KeyValue]) -> tuple[GroupMetadata, HeartbeatResult]:
        """Kafka's ``consumerGroupLeave``: epoch -1 removes the member (group epoch bumped),
        -2 keeps a static member's assignment for its return."""
        holder, group = self._group(r.group_id, create=False)
        if r.instance_id is None:
            member = group.members.get(r.member_id)
            if member is None:
                raise HeartbeatError(
                    E.unknown_member_id, f"Member {r.member_id} is not a member of group {group.group_id}."
                )
        else:
            member = group.static_member(r.instance_id)
            if member is None:
                raise HeartbeatError(E.unknown_member_id, f"Instance id {r.instance_id} is unknown.")
            if member.member_id != r.member_id:
                raise HeartbeatError(
                    E.fenced_instance_id,
                    f"Static member {r.member_id} with instance id {r.instance_id} was fenced.",
                )
        if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            left = replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
            group.update_member(left)
            records.append(current_assignment_record(group.group_id, left))
            self._cancel_rebalance_timer(group, member.member_id)
            logger.info(
                "consumer group %s: static member %s left temporarily", group.group_id, member.member_id
            )
        else:
            self.remove(group, member.member_id, records, "left")
        return holder, HeartbeatResult(0, member_id=r.member_id, member_epoch=r.member_epoch)

    def remove_quietly(self, group: ConsumerGroup, member_id: str, records: list[KeyValue]) -> None:
        """Drop a member being replaced (a static member's new process) without a new epoch."""
        group.remove_member(member_id)
        self._cancel_timers(group, member_id)
        records.extend(member_tombstones(group.group_id, member_id))

    def remove(self, group: ConsumerGroup, member_id: str, records: list[KeyValue], reason: str) -> None:
        if self.classic is not None and self.classic.maybe_downgrade(group, member_id, records):
            return
        group.remove_member(member_id)
        self._cancel_timers(group, member_id)
        records.extend(member_tombstones(group.group_id, member_id))
        group.group_epoch += 1
        records.append(group_epoch_record(group.group_id, group.group_epoch))
        logger.info(
            "consumer group %s: member %s %s; group epoch %d",
            group.group_id,
            member_id,
            reason,
            group.group_epoch,
        )

    # -- timers ---------------------------------------------------------------------------------------
    def schedule_session_timeout(self, group: ConsumerGroup, member_id: str, timeout_ms: int) -> None:
        old = group.session_timers.pop(member_id, None)
        if old is not None:
            old.cancel()  # type: ignore[attr-defined]
        group.session_timers[member_id] = self.scheduler.call_later(
            timeout_ms, lambda: self._expire(group, member_id, None, "session timed out")
        )

    def _maybe_schedule_rebalance_timeout(
        self, group: ConsumerGroup, before: ConsumerGroupMember, after: ConsumerGroupMember
    ) -> None:
        """Kafka's ``scheduleConsumerGroupRebalanceTimeout``: a member asked to revoke partitions
        that does not get to the next epoch within its rebalance timeout is removed."""
        if after.state is not MemberState.UNREVOKED_PARTITIONS:
            self._cancel_rebalance_timer(group, after.member_id)
            return
        if before.state is MemberState.UNREVOKED_PARTITIONS and before.member_epoch == after.member_epoch:
            if after.member_id in group.rebalance_timers:
                return
        self._cancel_rebalance_timer(group, after.member_id)
        epoch = after.member_epoch
        group.rebalance_timers[after.member_id] = self.scheduler.call_later(
            max(after.rebalance_timeout_ms, 0),
            lambda: self._expire(group, after.member_id, epoch, "did not revoke its partitions in time"),
        )

    def schedule_join_timeout_if_absent(self, group: ConsumerGroup, member_id: str, timeout_ms: int) -> None:
        """A classic member told to rejoin must send JoinGroup within its rebalance timeout or
        it is removed (Kafka's ``scheduleConsumerGroupJoinTimeoutIfAbsent``)."""
        if member_id not in group.rebalance_timers:
            group.rebalance_timers[member_id] = self.scheduler.call_later(
                max(timeout_ms, 0),
                lambda: self._expire(group, member_id, None, "did not rejoin within its rebalance timeout"),
            )

    def cancel_join_timeout(self, group: ConsumerGroup, member_id: str) -> None:
        self._cancel_rebalance_timer(group, member_id)

    def _cancel_rebalance_timer(self, group: ConsumerGroup, member_id: str) -> None:
        timer = group.rebalance_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()  # type: ignore[attr-defined]

    def _cancel_timers(self, group: ConsumerGroup, member_id: str) -> None:
        timer = group.session_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()  # type: ignore[attr-defined]
        self._cancel_rebalance_timer(group, member_id)

    def cancel_all_timers(self, group: ConsumerGroup) -> None:
        for member_id in list(group.session_timers) + list(group.rebalance_timers):
            self._cancel_timers(group, member_id)

    def _expire(self, group: ConsumerGroup, member_id: str, epoch: int | None, reason: str) -> None:
        holder = self.manager.get_group(group.group_id)
        if group.dead or holder is None or holder.consumer is not group:
            return
        member = group.members.get(member_id)
        if member is None or (
            epoch is not None
            and (member.member_epoch != epoch or member.state is not MemberState.UNREVOKED_PARTITIONS)
        ):
            return
        records: list[KeyValue] = []
        self.remove(group, member_id, records, reason)
        self.spawn(self._append_in_background(group.group_id, records))

    async def _append_in_background(self, group_id: str, records: list[KeyValue]) -> None:
        code = await self.manager.append_records(group_id, records)
        if code:
            logger.warning(
                "consumer group %s: writing %d record(s) failed with error %d", group_id, len(records), code
            )

    def on_group_loaded(self, group: ConsumerGroup, session_timeout_ms: int) -> None:
        """A loaded group's members get a fresh session (Kafka schedules their timeouts on load)."""
        for member_id, member in group.members.items():
            self.schedule_session_timeout(
                group, member_id, member.classic_session_timeout_ms or session_timeout_ms
            )

    # -- offsets (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch) -------------
    @staticmethod
    def validate_offset_commit(
        group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int | None
    ) -> int:
        """0, UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH or UNSUPPORTED_VERSION (a consumer-protocol
        member committing with OffsetCommit < v9); ``api_version`` None for TxnOffsetCommit."""
        if member_epoch < 0 and not group.members:
            return 0
        member = group.members.get(member_id)
        if member is None:
            return int(E.unknown_member_id)
        if member.uses_classic_protocol:  # Kafka: the classic member's generation is its epoch
            return 0 if member_epoch == member.member_epoch else int(E.illegal_generation)
        if api_version is not None and api_version < 9:
            return int(E.unsupported_version)
        if member_epoch != member.member_epoch:
            return int(E.stale_member_epoch)
        return 0

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
        if member_id is None and member_epoch < 0:
            return 0
        member = group.members.get(member_id or "")
        if member is None:
            return int(E.unknown_member_id)
        if member_epoch != member.member_epoch:
            return int(E.illegal_generation if member.uses_classic_protocol else E.stale_member_epoch)
        return 0

    # -- ConsumerGroupDescribe -------------------------------------------------------------------
    def describe(self, group_id: str) -> tuple[int, str | None, ConsumerGroup | None]:
        """(error, message, group) of one group: GROUP_ID_NOT_FOUND when unknown or not a
        consumer group (Kafka's ``consumerGroupDescribe``)."""
        error = self.membership.validate_group_status(group_id)
        if error:
            return error, None, None
        holder = self.manager.get_group(group_id)
        if holder is None or holder.consumer is None or holder.consumer.dead:
            return int(E.group_id_not_found), f"Group {group_id} not found.", None
        if holder.members:
            return int(E.group_id_not_found), f"Group {group_id} is not a consumer group.", None
        return 0, None, holder.consumer

    @staticmethod
    def state_of(group: ConsumerGroup) -> ConsumerGroupState:
        return group.state
