"""State of one classic-protocol group (Kafka's ``GroupMetadata`` and ``MemberMetadata``).

Pure data + state transitions, no I/O and no timers (the coordinator owns those). States and
legal transitions (``GroupState``):

    Empty ──join──> PreparingRebalance ──all joined / timeout──> CompletingRebalance
    CompletingRebalance ──leader's SyncGroup stored──> Stable
    Stable / CompletingRebalance ──join, leave, expiry──> PreparingRebalance
    PreparingRebalance ──no member left──> Empty;  any ──deleted / unloaded──> Dead
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_kafkalite.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_subscription_topics,
)
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.group_records import OffsetAndMetadata

if TYPE_CHECKING:
    from broker.coordinator.group.consumer_group import ConsumerGroup

__all__ = [
    "GroupState",
    "MemberMetadata",
    "GroupMetadata",
    "JoinResult",
    "SyncResult",
    "IllegalGroupStateError",
]


class IllegalGroupStateError(RuntimeError):
    """An illegal state transition (a coordinator bug, surfaced as UNKNOWN_SERVER_ERROR)."""


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(slots=True)
class JoinResult:
    """What a JoinGroup request is answered with (Kafka's ``JoinGroupResult``)."""

    member_id: str
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)  # (id, instance id, metadata)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    """What a SyncGroup request is answered with."""

    error: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]


@dataclass(eq=False, slots=True)
class MemberMetadata:
    """One member. ``protocols`` is the ordered [(name, metadata)] it supports; timeouts in ms.
    ``awaiting_join`` / ``awaiting_sync`` hold the pending response callbacks (a JoinGroup or
    SyncGroup parked until the rebalance step completes)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    is_new: bool = False
    heartbeat_satisfied: bool = False
    heartbeat_deadline_ms: int = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        """Distinct names (a JoinGroup may repeat one; counting it twice in the group's
        ``supported_protocols`` left no protocol common to all members: found by the fuzzer)."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise IllegalGroupStateError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols that is in ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise IllegalGroupStateError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return self.heartbeat_satisfied
        if self.awaiting_join is not None or self.awaiting_sync is not None:
            return True
        return self.heartbeat_satisfied


