"""State of one KIP-848 consumer group (Kafka's ``ConsumerGroup``).

The group epoch is bumped whenever membership or subscriptions (or the partition counts of the
subscribed topics) change; the target assignment is recomputed when the group epoch is ahead of
the target assignment epoch; each member then reconciles towards its target at its own pace
(:mod:`~broker.coordinator.group.current_assignment_builder`). Pure data, no I/O, no timers.

States (``ConsumerGroupState``, as Kafka's ``ConsumerGroup.ConsumerGroupState``): Empty (no
members), Assigning (group epoch ahead of the assignment epoch), Reconciling (a member not yet
at the assignment epoch or not Stable), Stable; Dead once deleted or unloaded.
"""

from __future__ import annotations

import enum
import re
import uuid
from collections.abc import Mapping

from broker.coordinator.group.consumer_group_member import Assignment, ConsumerGroupMember, MemberState

__all__ = ["ConsumerGroup", "ConsumerGroupState", "compile_regex"]


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


def compile_regex(pattern: str) -> re.Pattern[str]:
    """KIP-848 evaluates ``subscribed_topic_regex`` with RE2/J on the broker; Python's ``re`` is
    used here (same syntax for the patterns clients send: character classes, alternation,
    quantifiers; ``re`` also accepts back-references and look-arounds RE2 refuses). Matches the
    whole topic name, as Java's ``Pattern.matcher(topic).matches()``.

    Raises:
        re.error: an invalid pattern (INVALID_REGULAR_EXPRESSION).
    """
    return re.compile(pattern)


class ConsumerGroup:
    """One consumer group.

    Attributes:
        group_epoch / assignment_epoch: Kafka's group epoch and target assignment epoch.
        members: member id -> :class:`ConsumerGroupMember`.
        static_members: instance id -> member id.
        target_assignment: member id -> its target partitions.
        subscription_metadata: subscribed topic name -> (topic id, partition count), the
            metadata the current group epoch was computed with (ConsumerGroupPartitionMetadata).
        partition_epochs: (topic id, partition) -> epoch of the member owning it (assigned or
            pending revocation): Kafka's ``currentPartitionEpoch``.
    """

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}
        self.target_assignment: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, tuple[uuid.UUID, int]] = {}
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.dead = False
        #: regex -> (the image's topics mapping it was resolved against, matching names)
        self.resolved_regexes: dict[str, tuple[object, frozenset[str]]] = {}
        #: the image topics mapping ``subscription_metadata`` was last checked against
        self.metadata_checked_for: object = None
        #: member id -> timer handles owned by the coordinator (session / rebalance timeouts)
        self.session_timers: dict[str, object] = {}
        self.rebalance_timers: dict[str, object] = {}

    def __repr__(self) -> str:
        return f"ConsumerGroup({self.group_id!r}, {self.state.value}, epoch={self.group_epoch}, members={list(self.members)})"

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    # -- members ------------------------------------------------------------------------------
    def update_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, keeping partition epochs and static members in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tp in member.owned_partitions():
            self.partition_epochs[tp] = member.member_epoch

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        self.target_assignment.pop(member_id, None)
        return member

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in member.owned_partitions():
            if self.partition_epochs.get(tp) == member.member_epoch:
                del self.partition_epochs[tp]

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    # -- subscriptions ----------------------------------------------------------------------------
    def subscribed_topic_names(self, topics: Mapping[str, object]) -> set[str]:
        """Names subscribed by any member: its topic names plus the matches of its regex among
        ``topics`` (the image's topic mapping; regex matches are cached per mapping object,
        which the image replaces when topics change)."""
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                names.update(self.resolve_regex(member.subscribed_topic_regex, topics))
        return names

    def resolve_regex(self, pattern: str, topics: Mapping[str, object]) -> frozenset[str]:
        cached = self.resolved_regexes.get(pattern)
        if cached is not None and cached[0] is topics:
            return cached[1]
        compiled = compile_regex(pattern)
        matched = frozenset(t for t in topics if not t.startswith("__") and compiled.fullmatch(t))
        self.resolved_regexes[pattern] = (topics, matched)
        return matched

    def member_topic_names(self, member: ConsumerGroupMember, topics: Mapping[str, object]) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            names.update(self.resolve_regex(member.subscribed_topic_regex, topics))
        return names

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for, else ``default`` (Kafka's
        ``ConsumerGroup.computePreferredServerAssignor``)."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor is not None:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return default
        return max(sorted(counts), key=lambda name: counts[name])
