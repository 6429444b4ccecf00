"""One member of a KIP-848 consumer group (Kafka's ``ConsumerGroupMember`` and ``MemberState``).

Immutable: every change builds a new member (``dataclasses.replace``), so the coordinator can
compare the member before and after a heartbeat to know which records to write. Assignments are
``{topic id: frozenset(partition)}``.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field, replace

__all__ = ["MemberState", "ConsumerGroupMember", "Assignment", "LEAVE_GROUP_MEMBER_EPOCH"]

#: topic id -> partitions
Assignment = dict[uuid.UUID, frozenset[int]]

#: ConsumerGroupHeartbeat member epochs with a meaning (Kafka's ``ConsumerGroupHeartbeatRequest``)
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState`` (the byte in ConsumerGroupCurrentMemberAssignmentValue)."""

    STABLE = 0
    #: waits for the member to revoke ``partitions_pending_revocation``
    UNREVOKED_PARTITIONS = 1
    #: some target partitions are still owned by other members
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    """A member: ids, what it subscribes to, and its current assignment.

    Attributes:
        member_epoch: the epoch the member must send; ``previous_member_epoch`` is accepted too
            when the last bump may not have reached it (Kafka's ``throwIfMemberEpochIsInvalid``).
        assigned_partitions: partitions the member owns (or may own) now.
        partitions_pending_revocation: partitions it must give up before the next epoch.
        rebalance_timeout_ms: how long it may take to revoke partitions.
    """

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    #: a member that joined with JoinGroup (classic protocol): its session timeout and its
    #: ``(protocol name, metadata)`` list (Kafka's ``ClassicMemberMetadata``); None otherwise
    classic_session_timeout_ms: int | None = None
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_protocols is not None

    def owned_partitions(self) -> set[tuple[uuid.UUID, int]]:
        """Assigned and pending-revocation partitions as (topic id, partition)."""
        out = {(t, p) for t, parts in self.assigned_partitions.items() for p in parts}
        out.update((t, p) for t, parts in self.partitions_pending_revocation.items() for p in parts)
        return out

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def with_epoch(self, member_epoch: int) -> ConsumerGroupMember:
        """Kafka's ``Builder.updateMemberEpoch``: the current epoch becomes the previous one."""
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=member_epoch)
