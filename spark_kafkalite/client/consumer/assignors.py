"""Client-side partition assignors (Java ``ConsumerPartitionAssignor`` implementations).

The group leader runs the assignor the coordinator selected (the protocol name every member
supports that got the most votes) over the members' subscriptions and the partition counts of
the subscribed topics:

- ``range`` (Java ``RangeAssignor``): per topic, the members subscribed to it in
  ``MemberInfo`` order (``group.instance.id`` first when set, else member id) get consecutive
  ranges; the first ``n % m`` members get one partition more. Eager protocol.
- ``roundrobin`` (Java ``RoundRobinAssignor``): every partition of every subscribed topic
  (topics sorted, partitions ascending) goes to the next member in ``MemberInfo`` order,
  skipping members not subscribed to the topic. Eager protocol.
- ``cooperative-sticky`` (Java ``CooperativeStickyAssignor``, KIP-429): keeps each member's
  valid owned partitions (subscribed, existing, claimed in the highest generation by one member
  only), assigns the rest to the least loaded eligible members, then balances (no member may get
  a partition from a member holding at least two more). A partition that changes owner is left
  out of this round (the owner revokes it and rejoins; the next rebalance hands it over).
  Supports both protocols; user data is the member's generation (``int32``), as Java's.

Pure logic, no I/O.
"""

from __future__ import annotations

import enum
import heapq
import logging
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.consumer_protocol import Assignment, Subscription
from spark_kafkalite.protocol.errors import InvalidConfigError

__all__ = [
    "RebalanceProtocol",
    "ConsumerPartitionAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "CooperativeStickyAssignor",
    "ASSIGNORS",
    "assignors_from_config",
    "member_sort_key",
]

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")


class RebalanceProtocol(enum.IntEnum):
    """Java ``ConsumerPartitionAssignor.RebalanceProtocol``: EAGER revokes everything before a
    rejoin; COOPERATIVE revokes only partitions that move (KIP-429)."""

    EAGER = 0
    COOPERATIVE = 1


def member_sort_key(member_id: str, subscription: Subscription) -> tuple[int, str, str]:
    """Java ``MemberInfo.compareTo``: members with a ``group.instance.id`` first, ordered by it;
    then the others by member id."""
    if subscription.group_instance_id is not None:
        return (0, subscription.group_instance_id, member_id)
    return (1, member_id, "")


