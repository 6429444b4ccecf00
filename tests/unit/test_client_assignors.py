"""Assignors: Java's documented range / roundrobin results, kafka-python's implementations as an
independent check on random inputs, and cooperative-sticky invariants (hypothesis)."""

from __future__ import annotations

from collections import namedtuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from spark_kafkalite.client.consumer.assignors import (
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    assignors_from_config,
)
from spark_kafkalite.client.types import TopicPartition as TP
from spark_kafkalite.protocol.consumer_protocol import Subscription
from spark_kafkalite.protocol.errors import InvalidConfigError
from tests.unit._hypothesis_budget import examples


def _subs(topics_by_member: dict[str, list[str]], **extra: object) -> dict[str, Subscription]:
    return {m: Subscription(tuple(ts), member_id=m, **extra) for m, ts in topics_by_member.items()}  # type: ignore[arg-type]


def _parts(result: dict, member: str) -> list[TP]:
    return sorted(result[member].partitions)


def test_range_java_doc_example() -> None:
    subs = _subs({"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    result = RangeAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert _parts(result, "C0") == [TP("t0", 0), TP("t0", 1), TP("t1", 0), TP("t1", 1)]
    assert _parts(result, "C1") == [TP("t0", 2), TP("t1", 2)]


def test_roundrobin_java_doc_examples() -> None:
    subs = _subs({"C0": ["t0", "t1"], "C1": ["t0", "t1"]})
    result = RoundRobinAssignor().assign({"t0": 3, "t1": 3}, subs)
    assert _parts(result, "C0") == [TP("t0", 0), TP("t0", 2), TP("t1", 1)]
    assert _parts(result, "C1") == [TP("t0", 1), TP("t1", 0), TP("t1", 2)]
    subs = _subs({"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]})
    result = RoundRobinAssignor().assign({"t0": 1, "t1": 2, "t2": 3}, subs)
    assert _parts(result, "C0") == [TP("t0", 0)]
    assert _parts(result, "C1") == [TP("t1", 0)]
    assert _parts(result, "C2") == [TP("t1", 1), TP("t2", 0), TP("t2", 1), TP("t2", 2)]


def test_static_members_sort_first_by_instance_id() -> None:
    subs = {
        "a-member": Subscription(("t",), member_id="a-member"),
        "z-member": Subscription(("t",), group_instance_id="instance-2", member_id="z-member"),
        "y-member": Subscription(("t",), group_instance_id="instance-1", member_id="y-member"),
    }
    result = RangeAssignor().assign({"t": 3}, subs)
    assert _parts(result, "y-member") == [TP("t", 0)]
    assert _parts(result, "z-member") == [TP("t", 1)]
    assert _parts(result, "a-member") == [TP("t", 2)]


def test_missing_topics_and_members_without_partitions() -> None:
    subs = _subs({"C0": ["gone"], "C1": ["t"], "C2": ["t"]})
    for assignor in (RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor()):
        result = assignor.assign({"t": 1}, subs)
        assert set(result) == {"C0", "C1", "C2"}
        assert _parts(result, "C0") == []
        assert sum(len(a.partitions) for a in result.values()) == 1


FakeMember = namedtuple("FakeMember", "member_id group_instance_id metadata")


class FakeCluster:
    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(range(self.counts[topic])) if topic in self.counts else None


topics_st = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 7), min_size=1)


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, int], dict[str, list[str]]]:
    counts = draw(topics_st)
    names = draw(
        st.lists(st.text(alphabet="mnopq0123-", min_size=1, max_size=6), min_size=1, max_size=6, unique=True)
    )
    members = {
        n: draw(st.lists(st.sampled_from(sorted(counts) + ["missing"]), min_size=1, unique=True))
        for n in names
    }
    return counts, members


