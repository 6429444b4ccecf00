"""Share groups' membership and assignment on the group coordinator (KIP-932; Kafka's
``GroupMetadataManager.shareGroupHeartbeat`` and ``ShareGroup``).

A member joins with member epoch 0, heartbeats with its current epoch and leaves with -1. Every
join, leave, expiry or subscription change bumps the group epoch and recomputes the target
assignment with :func:`simple_assign` (Kafka's share ``SimpleAssignor``); share groups need no
revocation (several members may read one partition), so a member takes its new assignment and
the group epoch at its next heartbeat. A member that sends no heartbeat for
``group.share.session.timeout.ms`` is removed when the group is next touched.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafkalite.protocol.errors import ErrorCode

__all__ = [
    "ShareGroupCoordinator",
    "ShareGroup",
    "ShareMember",
    "ShareHeartbeatResult",
    "simple_assign",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "TopicTable",
]

LEAVE_GROUP_MEMBER_EPOCH = -1

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(slots=True)
class ShareMember:
    """One member: epoch, subscription, assignment and liveness."""

    member_id: str
    member_epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: Assignment = field(default_factory=dict)
    deadline_ms: int = 0


@dataclass(slots=True)
class ShareGroup:
    """A share group: its epochs and members (``ShareGroup.java``)."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """``ShareGroupState``: Empty or Stable (no reconciliation, so never Assigning)."""
        return "Stable" if self.members else "Empty"


@dataclass(frozen=True, slots=True)
class ShareHeartbeatResult:
    """ShareGroupHeartbeat answer: error, member id / epoch, interval, assignment (None = unchanged)."""

    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def simple_assign(
    members: Mapping[str, tuple[str, ...]], topics: Mapping[str, tuple[uuid.UUID, int]]
) -> dict[str, Assignment]:
    """Share groups' server-side assignment (Kafka's share ``SimpleAssignor``): per topic, the
    members subscribed to it sorted by id; with at least as many partitions as members, partition
    i goes to member i mod M, else member j reads partition j mod P (a partition is then shared).
    ``members``: member id -> subscribed names; ``topics``: name -> (topic id, partition count).
    Costs O(members + partitions) per topic."""
    out: dict[str, Assignment] = {m: {} for m in members}
    names = sorted({n for subscribed in members.values() for n in subscribed})
    for name in names:
        if name not in topics:
            continue
        topic_id, count = topics[name]
        subscribers = sorted(m for m, subscribed in members.items() if name in subscribed)
        if not subscribers or count <= 0:
            continue
        shares: dict[str, set[int]] = {m: set() for m in subscribers}
        if count >= len(subscribers):
            for p in range(count):
                shares[subscribers[p % len(subscribers)]].add(p)
        else:
            for j, m in enumerate(subscribers):
                shares[m].add(j % count)
        for m, parts in shares.items():
            out[m][topic_id] = frozenset(parts)
    return out


class ShareGroupCoordinator:
    """Share groups of this group coordinator (in memory; see the module docstring).

    Args:
        now_ms: the clock.
        session_timeout_ms / heartbeat_interval_ms: ``group.share.session.timeout.ms`` and
            ``group.share.heartbeat.interval.ms``.
        max_size: ``group.share.max.size`` (members per group).
    """

    def __init__(
        self,
        now_ms: Callable[[], int],
        *,
        session_timeout_ms: int = 45_000,
        heartbeat_interval_ms: int = 5_000,
        max_size: int = 200,
    ) -> None:
        self.now_ms = now_ms
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_size = max_size
        self.groups: dict[str, ShareGroup] = {}

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        subscribed_topic_names: tuple[str, ...] | None,
        topics: Mapping[str, tuple[uuid.UUID, int]],
        *,
        rack_id: str | None = None,
        client_id: str = "",
        client_host: str = "",
    ) -> ShareHeartbeatResult:
        """One ShareGroupHeartbeat. ``topics``: name -> (topic id, partition count) of the image.

        Errors (in the result): INVALID_REQUEST (no member id, or a join without a
        subscription), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED."""
        if not member_id:
            return ShareHeartbeatResult(int(ErrorCode.invalid_request), "MemberId can't be empty.")
        now = self.now_ms()
        group = self.groups.get(group_id)
        if group is not None:
            self._expire(group, topics, now)
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if group is not None and group.members.pop(member_id, None) is not None:
                self._rebalance(group, topics)
            return ShareHeartbeatResult(0, None, member_id, LEAVE_GROUP_MEMBER_EPOCH)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
        member = group.members.get(member_id)
        if member is None:
            if member_epoch != 0:
                return ShareHeartbeatResult(
                    int(ErrorCode.unknown_member_id),
                    f"Member {member_id} is not a member of group {group_id}.",
                )
            if not subscribed_topic_names:
                return ShareHeartbeatResult(
                    int(ErrorCode.invalid_request), "SubscribedTopicNames must be set in first request."
                )
            if len(group.members) >= self.max_size:
                return ShareHeartbeatResult(
                    int(ErrorCode.group_max_size_reached),
                    f"The share group has reached its maximum capacity of {self.max_size} members.",
                )
            member = group.members[member_id] = ShareMember(
                member_id, client_id=client_id, client_host=client_host
            )
        elif member_epoch not in (0, member.member_epoch):
            return ShareHeartbeatResult(
                int(ErrorCode.fenced_member_epoch),
                f"The share group member has a smaller member epoch ({member_epoch}) than the one known by the group coordinator ({member.member_epoch}).",
            )
        member.deadline_ms = now + self.session_timeout_ms
        member.rack_id = rack_id if rack_id is not None else member.rack_id
        changed = member_epoch == 0
        if (
            subscribed_topic_names is not None
            and tuple(sorted(subscribed_topic_names)) != member.subscribed_topic_names
        ):
            member.subscribed_topic_names = tuple(sorted(subscribed_topic_names))
            changed = True
        if changed or self._metadata_changed(group, topics):
            self._rebalance(group, topics)
        send_assignment = member_epoch != group.group_epoch
        member.member_epoch = group.group_epoch
        return ShareHeartbeatResult(
            0,
            None,
            member_id,
            member.member_epoch,
            self.heartbeat_interval_ms,
            dict(member.assignment) if send_assignment else None,
        )

    def delete_group(self, group_id: str, topics: Mapping[str, tuple[uuid.UUID, int]]) -> int | None:
        """DeleteGroups of a share group: None if ``group_id`` is no share group here, else 0
        (deleted) or NON_EMPTY_GROUP (members left after expiring the silent ones)."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        self._expire(group, topics, self.now_ms())
        if group.members:
            return int(ErrorCode.non_empty_group)
        del self.groups[group_id]
        return 0

    def describe(self, group_id: str) -> ShareGroup | None:
        group = self.groups.get(group_id)
        return group

    def _expire(self, group: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]], now: int) -> None:
        expired = [m for m, member in group.members.items() if member.deadline_ms <= now]
        for m in expired:
            del group.members[m]
        if expired:
            self._rebalance(group, topics)

    def _metadata_changed(self, group: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]]) -> bool:
        """A subscribed topic appeared, vanished or grew since the last assignment."""
        wanted = simple_assign({m: x.subscribed_topic_names for m, x in group.members.items()}, topics)
        return any(wanted[m] != x.assignment for m, x in group.members.items())

    def _rebalance(self, group: ShareGroup, topics: Mapping[str, tuple[uuid.UUID, int]]) -> None:
        group.group_epoch += 1
        target = simple_assign({m: x.subscribed_topic_names for m, x in group.members.items()}, topics)
        for m, member in group.members.items():
            member.assignment = target[m]
        group.assignment_epoch = group.group_epoch


class TopicTable(Mapping[str, tuple[uuid.UUID, int]]):
    """The metadata image's topics seen as name -> (topic id, partition count), looked up by
    name only (an assignment costs the subscribed topics, not every topic of the cluster)."""

    __slots__ = ("_topics",)

    def __init__(self, image_topics: Mapping[str, Any]) -> None:
        self._topics = image_topics

    def __getitem__(self, name: str) -> tuple[uuid.UUID, int]:
        topic = self._topics[name]
        return topic.topic_id, topic.num_partitions

    def __contains__(self, name: object) -> bool:
        return name in self._topics

    def __iter__(self) -> Iterator[str]:
        return iter(self._topics)

    def __len__(self) -> int:
        return len(self._topics)