class GroupMetadata:
    """One group: members, generation, selected protocol, committed offsets.

    Attributes:
        group_id, state, generation_id, protocol_type (None until a member joined),
        protocol_name (selected protocol of the generation), leader_id, members (insertion
        ordered dict member id -> MemberMetadata), pending_members (KIP-394 member ids handed out
        with MEMBER_ID_REQUIRED, not joined yet), static_members (instance id -> member id),
        pending_sync_members (members of the generation that haven't synced yet),
        offsets ((topic, partition) -> OffsetAndMetadata), current_state_timestamp_ms,
        new_member_added (delays the initial rebalance, Kafka's InitialDelayedJoin).
    """

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.pending_members: set[str] = set()
        self.static_members: dict[str, str] = {}
        self.pending_sync_members: set[str] = set()
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        #: the log order of the record that set each ``offsets`` entry (a later record wins)
        self.offset_commit_order: dict[tuple[str, int], int] = {}
        #: TxnOffsetCommits awaiting their transaction's marker: producer id ->
        #: {partition: (offset, log order of its record)} (Kafka's pendingTransactionalOffsetCommits)
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], tuple[OffsetAndMetadata, int]]] = {}
        self.current_state_timestamp_ms = now_ms
        self.new_member_added = False
        self.initial_join_pending = False
        self.num_awaiting_join = 0
        self.supported_protocols: Counter[str] = Counter()
        # timers owned by the coordinator: asyncio handles, cancelled on transitions
        self.join_timer: Any = None
        self.sync_timer: Any = None
        #: the KIP-848 membership when this is a consumer group (classic members stay empty then)
        self.consumer: ConsumerGroup | None = None

    def has_pending_txn_offsets(self, tp: tuple[str, int]) -> bool:
        """Whether a TxnOffsetCommit for ``tp`` awaits its marker (KIP-447 UNSTABLE_OFFSET_COMMIT)."""
        return any(tp in pending for pending in self.pending_txn_offsets.values())

    def complete_pending_txn_offsets(self, producer_id: int, committed: bool) -> int:
        """The marker of ``producer_id``'s transaction arrived: on commit its offsets become
        visible, unless a commit written later in the log already set the partition (Kafka's
        ``completePendingTxnOffsetCommit``); on abort they are dropped. Returns how many were
        pending."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if committed:
            for tp, (value, order) in pending.items():
                if self.offset_commit_order.get(tp, -1) < order:
                    self.offsets[tp] = value
                    self.offset_commit_order[tp] = order
        return len(pending)

    def __repr__(self) -> str:
        return (
            f"GroupMetadata({self.group_id!r}, {self.state.value}, generation={self.generation_id}, "
            f"members={list(self.members)})"
        )

    # -- state ----------------------------------------------------------------------------------
    def is_state(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        """Move to ``target``; raises :class:`IllegalGroupStateError` for an illegal move."""
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalGroupStateError(
                f"group {self.group_id} should be in {[s.value for s in _VALID_PREVIOUS[target]]} "
                f"before moving to {target.value}, but is {self.state.value}"
            )
        self.state = target
        self.current_state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    # -- members --------------------------------------------------------------------------------
    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        """Kafka's ``clientId-UUID`` (``instanceId-UUID`` for static members)."""
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, callback: JoinCallback | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        member.awaiting_join = callback
        if callback is not None:
            self.num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols = +self.supported_protocols
        if member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        callback: JoinCallback | None,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        self.supported_protocols.update({name for name, _ in protocols})
        self.supported_protocols = +self.supported_protocols
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.awaiting_join
        if callback is not None and previous is None:
            self.num_awaiting_join += 1
        elif callback is None and previous is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = callback
        if previous is not None and previous is not callback:
            # a retried JoinGroup replaces the parked one: don't leave the old request hanging
            previous(JoinResult(member.member_id, int(ErrorCode.rebalance_in_progress)))

    def invoke_join_callback(self, member: MemberMetadata, result: JoinResult) -> None:
        callback = member.awaiting_join
        if callback is not None:
            member.awaiting_join = None
            self.num_awaiting_join -= 1
            callback(result)

    def invoke_sync_callback(self, member: MemberMetadata, result: SyncResult) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(result)
        return True

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        """Give the static member ``instance_id`` a new member id (KIP-345); the old id's parked
        join / sync is answered FENCED_INSTANCE_ID."""
        member = self.members.pop(old_member_id, None)
        if member is None:
            raise IllegalGroupStateError(f"static member {instance_id} ({old_member_id}) not in group")
        self.invoke_join_callback(member, JoinResult(old_member_id, ErrorCode.fenced_instance_id))
        self.invoke_sync_callback(member, SyncResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def current_static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that rejoined; False if none did."""
        if self.leader_id is not None and self.leader_id in self.members:
            if self.members[self.leader_id].awaiting_join is not None:
                return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ------------------------------------------------------------------------------
    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's ``supportsProtocols``: an empty group accepts any non-empty type and list; else
        the type must match and one protocol must be supported by every member."""
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in names
        )

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """The protocol supported by all members with the most first-choice votes (ties broken
        by the first voted, as Kafka's ``maxBy`` over an insertion-ordered vote list)."""
        if not self.members:
            raise IllegalGroupStateError("cannot select protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.protocol_name is None:
            raise IllegalGroupStateError(f"group {self.group_id} has no protocol selected")
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()
        ]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members = set(self.members)

    # -- offsets --------------------------------------------------------------------------------
    def has_offsets(self) -> bool:
        return bool(self.offsets)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, parsed from ConsumerProtocol subscriptions (None if
        the group is not a ``consumer`` group or a subscription cannot be parsed)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            try:
                topics.update(decode_subscription_topics(member.metadata(self.protocol_name)))
            except ConsumerProtocolError:
                return None
        return topics
