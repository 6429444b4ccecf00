"""Server-side partition assignors of KIP-848 consumer groups (Kafka's ``ConsumerGroupPartitionAssignor``
implementations ``UniformAssignor`` and ``RangeAssignor``), selected per group by the members'
``server_assignor`` (``group.remote.assignor`` on the client) among the broker's
``group.consumer.assignors`` (the first is the default).

Both are pure functions of (members with their subscribed topic ids and current target
assignment, topic id -> partition count) -> target assignment; they cost O(partitions x
members subscribed) per computation, which happens once per group epoch bump, never per
heartbeat.

- ``uniform``: every subscribed partition to exactly one member, each member of a topic set
  within one partition of the others (balanced per the members able to take it), keeping as
  many of the current target partitions where they are as balance allows (sticky). Kafka
  splits homogeneous and heterogeneous subscriptions into two builders; this one algorithm
  covers both: keep valid current partitions up to each member's quota, give the rest to the
  least loaded eligible member, then move partitions from members with two or more above an
  eligible member until none is.
- ``range``: per topic, the members subscribed to it sorted by member id take contiguous
  ranges, the first ``partitions % members`` one partition more (co-partitioned topics land
  on the same member, as Kafka's range assignor promises).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.coordinator.group.consumer_group_member import Assignment

__all__ = ["AssignmentMember", "PartitionAssignor", "UniformAssignor", "RangeAssignor", "ASSIGNORS"]


@dataclass(frozen=True, slots=True)
class AssignmentMember:
    """What an assignor knows of a member: its subscribed topic ids and current target."""

    subscribed_topic_ids: frozenset[uuid.UUID]
    current: Assignment


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, AssignmentMember], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        """Target assignment per member id; ``topics`` = topic id -> partition count."""
        ...


def _to_assignment(partitions: set[tuple[uuid.UUID, int]]) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for topic_id, p in partitions:
        out.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


class UniformAssignor:
    """Balanced and sticky (see the module docstring)."""

    name = "uniform"

    def assign(
        self, members: Mapping[str, AssignmentMember], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        eligible: dict[tuple[uuid.UUID, int], list[str]] = {}
        for member_id in sorted(members):
            for topic_id in members[member_id].subscribed_topic_ids:
                for p in range(topics.get(topic_id, 0)):
                    eligible.setdefault((topic_id, p), []).append(member_id)
        if not eligible:
            return {m: {} for m in members}
        owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in members}
        # quota: an even share of the partitions the member may take
        subscribers = len([m for m in members if members[m].subscribed_topic_ids])
        quota = -(-len(eligible) // max(subscribers, 1))
        taken: set[tuple[uuid.UUID, int]] = set()
        for member_id in sorted(members):
            member = members[member_id]
            kept = sorted(
                (t, p)
                for t, parts in member.current.items()
                if t in member.subscribed_topic_ids
                for p in parts
                if (t, p) in eligible and (t, p) not in taken
            )[:quota]
            owned[member_id].update(kept)
            taken.update(kept)
        # the rest, most constrained partitions first, to the least loaded eligible member
        rest = sorted(
            (tp for tp in eligible if tp not in taken), key=lambda tp: (len(eligible[tp]), str(tp[0]), tp[1])
        )
        for tp in rest:
            target = min(eligible[tp], key=lambda m: (len(owned[m]), m))
            owned[target].add(tp)
        self._balance(owned, eligible)
        return {m: _to_assignment(parts) for m, parts in owned.items()}

    @staticmethod
    def _balance(
        owned: dict[str, set[tuple[uuid.UUID, int]]], eligible: Mapping[tuple[uuid.UUID, int], list[str]]
    ) -> None:
        moved = True
        while moved:
            moved = False
            for giver in sorted(owned, key=lambda m: -len(owned[m])):
                for tp in sorted(owned[giver], key=lambda tp: (str(tp[0]), tp[1])):
                    taker = min(eligible[tp], key=lambda m: (len(owned[m]), m))
                    if len(owned[taker]) + 1 < len(owned[giver]):
                        owned[giver].discard(tp)
                        owned[taker].add(tp)
                        moved = True
                        break
                if moved:
                    break


class RangeAssignor:
    """Contiguous ranges per topic (see the module docstring)."""

    name = "range"

    def assign(
        self, members: Mapping[str, AssignmentMember], topics: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        out: dict[str, dict[uuid.UUID, frozenset[int]]] = {m: {} for m in members}
        by_topic: dict[uuid.UUID, list[str]] = {}
        for member_id in sorted(members):
            for topic_id in members[member_id].subscribed_topic_ids:
                if topics.get(topic_id, 0) > 0:
                    by_topic.setdefault(topic_id, []).append(member_id)
        for topic_id, subscribed in by_topic.items():
            count = topics[topic_id]
            share, extra = divmod(count, len(subscribed))
            start = 0
            for i, member_id in enumerate(subscribed):
                size = share + (1 if i < extra else 0)
                if size:
                    out[member_id][topic_id] = frozenset(range(start, start + size))
                start += size
        return out


#: assignor name -> instance (the names group.consumer.assignors accepts)
ASSIGNORS: dict[str, PartitionAssignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
