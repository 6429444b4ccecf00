"""The classic-protocol group coordinator: JoinGroup / SyncGroup / Heartbeat / LeaveGroup and
session expiry (Kafka's ``GroupCoordinator.scala``, pre-KIP-848). Offsets and admin operations
live in :class:`~broker.coordinator.group.group_offset_manager.GroupOffsetManager`, which this
class owns (``offsets``) and serves through the ``GroupMembership`` interface; the join/sync
phases, member removal and session expiry in
:class:`~broker.coordinator.group.rebalance.GroupRebalancer` (``rebalance``), also owned.

Runs on the broker's event loop; every method runs to completion without awaiting except the
persistence calls, after which the group state is re-checked (Kafka's ``group.inLock`` +
generation checks). Parked JoinGroup / SyncGroup requests are answered through callbacks.

Rules kept from Kafka (errors are ``ErrorCode`` ints):
- validation: empty group id -> INVALID_GROUP_ID; coordinator inactive -> COORDINATOR_NOT_AVAILABLE;
  partition loading -> COORDINATOR_LOAD_IN_PROGRESS; group not led here -> NOT_COORDINATOR;
  session timeout outside [group.min.session.timeout.ms, group.max.session.timeout.ms] ->
  INVALID_SESSION_TIMEOUT; group.max.size -> GROUP_MAX_SIZE_REACHED.
- KIP-394: a v4+ JoinGroup without member id gets MEMBER_ID_REQUIRED and a pending member id.
- KIP-345 static members: a known ``group.instance.id`` rejoining with a new member id replaces
  the old id (FENCED_INSTANCE_ID for the old one) without a rebalance when the group is Stable
  and the selected protocol would not change.
- The first rebalance of an Empty group waits ``group.initial.rebalance.delay.ms``, extended
  while new members keep arriving, up to the rebalance timeout (InitialDelayedJoin).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from broker.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinResult,
    MemberMetadata,
    SyncCallback,
    SyncResult,
)
from broker.coordinator.group.consumer_group_classic import ClassicMembers
from broker.coordinator.group.consumer_group_coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
)
from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker.coordinator.group.group_offset_manager import GroupOffsetManager
from broker.coordinator.group.rebalance import GroupRebalancer, join_result
from broker.coordinator.group.scheduler import Scheduler
from broker.coordinator.task_tracker import TaskTracker
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["GroupCoordinator", "GroupConfig"]

logger = logging.getLogger(__name__)

E = ErrorCode
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True, slots=True)
class JoinParams:
    """What a JoinGroup says about the joining member (besides its ids): client id and host,
    rebalance and session timeouts (ms), protocol type and ``(name, metadata)`` protocols."""

    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Broker keys: group.min/max.session.timeout.ms, group.initial.rebalance.delay.ms,
    group.max.size, offsets.retention.minutes (as ms), offsets.retention.check.interval.ms."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    #: KIP-848: group.consumer.assignors / group.consumer.max.size / group.consumer.session.timeout.ms
    consumer: ConsumerGroupConfig = ConsumerGroupConfig()
    consumer_session_timeout_ms: int = 45000


class GroupCoordinator:
    """Args: ``manager`` (cache + persistence), ``scheduler`` (clock + timers), ``config``."""

    def __init__(self, manager: GroupMetadataManager, scheduler: Scheduler, config: GroupConfig) -> None:
        self.manager = manager
        self.scheduler = scheduler
        self.config = config
        self.active = False
        self._tasks = TaskTracker("group coordinator")
        #: join/sync phases, member removal, heartbeats and session expiry.
        self.rebalance = GroupRebalancer(manager, scheduler, config, self.spawn)
        #: OffsetCommit/OffsetFetch/ListGroups/DescribeGroups/DeleteGroups/OffsetDelete, expiration.
        self.offsets = GroupOffsetManager(self, manager, scheduler, config)
        #: KIP-848 consumer groups: ConsumerGroupHeartbeat / ConsumerGroupDescribe and their timers.
        self.consumer = ConsumerGroupCoordinator(self, manager, scheduler, config.consumer, self.spawn)
        #: classic members in consumer groups (KIP-848 online upgrade and mixed groups)
        self.consumer.classic = self.mixed = ClassicMembers(self.consumer, self.rebalance)

    # -- lifecycle ------------------------------------------------------------------------------
    def startup(self) -> None:
        self.active = True

    def shutdown(self) -> None:
        self.active = False
        for partition in list(self.manager.owned_partitions | self.manager.loading_partitions):
            self.manager.unload_partition(partition, self._on_group_unloaded)
        self._tasks.cancel_all()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` in the background until it ends or the coordinator shuts down."""
        return self._tasks.spawn(coro)

    # -- validation -----------------------------------------------------------------------------
    def validate_group_status(self, group_id: str | None, allow_empty_id: bool = False) -> int:
        """Kafka's ``validateGroupStatus``: 0 or the error code."""
        if group_id is None or (not group_id and not allow_empty_id):
            return int(E.invalid_group_id)
        if not self.active:
            return int(E.coordinator_not_available)
        if self.manager.is_group_loading(group_id):
            return int(E.coordinator_load_in_progress)
        if not self.manager.is_group_local(group_id):
            return int(E.not_coordinator)
        return 0

    @staticmethod
    def validate_current_member(group: GroupMetadata, member_id: str, instance_id: str | None) -> int:
        if group.is_static_member_fenced(member_id, instance_id):
            return int(E.fenced_instance_id)
        if not group.has(member_id):
            return int(E.unknown_member_id)
        return 0

    # -- JoinGroup --------------------------------------------------------------------------------
    def handle_join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        callback: JoinCallback,
    ) -> None:
        """Handle one JoinGroup; ``callback`` is called (now or when the rebalance completes)."""
        error = self.validate_group_status(group_id)
        if error:
            callback(JoinResult(member_id, error))
            return
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            callback(JoinResult(member_id, int(E.invalid_session_timeout)))
            return
        is_unknown = member_id == ""
        group = self.manager.get_or_create_group(group_id, create=is_unknown)
        if group is None:
            callback(JoinResult(member_id, int(E.unknown_member_id)))
            return
        if group.consumer is not None:
            if group.consumer.members:  # a classic member of a consumer group (KIP-848 mixed group)
                self.mixed.join_and_answer(
                    group,
                    member_id,
                    group_instance_id,
                    require_known_member_id,
                    client_id,
                    client_host,
                    rebalance_timeout_ms,
                    session_timeout_ms,
                    protocol_type,
                    protocols,
                    callback,
                )
                return
            self.mixed.convert_empty_consumer_group(group)
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            group.pending_members.discard(member_id)
            callback(JoinResult("" if is_unknown else member_id, int(E.group_max_size_reached)))
            return
        join = JoinParams(
            client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols
        )
        if is_unknown:
            self._do_new_member_join(group, group_instance_id, require_known_member_id, join, callback)
        else:
            self._do_current_member_join(group, member_id, group_instance_id, join, callback)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance.try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        if group.is_state(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_state(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return (member is not None and member.awaiting_join is not None) or (
                group.num_awaiting_join < self.config.max_size
            )
        return group.has(member_id) or len(group.members) < self.config.max_size

    def _do_new_member_join(
        self,
        group: GroupMetadata,
        instance_id: str | None,
        require_known_member_id: bool,
        join: JoinParams,
        callback: JoinCallback,
    ) -> None:
        error = self._check_joinable(group, join)
        if error:
            callback(JoinResult("", error))
            return
        new_member_id = group.generate_member_id(join.client_id, instance_id)
        if instance_id is not None:
            old_member_id = group.current_static_member_id(instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, join, callback)
                return
        elif require_known_member_id:
            # KIP-394: hand out the id; the client rejoins with it before the session timeout.
            group.pending_members.add(new_member_id)
            self.rebalance.schedule_heartbeat_expiration(
                group, new_member_id, join.session_timeout_ms, pending=True
            )
            callback(JoinResult(new_member_id, int(E.member_id_required)))
            return
        self._add_member_and_rebalance(group, new_member_id, instance_id, join, callback)

    @staticmethod
    def _check_joinable(group: GroupMetadata, join: JoinParams) -> int:
        """0, or COORDINATOR_NOT_AVAILABLE (group Dead) / INCONSISTENT_GROUP_PROTOCOL."""
        if group.is_state(GroupState.DEAD):
            return int(E.coordinator_not_available)
        if not group.supports_protocols(join.protocol_type, join.protocols):
            return int(E.inconsistent_group_protocol)
        return 0

    def _do_current_member_join(
        self,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        join: JoinParams,
        callback: JoinCallback,
    ) -> None:
        error = self._check_joinable(group, join)
        if error:
            callback(JoinResult(member_id, error))
            return
        if group.is_pending_member(member_id):
            if instance_id is not None:
                callback(JoinResult(member_id, int(E.unknown_member_id)))
                return
            self._add_member_and_rebalance(group, member_id, None, join, callback)
            return
        error = self.validate_current_member(group, member_id, instance_id)
        if error:
            callback(JoinResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, join, callback)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(join.protocols):
                # a retried JoinGroup of the current generation: answer with its state again
                callback(join_result(group, member, leader_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, join, callback)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(join.protocols):
                # the leader rejoining forces a rebalance (e.g. new topics matched its pattern)
                self._update_member_and_rebalance(group, member, join, callback)
            else:
                callback(join_result(group, member, leader_members=False))
        else:
            callback(JoinResult(member_id, int(E.unknown_member_id)))

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        join: JoinParams,
        callback: JoinCallback,
    ) -> None:
        member = MemberMetadata(
            member_id,
            instance_id,
            join.client_id,
            join.client_host,
            join.rebalance_timeout_ms,
            join.session_timeout_ms,
            join.protocol_type,
            join.protocols,
        )
        member.is_new = True
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # new members can't heartbeat yet: time out their parked JoinGroup instead
        self.rebalance.complete_and_schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self.rebalance.maybe_prepare_rebalance(group, f"adding new member {member_id}")

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        join: JoinParams,
        callback: JoinCallback,
    ) -> None:
        group.update_member(
            member, join.protocols, join.rebalance_timeout_ms, join.session_timeout_ms, callback
        )
        self.rebalance.maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        join: JoinParams,
        callback: JoinCallback,
    ) -> None:
        protocols = join.protocols
        rebalance_timeout_ms, session_timeout_ms = join.rebalance_timeout_ms, join.session_timeout_ms
        old = group.get(old_member_id)
        instance_id = old.group_instance_id
        if instance_id is None:  # only a static member is replaced under its group.instance.id
            raise RuntimeError(f"member {old_member_id} of group {group.group_id} is not static")
        self.rebalance.cancel_heartbeat(group, old_member_id)
        old_protocols = list(old.protocols)
        old_rebalance, old_session = old.rebalance_timeout_ms, old.session_timeout_ms
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.rebalance.complete_and_schedule_heartbeat(group, member)
        state = group.state
        if state is GroupState.STABLE:
            group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, None)
            if group.protocol_name == group.select_protocol():
                # KIP-345: no rebalance; persist the new member id, then answer.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                generation = group.generation_id

                async def persist() -> None:
                    error = await self.manager.store_group(group, assignment)
                    if error:
                        logger.warning(
                            "storing static member %s of group %s failed: %d",
                            instance_id,
                            group.group_id,
                            error,
                        )
                        if group.static_members.get(instance_id) == new_member_id:
                            restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
                            group.update_member(restored, old_protocols, old_rebalance, old_session, None)
                        callback(JoinResult(new_member_id, error))
                        return
                    # KIP-814: a static leader gets the members but must not re-assign
                    is_leader = group.is_leader(new_member_id)
                    callback(
                        JoinResult(
                            new_member_id,
                            0,
                            generation,
                            group.protocol_type,
                            group.protocol_name,
                            group.leader_id or "",
                            group.current_member_metadata() if is_leader else [],
                            skip_assignment=is_leader,
                        )
                    )

                self.spawn(persist())
            else:
                group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
                self.rebalance.maybe_prepare_rebalance(
                    group, f"static member {instance_id} changed protocols"
                )
        else:
            group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
            if state is GroupState.COMPLETING_REBALANCE:
                self.rebalance.prepare_rebalance(group, f"updating static member {instance_id}")

    # -- SyncGroup --------------------------------------------------------------------------------
    def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
        callback: SyncCallback,
    ) -> None:
        error = self.validate_group_status(group_id)
        if error == E.coordinator_load_in_progress:
            error = int(E.rebalance_in_progress)  # state lost: make the member rejoin
        if error:
            callback(SyncResult(error))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(SyncResult(int(E.unknown_member_id)))
            return
        if group.is_state(GroupState.DEAD):
            callback(SyncResult(int(E.coordinator_not_available)))
            return
        if group.consumer is not None and group.consumer.members:
            callback(
                self.mixed.sync(
                    group.consumer, member_id, group_instance_id, generation_id, protocol_type, protocol_name
                )
            )
            return
        error = self.validate_current_member(group, member_id, group_instance_id)
        if not error and generation_id != group.generation_id:
            error = int(E.illegal_generation)
        if not error and protocol_type is not None and group.protocol_type != protocol_type:
            error = int(E.inconsistent_group_protocol)
        if not error and protocol_name is not None and group.protocol_name != protocol_name:
            error = int(E.inconsistent_group_protocol)
        if error:
            callback(SyncResult(error))
            return
        if group.is_state(GroupState.EMPTY):
            callback(SyncResult(int(E.unknown_member_id)))
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            callback(SyncResult(int(E.rebalance_in_progress)))
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            member = group.get(member_id)
            previous, member.awaiting_sync = member.awaiting_sync, callback
            if previous is not None and previous is not callback:
                previous(SyncResult(int(E.rebalance_in_progress)))  # a retried SyncGroup replaces it
            group.pending_sync_members.discard(member_id)
            if group.is_leader(member_id):
                full = {m: assignments.get(m, b"") for m in group.members}
                self.spawn(self.rebalance.store_assignment(group, generation_id, full))
        else:  # Stable
            group.pending_sync_members.discard(member_id)
            member = group.get(member_id)
            callback(SyncResult(0, member.assignment, group.protocol_type, group.protocol_name))
            self.rebalance.complete_and_schedule_heartbeat(group, member)

    # -- Heartbeat --------------------------------------------------------------------------------
    def handle_heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> int:
        error = self.validate_group_status(group_id)
        if error == E.coordinator_load_in_progress:
            return 0  # the group is still loading: answer blindly (as Kafka)
        if error:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return int(E.unknown_member_id)
        if group.is_state(GroupState.DEAD):
            return int(E.coordinator_not_available)
        if group.consumer is not None and group.consumer.members:
            return self.mixed.heartbeat(group.consumer, member_id, group_instance_id, generation_id)
        error = self.validate_current_member(group, member_id, group_instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return int(E.illegal_generation)
        if group.is_state(GroupState.EMPTY):
            return int(E.unknown_member_id)
        self.rebalance.complete_and_schedule_heartbeat(group, group.get(member_id))
        if group.is_state(GroupState.PREPARING_REBALANCE):
            return int(E.rebalance_in_progress)
        return 0

    # -- LeaveGroup -------------------------------------------------------------------------------
    def handle_leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """(top-level error, [(member id, instance id, error)]) for ``members``."""
        error = self.validate_group_status(group_id)
        if error:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return 0, [(m, i, int(E.unknown_member_id)) for m, i in members]
        if group.is_state(GroupState.DEAD):
            return int(E.coordinator_not_available), []
        if group.consumer is not None and group.consumer.members:
            left, records = self.mixed.leave(group.consumer, members)
            if records:
                self.spawn(self.manager.append_records(group.group_id, records))
            return 0, left
        results: list[tuple[str, str | None, int]] = []
        for member_id, instance_id in members:
            if member_id == "":
                current = group.current_static_member_id(instance_id)
                if current is None:
                    results.append((member_id, instance_id, int(E.unknown_member_id)))
                else:
                    self.rebalance.remove_member_and_update_group(
                        group, group.get(current), "removed by instance id"
                    )
                    results.append((member_id, instance_id, 0))
            elif group.is_pending_member(member_id):
                self.rebalance.remove_pending_member(group, member_id)
                results.append((member_id, instance_id, 0))
            else:
                error = self.validate_current_member(group, member_id, instance_id)
                if not error:
                    self.rebalance.remove_member_and_update_group(group, group.get(member_id), "member left")
                results.append((member_id, instance_id, error))
        return 0, results

    # -- GroupMembership (for the offset manager) ---------------------------------------------------
    def complete_and_schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        """A member's commit counts as its heartbeat (Kafka's ``completeAndScheduleNextHeartbeatExpiration``)."""
        self.rebalance.complete_and_schedule_heartbeat(group, member, timeout_ms)

    # -- partition leadership ------------------------------------------------------------------------
    def on_elected(self, partition: int, epoch: int, log: Any) -> asyncio.Task[Any] | None:
        """Become coordinator of ``__consumer_offsets-partition``: load it (groups answer
        COORDINATOR_LOAD_IN_PROGRESS until done). Returns the load task."""
        if (
            partition in self.manager.owned_partitions
            and self.manager.partition_epochs.get(partition) == epoch
        ):
            return None
        if partition in self.manager.owned_partitions:
            self.manager.unload_partition(partition, self._on_group_unloaded)
        self.manager.begin_loading(partition, epoch)
        return self.spawn(self.manager.load_partition(partition, epoch, log, self._on_group_loaded))

    def on_resigned(self, partition: int) -> None:
        """Stop coordinating the groups of ``partition`` (NOT_COORDINATOR afterwards)."""
        count = self.manager.unload_partition(partition, self._on_group_unloaded)
        if count:
            logger.info("unloaded %d group(s) of partition %d", count, partition)

    def complete_transaction(
        self, offsets_partition: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> int:
        """A COMMIT / ABORT marker of ``producer_id``'s transaction (epoch ``producer_epoch``) was
        written to ``__consumer_offsets-offsets_partition``: its pending TxnOffsetCommit offsets
        become visible or are dropped (Kafka's ``GroupCoordinator.onTransactionCompleted``; the
        epoch was checked by the partition's producer state). Returns how many offsets were
        pending; 0 when the partition is not coordinated here (it applies the marker on load)."""
        completed = self.manager.complete_transaction(offsets_partition, producer_id, committed)
        if completed:
            logger.debug(
                "%s %d transactional offset(s) of producer %d (epoch %d) in partition %d",
                "committed" if committed else "aborted",
                completed,
                producer_id,
                producer_epoch,
                offsets_partition,
            )
        return completed

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.consumer is not None:
            self.consumer.on_group_loaded(group.consumer, self.config.consumer_session_timeout_ms)
        for member in group.members.values():
            self.rebalance.complete_and_schedule_heartbeat(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.state = GroupState.DEAD
        self.rebalance.cancel_timer(group, "join_timer")
        self.rebalance.cancel_timer(group, "sync_timer")
        for member in group.members.values():
            self.rebalance.cancel_heartbeat(group, member.member_id)
            if previous is GroupState.PREPARING_REBALANCE:
                group.invoke_join_callback(member, JoinResult(member.member_id, int(E.not_coordinator)))
            group.invoke_sync_callback(member, SyncResult(int(E.not_coordinator)))
        for member_id in group.pending_members:
            self.rebalance.cancel_heartbeat(group, member_id)
        if group.consumer is not None:
            group.consumer.dead = True
            self.consumer.cancel_all_timers(group.consumer)
