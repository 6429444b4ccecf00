"""``GroupRebalancer``: the rebalance mechanics of the classic group coordinator, an object the
:class:`~broker.coordinator.group.group_coordinator.GroupCoordinator` owns (``rebalance``): the
join phase (Kafka's ``InitialDelayedJoin`` / ``DelayedJoin`` and ``onCompleteJoin``), the sync
deadline (``DelayedSync``), storing the leader's assignment, member removal, and heartbeat /
session expiry (``DelayedHeartbeat``).

Timers come from the coordinator's ``Scheduler``; every callback re-checks the group state
(the timer may fire after the group moved on).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from broker.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.coordinator.group.group_coordinator import GroupConfig
    from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker.coordinator.group.scheduler import Scheduler

__all__ = ["GroupRebalancer", "join_result"]

logger = logging.getLogger(__name__)

E = ErrorCode


def join_result(group: GroupMetadata, member: MemberMetadata, *, leader_members: bool) -> JoinResult:
    """The JoinGroup answer for ``member`` of the current generation (the leader also gets every
    member's metadata)."""
    return JoinResult(
        member.member_id,
        0,
        group.generation_id,
        group.protocol_type,
        group.protocol_name,
        group.leader_id or "",
        group.current_member_metadata() if leader_members else [],
    )


class GroupRebalancer:
    """Rebalances and member sessions of the local groups (see the module docstring).

    Args:
        manager: the group cache and persistence.
        scheduler: clock and timers.
        config: ``group.*`` settings.
        spawn: runs a coroutine as a task the coordinator tracks (persisting a group).
    """

    def __init__(
        self,
        manager: GroupMetadataManager,
        scheduler: Scheduler,
        config: GroupConfig,
        spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
    ) -> None:
        self.manager = manager
        self.scheduler = scheduler
        self.config = config
        self.spawn = spawn
        self._heartbeat_timers: dict[tuple[str, str], Any] = {}

    # -- rebalance --------------------------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, int(E.rebalance_in_progress))
        self.cancel_timer(group, "sync_timer")
        was_empty = group.is_state(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.scheduler.now_ms())
        logger.info(
            "preparing to rebalance group %s in state PreparingRebalance with old generation %d (reason: %s)",
            group.group_id,
            group.generation_id,
            reason,
        )
        self.cancel_timer(group, "join_timer")
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_join(group, delay, remaining)
        else:
            group.join_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms(), lambda: self._on_join_deadline(group)
            )
            self.try_complete_join(group)

    def _schedule_initial_join(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        def fire() -> None:
            group.join_timer = None
            if not group.is_state(GroupState.PREPARING_REBALANCE):
                return
            if group.new_member_added and remaining_ms > 0:
                group.new_member_added = False
                delay = min(self.config.initial_rebalance_delay_ms, remaining_ms)
                self._schedule_initial_join(group, delay, max(remaining_ms - delay, 0))
            else:
                self._complete_join(group)

        group.join_timer = self.scheduler.call_later(delay_ms, fire)
        group.initial_join_pending = True

    def try_complete_join(self, group: GroupMetadata) -> None:
        """Complete the join phase early when every member rejoined (DelayedJoin.tryComplete);
        the initial delay of a new group only completes on its timer."""
        if group.initial_join_pending and group.join_timer is not None:
            return
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    def _on_join_deadline(self, group: GroupMetadata) -> None:
        group.join_timer = None
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's ``onCompleteJoin``: drop dynamic members that didn't rejoin, start the next
        generation, answer every parked JoinGroup (the leader gets the members' metadata)."""
        self.cancel_timer(group, "join_timer")
        group.initial_join_pending = False
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                logger.info(
                    "group %s: removing member %s that did not rejoin", group.group_id, member.member_id
                )
                self.cancel_heartbeat(group, member.member_id)
                group.remove(member.member_id)
        if group.is_state(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined yet (only static members left): wait another rebalance timeout
            group.join_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms(), lambda: self._on_join_deadline(group)
            )
            return
        group.init_next_generation(self.scheduler.now_ms())
        if group.is_state(GroupState.EMPTY):
            generation = group.generation_id

            async def persist_empty() -> None:
                error = await self.manager.store_group(group, {})
                if error:
                    logger.warning(
                        "storing empty group %s (generation %d) failed: %d", group.group_id, generation, error
                    )

            self.spawn(persist_empty())
            return
        logger.info(
            "group %s: stabilizing generation %d with %d member(s), protocol %s, leader %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        for member in list(group.members.values()):
            group.invoke_join_callback(
                member, join_result(group, member, leader_members=group.is_leader(member.member_id))
            )
            self.complete_and_schedule_heartbeat(group, member)
            member.is_new = False
        generation = group.generation_id
        group.sync_timer = self.scheduler.call_later(
            group.rebalance_timeout_ms(), lambda: self._on_sync_deadline(group, generation)
        )

    def _on_sync_deadline(self, group: GroupMetadata, generation: int) -> None:
        """Kafka's DelayedSync expiration: members that never sent SyncGroup are removed."""
        group.sync_timer = None
        if generation != group.generation_id or not group.is_state(
            GroupState.COMPLETING_REBALANCE, GroupState.STABLE
        ):
            return
        missing = [m for m in group.pending_sync_members if group.has(m)]
        if not missing:
            return
        for member_id in missing:
            self.cancel_heartbeat(group, member_id)
            group.remove(member_id)
        self.prepare_rebalance(group, f"members {missing} did not sync in time")

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            result = SyncResult(
                error, b"" if error else member.assignment, group.protocol_type, group.protocol_name
            )
            if group.invoke_sync_callback(member, result):
                self.complete_and_schedule_heartbeat(group, member)

    async def store_assignment(
        self, group: GroupMetadata, generation: int, assignment: dict[str, bytes]
    ) -> None:
        error = await self.manager.store_group(group, assignment)
        if not group.is_state(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation:
            return  # the group moved on while we were writing
        if error:
            self._reset_and_propagate_assignment_error(group, error)
            self.maybe_prepare_rebalance(group, f"storing the assignment failed with error {error}")
            return
        for member_id, data in assignment.items():
            if group.has(member_id):
                group.get(member_id).assignment = data
        self._propagate_assignment(group, 0)
        group.transition_to(GroupState.STABLE, self.scheduler.now_ms())
        logger.info("group %s: generation %d is stable", group.group_id, generation)

    # -- heartbeats / session expiry ----------------------------------------------------------------
    def complete_and_schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_satisfied = False
        self.schedule_heartbeat_expiration(group, member.member_id, timeout, pending=False)

    def schedule_heartbeat_expiration(
        self, group: GroupMetadata, member_id: str, timeout_ms: int, *, pending: bool
    ) -> None:
        key = (group.group_id, member_id)
        old = self._heartbeat_timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._heartbeat_timers[key] = self.scheduler.call_later(
            timeout_ms, lambda: self._on_heartbeat_expired(group, member_id, pending)
        )

    def cancel_heartbeat(self, group: GroupMetadata, member_id: str) -> None:
        timer = self._heartbeat_timers.pop((group.group_id, member_id), None)
        if timer is not None:
            timer.cancel()

    def _on_heartbeat_expired(self, group: GroupMetadata, member_id: str, pending: bool) -> None:
        self._heartbeat_timers.pop((group.group_id, member_id), None)
        if group.is_state(GroupState.DEAD) or self.manager.get_group(group.group_id) is not group:
            return
        if pending:
            if group.is_pending_member(member_id):
                logger.info("group %s: pending member %s expired", group.group_id, member_id)
                self.remove_pending_member(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self.remove_member_and_update_group(group, member, "session timeout expired")

    @staticmethod
    def cancel_timer(group: GroupMetadata, name: str) -> None:
        # getattr: one of the group's timer slots, by name
        timer = getattr(group, name)
        if timer is not None:
            timer.cancel()
            setattr(group, name, None)

    # -- member removal -----------------------------------------------------------------------------
    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        logger.info("group %s: removing member %s (%s)", group.group_id, member.member_id, reason)
        self.cancel_heartbeat(group, member.member_id)
        group.invoke_join_callback(member, JoinResult(member.member_id, int(E.unknown_member_id)))
        group.remove(member.member_id)
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)

    def remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_members.discard(member_id)
        self.cancel_heartbeat(group, member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)