@given(groups())
@settings(max_examples=examples(200), deadline=None)
def test_range_and_roundrobin_match_kafka_python(group: tuple[dict[str, int], dict[str, list[str]]]) -> None:
    counts, members = group
    kp_members = [
        FakeMember(m, None, KpSubscription(version=0, topics=ts, user_data=b"")) for m, ts in members.items()
    ]
    present = {t: n for t, n in counts.items()}
    pairs: list[tuple[object, object]] = [(RangeAssignor(), RangePartitionAssignor)]
    if len({frozenset(ts) for ts in members.values()}) == 1:
        # kafka-python 3.0's roundrobin breaks (KeyError) when it must skip an unsubscribed
        # member; unequal subscriptions are covered by Java's documented example above
        pairs.append((RoundRobinAssignor(), RoundRobinPartitionAssignor))
    for ours, theirs in pairs:
        result = ours.assign(present, _subs(members))  # type: ignore[attr-defined]
        expected = theirs.assign(FakeCluster(counts), kp_members)  # type: ignore[attr-defined]
        for m in members:
            want = sorted(TP(t, p) for t, ps in expected[m].assigned_partitions for p in ps)
            assert _parts(result, m) == want, (ours.name, m)  # type: ignore[attr-defined]


def _check_valid(counts: dict[str, int], subs: dict[str, Subscription], result: dict) -> None:
    seen: set[TP] = set()
    for member, assignment in result.items():
        for tp in assignment.partitions:
            assert tp.topic in subs[member].topics
            assert 0 <= tp.partition < counts[tp.topic]
            assert tp not in seen, f"{tp} assigned twice"
            seen.add(tp)


def _is_balanced(counts: dict[str, int], subs: dict[str, Subscription], result: dict) -> bool:
    """Java's isBalanced: no member could take a partition from one holding >= 2 more."""
    sizes = {m: len(a.partitions) for m, a in result.items()}
    for giver, assignment in result.items():
        for tp in assignment.partitions:
            for taker, sub in subs.items():
                if tp.topic in sub.topics and sizes[taker] + 1 < sizes[giver]:
                    return False
    return True


def _rebalance_until_stable(
    counts: dict[str, int],
    topics_by_member: dict[str, list[str]],
    owned: dict[str, list[TP]],
    generation: int,
) -> tuple[dict, int]:
    """Run cooperative rounds (owners revoke what moved, then rejoin) until nothing moves."""
    assignor = CooperativeStickyAssignor()
    for _ in range(4):
        subs = {
            m: Subscription(tuple(ts), None, tuple(owned.get(m, ())), generation, None, None, m)
            for m, ts in topics_by_member.items()
        }
        result = assignor.assign(counts, subs)
        _check_valid(counts, subs, result)
        for m, a in result.items():  # KIP-429: never handed over in the round it is revoked
            for tp in a.partitions:
                assert all(tp not in owned.get(other, ()) for other in owned if other != m)
        generation += 1
        new_owned = {m: sorted(a.partitions) for m, a in result.items()}
        if new_owned == {m: sorted(owned.get(m, [])) for m in topics_by_member}:
            return result, generation
        owned = new_owned
    raise AssertionError("cooperative rebalancing did not converge in 4 rounds")


@given(groups())
@settings(max_examples=examples(150), deadline=None)
def test_cooperative_sticky_converges_balanced(group: tuple[dict[str, int], dict[str, list[str]]]) -> None:
    counts, members = group
    result, _ = _rebalance_until_stable(counts, members, {}, 1)
    subs = _subs(members)
    assert _is_balanced(counts, subs, result)
    assigned = {tp for a in result.values() for tp in a.partitions}
    wanted = {TP(t, p) for ts in members.values() for t in ts if t in counts for p in range(counts[t])}
    assert assigned == wanted


