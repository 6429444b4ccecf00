"""Incremental reconciliation of one member towards the group's target assignment (Kafka's
``CurrentAssignmentBuilder``, KIP-848 "Member Reconciliation").

A partition moves in two steps: the member losing it is asked to revoke it (state
UNREVOKED_PARTITIONS, same epoch) and reports it gone in a later heartbeat; only then is it
free (its partition epoch is cleared) and the member gaining it receives it (the gaining member
waits in UNRELEASED_PARTITIONS meanwhile). A member reaching its target moves to the target
assignment epoch. Pure logic.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace

from broker.coordinator.group.consumer_group_member import Assignment, ConsumerGroupMember, MemberState

__all__ = ["reconcile", "FencedMemberEpochError"]

#: (topic id, partition) -> epoch of the member owning it, -1 when free
PartitionEpoch = Callable[[uuid.UUID, int], int]


class FencedMemberEpochError(Exception):
    """The member must drop all its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def _owns_any(owned: Iterable[tuple[uuid.UUID, Iterable[int]]] | None, partitions: Assignment) -> bool:
    """Kafka's ``ownsRevokedPartitions``: True when ``owned`` (the heartbeat's partitions, None =
    not sent) still holds one of ``partitions``."""
    if owned is None:
        return True
    for topic_id, parts in owned:
        pending = partitions.get(topic_id)
        if pending and any(p in pending for p in parts):
            return True
    return False


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: list[tuple[uuid.UUID, list[int]]] | None,
) -> ConsumerGroupMember:
    """The member after one reconciliation step (Kafka's ``CurrentAssignmentBuilder.build``).

    Args:
        member: the member now.
        target_epoch / target: the group's target assignment epoch and the member's target.
        partition_epoch: who owns a partition now (another member's epoch, or -1).
        owned: the partitions the heartbeat reports as owned, None when it did not send them.

    Raises:
        FencedMemberEpochError: the member is in an unknown state and still owns partitions.
    """
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, member.member_epoch + 1, target_epoch, target, partition_epoch, owned)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise FencedMemberEpochError("the member is in an unknown state: it must abandon its partitions")
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: PartitionEpoch,
    owned: list[tuple[uuid.UUID, list[int]]] | None,
) -> ConsumerGroupMember:
    """Kafka's ``computeNextAssignment``."""
    has_unreleased = False
    assigned: Assignment = {}
    revoking: Assignment = {}
    pending_assignment: Assignment = {}
    current = member.assigned_partitions
    for topic_id in set(target) | set(current):
        want = target.get(topic_id, frozenset())
        have = current.get(topic_id, frozenset())
        keep = have & want
        revoke = have - keep
        to_assign = want - keep
        free = frozenset(p for p in to_assign if partition_epoch(topic_id, p) == -1)
        if len(free) != len(to_assign):
            has_unreleased = True
        if keep:
            assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if free:
            pending_assignment[topic_id] = free
    if revoking and _owns_any(owned, revoking):
        return replace(
            member.with_epoch(member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned_partitions=assigned,
            partitions_pending_revocation=revoking,
        )
    for topic_id, parts in pending_assignment.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | parts
    new_state = MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE
    return replace(
        member.with_epoch(target_epoch),
        state=new_state,
        assigned_partitions=assigned,
        partitions_pending_revocation={},
    )
