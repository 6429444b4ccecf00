"""KIP-848 consumer groups, pure logic: the assignors, the reconciliation state machine
(CurrentAssignmentBuilder), the record formats, and the coordinator driven by heartbeats on a
manual clock with an in-memory ``__consumer_offsets`` (join, incremental rebalance, epochs,
leave, static members, session expiry, offsets with member epochs, reload after failover, the
online upgrade of a classic group and its classic member in the consumer group)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from broker.controller.metadata_image import MetadataImage, TopicImage
from broker.coordinator.group.assignors import AssignmentMember, RangeAssignor, UniformAssignor
from broker.coordinator.group.classic_group import GroupState, JoinResult
from broker.coordinator.group.consumer_group_coordinator import HeartbeatRequest, HeartbeatResult
from broker.coordinator.group.consumer_group_member import ConsumerGroupMember, MemberState
from broker.coordinator.group.current_assignment_builder import reconcile
from spark_kafkalite.protocol import consumer_group_records as rec
from spark_kafkalite.protocol.consumer_protocol import Assignment as ProtocolAssignment
from spark_kafkalite.protocol.consumer_protocol import (
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from spark_kafkalite.protocol.errors import ErrorCode as E
from spark_kafkalite.protocol.group_records import OffsetAndMetadata
from spark_kafkalite.protocol.types import TopicPartition
from tests.unit.test_group_coordinator_state import DELAY_MS, Harness, settle

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
GROUP = "g"
SESSION_MS = 6000


# -- assignors ---------------------------------------------------------------------------------
def _counts(assignment: dict[str, Any]) -> list[int]:
    return sorted(sum(len(p) for p in a.values()) for a in assignment.values())


def _all_partitions(assignment: dict[str, Any]) -> list[tuple[uuid.UUID, int]]:
    return sorted((t, p) for a in assignment.values() for t, ps in a.items() for p in ps)


def test_uniform_is_balanced_complete_and_sticky() -> None:
    topics = {T1: 7, T2: 3}
    subscribed = frozenset({T1, T2})
    first = UniformAssignor().assign(
        {"a": AssignmentMember(subscribed, {}), "b": AssignmentMember(subscribed, {})}, topics
    )
    assert _counts(first) == [5, 5]
    assert _all_partitions(first) == sorted([(T1, p) for p in range(7)] + [(T2, p) for p in range(3)])
    members = {m: AssignmentMember(subscribed, first[m]) for m in first}
    members["c"] = AssignmentMember(subscribed, {})
    second = UniformAssignor().assign(members, topics)
    assert _counts(second) == [3, 3, 4]
    assert len(_all_partitions(second)) == 10
    # sticky: a and b only lose partitions, c takes what they gave up
    for m in ("a", "b"):
        for t, ps in second[m].items():
            assert ps <= first[m].get(t, frozenset())


def test_uniform_heterogeneous_subscriptions() -> None:
    topics = {T1: 4, T2: 4}
    members = {
        "a": AssignmentMember(frozenset({T1}), {}),
        "b": AssignmentMember(frozenset({T1, T2}), {}),
        "c": AssignmentMember(frozenset({T2}), {}),
    }
    out = UniformAssignor().assign(members, topics)
    assert set(out["a"]) <= {T1} and set(out["c"]) <= {T2}
    assert len(_all_partitions(out)) == 8 and max(_counts(out)) - min(_counts(out)) <= 1


def test_range_gives_contiguous_ranges_and_copartitions() -> None:
    topics = {T1: 5, T2: 5}
    both = frozenset({T1, T2})
    out = RangeAssignor().assign({"b": AssignmentMember(both, {}), "a": AssignmentMember(both, {})}, topics)
    assert out["a"] == {T1: frozenset({0, 1, 2}), T2: frozenset({0, 1, 2})}
    assert out["b"] == {T1: frozenset({3, 4}), T2: frozenset({3, 4})}


# -- reconciliation (CurrentAssignmentBuilder) ------------------------------------------------------
def test_partitions_are_revoked_before_the_next_epoch() -> None:
    member = ConsumerGroupMember("a", member_epoch=1, assigned_partitions={T1: frozenset({0, 1})})
    owners = {(T1, 2): 1}
    target = {T1: frozenset({0, 2})}
    step = reconcile(member, 2, target, lambda t, p: owners.get((t, p), -1), [(T1, [0, 1])])
    # 1 must go first: same epoch, 2 not given yet
    assert step.state is MemberState.UNREVOKED_PARTITIONS and step.member_epoch == 1
    assert step.assigned_partitions == {T1: frozenset({0})}
    assert step.partitions_pending_revocation == {T1: frozenset({1})}
    assert reconcile(step, 2, target, lambda t, p: owners.get((t, p), -1), [(T1, [0, 1])]) is step
    # revoked, but 2 is still owned by another member: next epoch, waits for it
    step = reconcile(step, 2, target, lambda t, p: owners.get((t, p), -1), [(T1, [0])])
    assert step.state is MemberState.UNRELEASED_PARTITIONS and step.member_epoch == 2
    assert step.assigned_partitions == {T1: frozenset({0})}
    owners.clear()
    step = reconcile(step, 2, target, lambda t, p: -1, [(T1, [0])])
    assert step.state is MemberState.STABLE and step.assigned_partitions == target


# -- records ----------------------------------------------------------------------------------------
def test_record_formats_round_trip() -> None:
    key = rec.encode_key(rec.ConsumerGroupRecordType.CURRENT_MEMBER_ASSIGNMENT, "grp", "m-1")
    assert key[:2] == b"\x00\x08"
    assert rec.decode_key(key) == rec.ConsumerGroupRecordKey(
        rec.ConsumerGroupRecordType.CURRENT_MEMBER_ASSIGNMENT, "grp", "m-1"
    )
    value = rec.CurrentMemberAssignmentValue(3, 2, 1, {T1: frozenset({0, 2})}, {T2: frozenset({1})})
    assert (
        rec.decode_current_member_assignment_value(rec.encode_current_member_assignment_value(value)) == value
    )
    meta = rec.MemberMetadataValue("i", None, "cid", "/127.0.0.1", ("a", "b"), "x.*", 300000, "range")
    assert rec.decode_member_metadata_value(rec.encode_member_metadata_value(meta)) == meta
    topics = {"a": (T1, 3)}
    assert rec.decode_partition_metadata_value(rec.encode_partition_metadata_value(topics)) == topics
    # ConsumerGroupMetadataValue v0: int16 version, int32 epoch, empty tagged fields
    assert rec.encode_group_epoch_value(5) == b"\x00\x00\x00\x00\x00\x05\x00"


# -- the coordinator ----------------------------------------------------------------------------------
TOPICS = {
    "t": TopicImage("t", T1, dict.fromkeys(range(4))),
    "u-1": TopicImage("u-1", T2, dict.fromkeys(range(2))),
}  # type: ignore[arg-type]


def hb(
    h: Harness, member_id: str, epoch: int, owned_t1: list[int] | None = None, **kw: Any
) -> HeartbeatResult:
    """One heartbeat of ``member_id`` (``owned_t1``: the partitions of topic ``t`` it reports)."""
    fields: dict[str, Any] = dict(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=None,
        rack_id=None,
        rebalance_timeout_ms=30000 if epoch == 0 else -1,
        subscribed_topic_names=("t",) if epoch == 0 else None,
        subscribed_topic_regex=None,
        server_assignor=None,
        owned=[] if epoch == 0 else (None if owned_t1 is None else [(T1, owned_t1)]),
        client_id="c",
        client_host="/127.0.0.1",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
    )
    topics = kw.pop("topics", TOPICS)
    fields.update(kw)
    return run_sync(h.coordinator.consumer.heartbeat(HeartbeatRequest(**fields), topics))


_loop: Any = None


def run_sync(coro: Any) -> Any:
    return _loop.run_until_complete(coro)


@pytest.fixture(autouse=True)
def event_loop_for_heartbeats() -> Iterator[None]:
    """The loop ``hb`` runs heartbeats on (the coordinator's appends await)."""
    global _loop
    _loop = asyncio.new_event_loop()
    asyncio.set_event_loop(_loop)  # the coordinator spawns its appends on it
    try:
        yield
    finally:
        pending = asyncio.all_tasks(_loop)
        if pending:  # appends spawned by the last requests
            _loop.run_until_complete(asyncio.wait(pending, timeout=5))
        asyncio.set_event_loop(None)
        _loop.close()


def parts(result: HeartbeatResult) -> set[int] | None:
    return None if result.assignment is None else set(result.assignment.get(T1, ()))


def test_join_rebalance_leave_and_offsets() -> None:
    h = Harness()
    _loop.run_until_complete(h.load())
    a = hb(h, "a", 0)
    assert a.error == 0 and a.member_epoch == 1 and parts(a) == {0, 1, 2, 3}
    b = hb(h, "b", 0)
    assert b.error == 0 and b.member_epoch == 2 and parts(b) == set()  # waits for a to revoke
    a2 = hb(h, "a", 1, [0, 1, 2, 3])
    assert a2.member_epoch == 1 and len(parts(a2) or ()) == 2  # revoke 2 of 4, same epoch
    kept = parts(a2) or set()
    a3 = hb(h, "a", 1, sorted(kept))
    assert a3.member_epoch == 2 and a3.assignment is None
    b2 = hb(h, "b", 2, [])
    assert parts(b2) == {0, 1, 2, 3} - kept
    group = h.manager.get_group(GROUP)
    assert group is not None and group.consumer is not None and group.consumer.state.value == "Stable"
    # epochs: a future epoch is fenced, the previous one too once partitions changed
    assert hb(h, "a", 7, sorted(kept)).error == E.fenced_member_epoch
    assert hb(h, "zz", 2, []).error == E.unknown_member_id
    assert hb(h, "a", 0, None, subscribed_topic_names=None).error == E.invalid_request
    assert hb(h, "a", 2, sorted(kept), server_assignor="sticky").error == E.unsupported_assignor
    # offsets with member epochs (OffsetCommit v9)
    offsets = {("t", 0): OffsetAndMetadata(5)}
    commit = h.coordinator.offsets.handle_commit_offsets
    assert _loop.run_until_complete(commit(GROUP, "a", None, 1, offsets)) == {("t", 0): E.stale_member_epoch}
    assert _loop.run_until_complete(commit(GROUP, "x", None, 2, offsets)) == {("t", 0): E.unknown_member_id}
    assert _loop.run_until_complete(commit(GROUP, "a", None, 2, offsets, 8)) == {
        ("t", 0): E.unsupported_version
    }
    assert _loop.run_until_complete(commit(GROUP, "a", None, 2, offsets)) == {("t", 0): 0}
    assert h.coordinator.offsets.handle_fetch_offsets(GROUP, [("t", 0)], "a", 1)[0] == E.stale_member_epoch
    assert (
        h.coordinator.offsets.handle_fetch_offsets(GROUP, [("t", 0)], "a", 2)[1][("t", 0)]
        == offsets[("t", 0)]
    )
    assert h.coordinator.offsets.handle_list_groups()[1] == [(GROUP, "consumer", "Stable", "consumer")]
    # failover: a new coordinator loads the records and resumes the same group
    h2 = Harness()
    h2.logs.update(h.logs)
    _loop.run_until_complete(h2.load())
    loaded = h2.manager.get_group(GROUP)
    assert loaded is not None and loaded.consumer is not None
    assert loaded.consumer.group_epoch == group.consumer.group_epoch == 2
    assert loaded.consumer.members == group.consumer.members
    assert loaded.consumer.target_assignment == group.consumer.target_assignment
    assert loaded.offsets[("t", 0)].offset == 5
    # leave: b's partitions go back to a at the next epoch
    assert hb(h, "b", -1).member_epoch == -1
    a4 = hb(h, "a", 2, sorted(kept))
    assert a4.member_epoch == 3 and parts(a4) == {0, 1, 2, 3}
    # a silent member is removed after the session timeout
    hb(h, "c", 0)
    h.scheduler.advance(SESSION_MS + 1)
    _loop.run_until_complete(asyncio.sleep(0.01))
    assert set(group.consumer.members) == set()


def test_static_member_keeps_its_partitions_across_a_restart() -> None:
    h = Harness()
    _loop.run_until_complete(h.load())
    hb(h, "a", 0, instance_id="i-a")
    hb(h, "b", 0, instance_id="i-b")
    kept = sorted(parts(hb(h, "a", 1, [0, 1, 2, 3], instance_id="i-a")) or ())
    assert hb(h, "a", 1, kept, instance_id="i-a").member_epoch == 2
    b = hb(h, "b", 2, [], instance_id="i-b")
    owned_b = parts(b)
    assert owned_b == {0, 1, 2, 3} - set(kept) and b.member_epoch == 2
    assert hb(h, "b", -2, instance_id="i-b").member_epoch == -2
    # after -2 a new process with the instance id takes over b's partitions (no rebalance);
    # a third one while that one is active is refused
    again = hb(h, "b2", 0, instance_id="i-b")
    assert again.error == 0 and parts(again) == owned_b
    assert hb(h, "b3", 0, instance_id="i-b").error == E.unreleased_instance_id
    group = h.manager.get_group(GROUP)
    assert group is not None and group.consumer is not None and group.consumer.group_epoch == 2


def test_regex_subscription_follows_new_topics() -> None:
    h = Harness()
    _loop.run_until_complete(h.load())
    one = {"u-1": TOPICS["u-1"]}
    r = hb(h, "a", 0, subscribed_topic_names=None, subscribed_topic_regex="u-.*", topics=one)
    assert r.error == 0 and r.assignment == {T2: frozenset({0, 1})}
    t3 = uuid.UUID(int=3)
    two = {**one, "u-2": TopicImage("u-2", t3, dict.fromkeys(range(1)))}  # type: ignore[arg-type]
    r = hb(h, "a", r.member_epoch, None, owned=[(T2, [0, 1])], topics=two)
    assert r.member_epoch == 2 and r.assignment == {T2: frozenset({0, 1}), t3: frozenset({0})}
    assert hb(h, "b", 0, subscribed_topic_names=None, subscribed_topic_regex="(", topics=two).error == (
        E.invalid_regular_expression
    )


def classic_group_of_one(protocols: list[tuple[str, bytes]]) -> tuple[Harness, JoinResult]:
    """A Stable classic group: one member of the consumer protocol type owning all of ``t``."""
    h = Harness()
    h.coordinator.consumer.image_provider = lambda: MetadataImage("c", 1, topics=TOPICS)
    _loop.run_until_complete(h.load())
    protocols = [("range", encode_subscription(Subscription(("t",))))]
    first = h.join(protocols=protocols)
    parked = h.join(first[0].member_id, protocols=protocols)
    h.scheduler.advance(DELAY_MS)
    joined = parked[0]
    everything = encode_assignment(ProtocolAssignment(tuple(TopicPartition("t", p) for p in range(4))))
    h.sync(joined.member_id, joined.generation_id, {joined.member_id: everything})
    _loop.run_until_complete(settle())
    assert h.group().state is GroupState.STABLE
    return h, joined


def test_classic_group_upgrades_online_and_its_member_stays_classic() -> None:
    protocols = [("range", encode_subscription(Subscription(("t",))))]
    h, joined = classic_group_of_one(protocols)
    # a consumer-protocol member joins: the classic group becomes a consumer group
    b = hb(h, "b", 0)
    group = h.group()
    assert b.error == 0 and group.consumer is not None and not group.members
    classic = group.consumer.members[joined.member_id]
    assert classic.uses_classic_protocol and classic.assigned_partitions == {T1: frozenset(range(4))}
    assert group.consumer.group_epoch == joined.generation_id + 1
    # the classic member is told to rejoin; JoinGroup answers at once, without a leader
    heartbeat = h.coordinator.handle_heartbeat
    assert heartbeat(GROUP, joined.member_id, None, joined.generation_id) == E.rebalance_in_progress
    assert joined.member_id in group.consumer.rebalance_timers  # it must rejoin in time
    rejoined = h.join(joined.member_id, protocols=protocols)
    _loop.run_until_complete(settle())
    assert rejoined[0].error == 0 and rejoined[0].leader_id == "" and rejoined[0].members == []
    assert joined.member_id not in group.consumer.rebalance_timers
    synced = h.sync(joined.member_id, rejoined[0].generation_id)
    kept = {tp.partition for tp in decode_assignment(synced[0].assignment).partitions}
    assert len(kept) == 2
    assert heartbeat(GROUP, joined.member_id, None, rejoined[0].generation_id) == 0
    # the consumer-protocol member gets the rest; the classic one commits with its generation
    assert parts(hb(h, "b", b.member_epoch, [])) == {0, 1, 2, 3} - kept
    commit = h.coordinator.offsets.handle_commit_offsets
    offsets = {("t", min(kept)): OffsetAndMetadata(1)}
    assert _loop.run_until_complete(commit(GROUP, joined.member_id, None, 99, offsets, 8)) == {
        ("t", min(kept)): E.illegal_generation
    }
    assert _loop.run_until_complete(
        commit(GROUP, joined.member_id, None, rejoined[0].generation_id, offsets, 8)
    ) == {("t", min(kept)): 0}
    # LeaveGroup removes it from the consumer group
    assert h.coordinator.handle_leave_group(GROUP, [(joined.member_id, None)]) == (
        0,
        [(joined.member_id, None, 0)],
    )
    assert set(group.consumer.members) == {"b"}


def test_the_last_consumer_protocol_member_leaving_downgrades_the_group() -> None:
    protocols = [("range", encode_subscription(Subscription(("t",))))]
    h, joined = classic_group_of_one(protocols)
    assert hb(h, "b", 0).error == 0
    epoch = h.group().consumer.group_epoch
    assert hb(h, "b", -1).member_epoch == -1
    _loop.run_until_complete(settle())
    group = h.group()
    assert group.consumer is None and list(group.members) == [joined.member_id]
    assert group.state is GroupState.PREPARING_REBALANCE and group.generation_id == epoch
    # the classic member rejoins the classic group and gets everything back
    assert h.coordinator.handle_heartbeat(GROUP, joined.member_id, None, epoch) == E.rebalance_in_progress