@given(st.integers(1, 30), st.integers(1, 6), st.integers(1, 3))
@settings(max_examples=examples(100), deadline=None)
def test_cooperative_sticky_member_join_and_leave_move_little(
    partitions: int, members: int, joined: int
) -> None:
    counts = {"t": partitions}
    names = [f"m{i}" for i in range(members)]
    result, gen = _rebalance_until_stable(counts, {m: ["t"] for m in names}, {}, 1)
    before = {m: set(a.partitions) for m, a in result.items()}
    assert max(map(len, before.values())) - min(map(len, before.values())) <= 1
    # members join: every old member keeps at least min(old share, new floor share)
    grown = names + [f"new{i}" for i in range(joined)]
    result, gen = _rebalance_until_stable(
        counts, {m: ["t"] for m in grown}, {m: sorted(p) for m, p in before.items()}, gen
    )
    floor = partitions // len(grown)
    after = {m: set(a.partitions) for m, a in result.items()}
    for m in names:
        assert len(before[m] & after[m]) >= min(len(before[m]), floor)
    assert max(map(len, after.values())) - min(map(len, after.values())) <= 1
    # the first member leaves: nobody else loses a partition
    remaining = grown[1:]
    result, _ = _rebalance_until_stable(
        counts, {m: ["t"] for m in remaining}, {m: sorted(after[m]) for m in remaining}, gen
    )
    final = {m: set(a.partitions) for m, a in result.items()}
    for m in remaining:
        assert after[m] <= final[m]


def test_cooperative_sticky_keeps_assignment_when_nothing_changes() -> None:
    counts = {"t": 6}
    owned = {"a": [TP("t", 5), TP("t", 0), TP("t", 3)], "b": [TP("t", 1), TP("t", 2), TP("t", 4)]}
    subs = {m: Subscription(("t",), None, tuple(ps), 3, None, None, m) for m, ps in owned.items()}
    result = CooperativeStickyAssignor().assign(counts, subs)
    assert {m: sorted(a.partitions) for m, a in result.items()} == {m: sorted(ps) for m, ps in owned.items()}


def test_cooperative_sticky_ignores_stale_generation_and_double_claims() -> None:
    counts = {"t": 4}
    subs = {
        "a": Subscription(("t",), None, (TP("t", 0), TP("t", 1)), 5, member_id="a"),
        "b": Subscription(("t",), None, (TP("t", 1), TP("t", 2)), 5, member_id="b"),  # t-1 claimed twice
        "c": Subscription(("t",), None, (TP("t", 3),), 4, member_id="c"),  # older generation
    }
    result = CooperativeStickyAssignor().assign(counts, subs)
    assert TP("t", 0) in result["a"].partitions
    assert TP("t", 2) in result["b"].partitions
    _check_valid(counts, subs, result)


def test_generation_travels_in_user_data_for_old_subscription_versions() -> None:
    assignor = CooperativeStickyAssignor()
    assert assignor.subscription_user_data({"t"}) == b"\xff\xff\xff\xff"
    from spark_kafkalite.protocol.consumer_protocol import Assignment

    assignor.on_assignment(Assignment(()), 7)
    data = assignor.subscription_user_data({"t"})
    assert data == b"\x00\x00\x00\x07"
    # a v1 subscription (no generation field) with owned partitions and the generation in user data
    subs = {
        "a": Subscription(("t",), data, (TP("t", 0), TP("t", 1)), -1, member_id="a"),
        "b": Subscription(("t",), b"\x00\x00\x00\x06", (TP("t", 0),), -1, member_id="b"),
    }
    result = assignor.assign({"t": 2}, subs)
    assert TP("t", 0) in result["a"].partitions  # b's claim is from an older generation


def test_assignors_from_config() -> None:
    names = [a.name for a in assignors_from_config("range, cooperative-sticky")]
    assert names == ["range", "cooperative-sticky"]
    assert [
        a.name for a in assignors_from_config(["org.apache.kafka.clients.consumer.RoundRobinAssignor"])
    ] == ["roundrobin"]
    assert CooperativeStickyAssignor().supported_protocols()[0] is RebalanceProtocol.COOPERATIVE
    with pytest.raises(InvalidConfigError, match="sticky"):
        assignors_from_config("sticky")
    with pytest.raises(InvalidConfigError):
        assignors_from_config("")
    with pytest.raises(InvalidConfigError):
        assignors_from_config("range,range")
