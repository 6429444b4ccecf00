"""The classic-protocol group coordinator: JoinGroup / SyncGroup / Heartbeat / LeaveGroup and
session expiry (Kafka's ``GroupCoordinator.scala``, pre-KIP-848). Offsets and admin operations
live in :class:`~broker.coordinator.group.group_offset_manager.GroupOffsetManager`, which this
class owns (``offsets``) and serves through the ``GroupMembership`` interface; the join/sync
phases, member removal and session expiry in
:class:`~broker.coordinator.group.rebalance.GroupRebalancer` (``rebalance``), also owned;
JoinGroup's validation and member handling in
:class:`~broker.coordinator.group.classic_join.ClassicGroupJoin` (``join``).

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
    JoinResult,
    MemberMetadata,
    SyncCallback,
    SyncResult,
)
from broker.coordinator.group.classic_join import ClassicGroupJoin
from broker.coordinator.group.consumer_group_classic import ClassicMembers
from broker.coordinator.group.consumer_group_coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
)
from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker.coordinator.group.group_offset_manager import GroupOffsetManager
from broker.coordinator.group.rebalance import GroupRebalancer
from broker.coordinator.group.scheduler import Scheduler
from broker.coordinator.task_tracker import TaskTracker
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["GroupCoordinator", "GroupConfig"]

logger = logging.getLogger(__name__)

E = ErrorCode
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


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
        #: JoinGroup of classic groups
        self.join = ClassicGroupJoin(self)

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