class ConsumerPartitionAssignor(ABC):
    """An assignor (Java ``ConsumerPartitionAssignor``).

    ``assign(partitions_per_topic, subscriptions)`` gets ``{topic: partition count}`` for the
    subscribed topics that exist and ``{member_id: Subscription}``, and returns
    ``{member_id: Assignment}`` for every member (possibly empty).
    """

    name: str = ""

    def supported_protocols(self) -> list[RebalanceProtocol]:
        """The rebalance protocols this assignor works with, preferred first (Java
        ``ConsumerPartitionAssignor.supportedProtocols``; KIP-429): EAGER by default."""
        return [RebalanceProtocol.EAGER]

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """User data to put into this member's subscription (None = none)."""
        return None

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Called on every member with its assignment once SyncGroup completed."""
        return None

    @abstractmethod
    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """``{member_id: Assignment}`` for every member of ``subscriptions`` from
        ``partitions_per_topic`` (``{topic: partition count}``); run by the group leader (Java
        ``ConsumerPartitionAssignor.assign``)."""
        raise NotImplementedError


def _sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions[m]))


def _as_assignments(
    members: Iterable[str], assigned: Mapping[str, list[TopicPartition]]
) -> dict[str, Assignment]:
    return {m: Assignment(tuple(sorted(assigned.get(m, ())))) for m in members}


class RangeAssignor(ConsumerPartitionAssignor):
    """Java's ``RangeAssignor`` (without rack awareness). Example: topic t with 3 partitions,
    members c0, c1 -> c0: t-0, t-1; c1: t-2."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """Per topic, consecutive ranges of partitions to the members subscribed to it, in
        member order; the first ``count % members`` get one more."""
        ordered = _sorted_members(subscriptions)
        assigned: dict[str, list[TopicPartition]] = {m: [] for m in ordered}
        for topic in sorted(partitions_per_topic):
            count = int(partitions_per_topic[topic])
            consumers = [m for m in ordered if topic in subscriptions[m].topics]
            if not consumers or count <= 0:
                continue
            per_consumer, extra = divmod(count, len(consumers))
            for i, member in enumerate(consumers):
                start = per_consumer * i + min(i, extra)
                length = per_consumer + (1 if i < extra else 0)
                assigned[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return _as_assignments(ordered, assigned)


class RoundRobinAssignor(ConsumerPartitionAssignor):
    """Java's ``RoundRobinAssignor``. Example: topics t0, t1 with 3 partitions each, members c0,
    c1 -> c0: t0-0, t0-2, t1-1; c1: t0-1, t1-0, t1-2."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """Every partition of every subscribed topic, in topic / partition order, dealt to
        the members in turn (skipping members not subscribed to the topic)."""
        ordered = _sorted_members(subscriptions)
        assigned: dict[str, list[TopicPartition]] = {m: [] for m in ordered}
        if not ordered:
            return {}
        topics = sorted({t for s in subscriptions.values() for t in s.topics if t in partitions_per_topic})
        position = 0
        for topic in topics:
            if not any(topic in subscriptions[m].topics for m in ordered):
                continue
            for partition in range(int(partitions_per_topic[topic])):
                while topic not in subscriptions[ordered[position % len(ordered)]].topics:
                    position += 1
                assigned[ordered[position % len(ordered)]].append(TopicPartition(topic, partition))
                position += 1
        return _as_assignments(ordered, assigned)


def _member_generation(subscription: Subscription) -> int:
    """Java ``CooperativeStickyAssignor.memberData``: the subscription's generation (v2+), else
    the int32 in the user data, else -1."""
    if subscription.generation_id >= 0:
        return subscription.generation_id
    data = subscription.user_data
    if data is not None and len(data) >= 4:
        return int(_I32.unpack_from(data, 0)[0])
    return -1


class CooperativeStickyAssignor(ConsumerPartitionAssignor):
    """Java's ``CooperativeStickyAssignor`` semantics (see module docstring). Not the same
    algorithm as Java's, so a Java leader may place partitions differently, but the guarantees
    hold: balanced, sticky, and no partition given to a new owner in the round it is revoked."""

    name = "cooperative-sticky"

    def __init__(self) -> None:
        self.generation = -1

    def supported_protocols(self) -> list[RebalanceProtocol]:
        """COOPERATIVE first (incremental rebalancing, KIP-429), then EAGER."""
        return [RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER]

    def subscription_user_data(self, topics: set[str]) -> bytes | None:
        """The generation of this member's current assignment as an int32 (Java's
        ``CooperativeStickyAssignor`` user data), so the leader can drop stale owners."""
        return _I32.pack(self.generation)

    def on_assignment(self, assignment: Assignment, generation_id: int) -> None:
        """Remember ``generation_id`` for the next subscription's user data."""
        self.generation = generation_id

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        """A balanced assignment that keeps each partition with its valid previous owner
        where possible; a partition changing owner is left out this round (its owner revokes it
        first and the next rebalance hands it on, KIP-429)."""
        ordered = _sorted_members(subscriptions)
        if not ordered:
            return {}
        owners = self._valid_owners(partitions_per_topic, subscriptions)
        sticky = sticky_assign(partitions_per_topic, subscriptions, owners, ordered)
        # KIP-429: a partition moving to another member is first revoked by its owner.
        result: dict[str, list[TopicPartition]] = {}
        for member in ordered:
            result[member] = [tp for tp in sticky[member] if owners.get(tp, member) == member]
        return _as_assignments(ordered, result)

    @staticmethod
    def _valid_owners(
        partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[TopicPartition, str]:
        """Owner per partition among members of the highest generation; partitions claimed by
        two such members, unsubscribed or gone are nobody's."""
        generations = {m: _member_generation(s) for m, s in subscriptions.items()}
        highest = max(generations.values(), default=-1)
        owners: dict[TopicPartition, str] = {}
        contested: set[TopicPartition] = set()
        for member in _sorted_members(subscriptions):
            sub = subscriptions[member]
            if generations[member] < highest and highest >= 0:
                continue  # a stale member's claims are void (Java: membersWithOldGeneration)
            for tp in sub.owned_partitions:
                if tp.topic not in sub.topics or not 0 <= tp.partition < int(
                    partitions_per_topic.get(tp.topic, 0)
                ):
                    continue
                if tp in owners and owners[tp] != member:
                    log.warning(
                        "members %s and %s both claim %s in generation %d; revoking it from both",
                        owners[tp],
                        member,
                        tp,
                        highest,
                    )
                    contested.add(tp)
                else:
                    owners[tp] = member
        for tp in contested:
            owners.pop(tp, None)
        return owners


def sticky_assign(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    owners: Mapping[TopicPartition, str],
    ordered_members: Sequence[str],
) -> dict[str, list[TopicPartition]]:
    """A balanced assignment that keeps ``owners``' partitions where balance allows.

    Steps: keep owned partitions (each member at most ``ceil(P / M)`` when all subscriptions are
    equal); give every other partition to the eligible member with the fewest partitions
    (ties: member order); then move partitions from a member to an eligible one holding at
    least two fewer until none can (Java's ``isBalanced``), preferring partitions the giver did
    not own before.
    """
    members = list(ordered_members)
    rank = {m: i for i, m in enumerate(members)}
    eligible: dict[TopicPartition, list[str]] = {}
    for topic in sorted(partitions_per_topic):
        subscribers = [m for m in members if topic in subscriptions[m].topics]
        if not subscribers:
            continue
        for p in range(int(partitions_per_topic[topic])):
            eligible[TopicPartition(topic, p)] = subscribers
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    total = len(eligible)
    all_equal = len({frozenset(subscriptions[m].topics) for m in members}) <= 1
    cap = -(-total // len(members)) if all_equal and members else total
    for tp in eligible:
        owner = owners.get(tp)
        if owner is not None and owner in assignment and len(assignment[owner]) < cap:
            assignment[owner].append(tp)
    if all_equal:
        # at most total % M members may sit at the ceiling when the split is uneven
        floor, extra = divmod(total, len(members))
        at_cap = [m for m in members if len(assignment[m]) > floor]
        if extra and len(at_cap) > extra:
            for m in sorted(at_cap, key=lambda m: rank[m])[extra:]:
                del assignment[m][floor:]
    taken = {tp for parts in assignment.values() for tp in parts}
    heap = [(len(assignment[m]), rank[m], m) for m in members]
    heapq.heapify(heap)
    for tp, candidates in eligible.items():
        if tp in taken:
            continue
        if len(candidates) == len(members):
            while True:
                count, r, m = heapq.heappop(heap)
                if count == len(assignment[m]):
                    break
                heapq.heappush(heap, (len(assignment[m]), r, m))
            assignment[m].append(tp)
            heapq.heappush(heap, (len(assignment[m]), r, m))
        else:
            m = min(candidates, key=lambda c: (len(assignment[c]), rank[c]))
            assignment[m].append(tp)
    _balance(assignment, eligible, owners, rank)
    return assignment


def _balance(
    assignment: dict[str, list[TopicPartition]],
    eligible: Mapping[TopicPartition, list[str]],
    owners: Mapping[TopicPartition, str],
    rank: Mapping[str, int],
) -> None:
    moved = True
    while moved:
        moved = False
        for giver in sorted(assignment, key=lambda m: (-len(assignment[m]), rank[m])):
            # partitions the giver did not own before move first (keeps stickiness)
            candidates = sorted(assignment[giver], key=lambda tp: (owners.get(tp) == giver, tp))
            for tp in candidates:
                takers = [m for m in eligible[tp] if len(assignment[m]) + 1 < len(assignment[giver])]
                if not takers:
                    continue
                taker = min(takers, key=lambda m: (len(assignment[m]), rank[m]))
                assignment[giver].remove(tp)
                assignment[taker].append(tp)
                moved = True
                break
            if moved:
                break


#: Assignor classes by ``partition.assignment.strategy`` name (Java class names accepted too).
ASSIGNORS: dict[str, type[ConsumerPartitionAssignor]] = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
    "org.apache.kafka.clients.consumer.RangeAssignor": RangeAssignor,
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": RoundRobinAssignor,
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": CooperativeStickyAssignor,
}


def assignors_from_config(
    value: str | Sequence[str | ConsumerPartitionAssignor],
) -> list[ConsumerPartitionAssignor]:
    """``partition.assignment.strategy`` (a comma-separated string or a list of names or
    assignor instances, in preference order) -> assignor instances.

    Raises:
        InvalidConfigError: an unknown name, a duplicate, or an empty list.
    """
    items: list[str | ConsumerPartitionAssignor] = (
        [s for s in value.split(",")] if isinstance(value, str) else list(value)
    )
    out: list[ConsumerPartitionAssignor] = []
    for item in items:
        if isinstance(item, ConsumerPartitionAssignor):
            out.append(item)
            continue
        name = str(item).strip()
        if not name:
            continue
        cls = ASSIGNORS.get(name)
        if cls is None:
            raise InvalidConfigError(
                f"unknown partition.assignment.strategy {name!r}: use range, roundrobin or cooperative-sticky"
            )
        out.append(cls())
    names = [a.name for a in out]
    if not out:
        raise InvalidConfigError("partition.assignment.strategy must name at least one assignor")
    if len(set(names)) != len(names):
        raise InvalidConfigError(f"partition.assignment.strategy names an assignor twice: {names}")
    return out
