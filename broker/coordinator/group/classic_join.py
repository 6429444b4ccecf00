"""JoinGroup of classic groups (Kafka's ``GroupCoordinator.handleJoinGroup`` /
``doNewMemberJoinGroup`` / ``doCurrentMemberJoinGroup`` / ``updateStaticMemberAndRebalance``,
in Kafka 4 ``GroupMetadataManager.classicGroupJoin``): validation, KIP-394 member ids, KIP-345
static members and adding or updating a member before the rebalance
(:class:`~broker.coordinator.group.rebalance.GroupRebalancer`) answers the join.
The rules are listed in :mod:`broker.coordinator.group.group_coordinator`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    JoinCallback,
    JoinResult,
    MemberMetadata,
)
from broker.coordinator.group.rebalance import join_result
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.coordinator.group.group_coordinator import GroupCoordinator

__all__ = ["ClassicGroupJoin", "JoinParams"]

logger = logging.getLogger(__name__)

E = ErrorCode


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


class ClassicGroupJoin:
    """JoinGroup for ``coordinator``'s classic groups (its manager, config, rebalancer, mixed
    consumer groups' classic members and background tasks)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self._coordinator = coordinator
        self.manager = coordinator.manager
        self.config = coordinator.config
        self.rebalance = coordinator.rebalance
        self.mixed = coordinator.mixed
        self.spawn = coordinator.spawn

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
        error = self._coordinator.validate_group_status(group_id)
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
        error = self._coordinator.validate_current_member(group, member_id, instance_id)
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
