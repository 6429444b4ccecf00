"""The share-partition state machine (KIP-932, Kafka's ``SharePartition``), the share sessions
(``ShareSessionCache``) and the share group assignment, as pure logic."""

from __future__ import annotations

import uuid

from broker.coordinator.share.share_group_coordinator import ShareGroupCoordinator, simple_assign
from broker.coordinator.share.share_partition import (
    AcknowledgeType,
    AcquiredBatch,
    RecordState,
    SharePartition,
)
from broker.coordinator.share.share_partition_manager import SharePartitionManager
from spark_kafkalite.protocol.errors import ErrorCode

ACCEPT, RELEASE, REJECT, RENEW = (
    int(t)
    for t in (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT, AcknowledgeType.RENEW)
)


def _available_count_is_exact(sp: SharePartition) -> bool:
    return sp._available == sum(r.state == RecordState.AVAILABLE for r in sp.in_flight.values())


def test_acquire_accept_moves_the_start_offset() -> None:
    sp = SharePartition(10, lock_duration_ms=1000)
    assert sp.acquire("a", 10, 19, 500, now_ms=0) == [AcquiredBatch(10, 19, 1)]
    assert (sp.start_offset, sp.end_offset) == (10, 20)
    # nothing left to acquire for another member
    assert sp.acquire("b", 10, 19, 500, now_ms=1) == []
    assert sp.acknowledge("a", 10, 14, [ACCEPT], now_ms=2) == ErrorCode.none
    assert sp.start_offset == 15
    # per-offset types: 15 accepted, 16 released, 17 rejected, 18-19 accepted
    assert sp.acknowledge("a", 15, 19, [ACCEPT, RELEASE, REJECT, ACCEPT, ACCEPT], now_ms=3) == ErrorCode.none
    assert sp.start_offset == 16 and sp.in_flight[16].state == RecordState.AVAILABLE
    assert sp.next_fetch_offset(now_ms=4) == 16
    # the released record goes to the next member, with delivery count 2
    assert sp.acquire("b", 15, 19, 500, now_ms=5) == [AcquiredBatch(16, 16, 2)]
    assert sp.acknowledge("b", 16, 16, [ACCEPT], now_ms=6) == ErrorCode.none
    assert (sp.start_offset, sp.in_flight) == (20, {})
    assert _available_count_is_exact(sp)


def test_only_the_lock_holder_acknowledges() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 4, 500, now_ms=0)
    assert sp.acknowledge("b", 0, 0, [ACCEPT], now_ms=1) == ErrorCode.invalid_record_state
    assert sp.acknowledge("a", 5, 5, [ACCEPT], now_ms=1) == ErrorCode.invalid_record_state
    assert sp.acknowledge("a", 0, 4, [ACCEPT, ACCEPT], now_ms=1) == ErrorCode.invalid_request
    assert sp.acknowledge("a", 0, 0, [9], now_ms=1) == ErrorCode.invalid_request
    # nothing changed by the refused batches
    assert all(r.state == RecordState.ACQUIRED for r in sp.in_flight.values())


def test_lock_expiry_redelivers_and_renew_extends() -> None:
    sp = SharePartition(0, lock_duration_ms=100)
    sp.acquire("a", 0, 1, 500, now_ms=0)
    assert sp.acknowledge("a", 1, 1, [RENEW], now_ms=50) == ErrorCode.none
    # offset 0's lock expires at 100, offset 1's (renewed) at 150
    assert sp.acquire("b", 0, 1, 500, now_ms=120) == [AcquiredBatch(0, 0, 2)]
    assert sp.acknowledge("a", 0, 0, [ACCEPT], now_ms=121) == ErrorCode.invalid_record_state
    assert sp.acquire("b", 0, 1, 500, now_ms=160) == [AcquiredBatch(1, 1, 2)]
    assert _available_count_is_exact(sp)


def test_delivery_count_limit_archives_a_poison_record() -> None:
    sp = SharePartition(0, delivery_count_limit=3)
    for delivery in (1, 2, 3):
        assert sp.acquire("a", 0, 0, 500, now_ms=delivery) == [AcquiredBatch(0, 0, delivery)]
        assert sp.acknowledge("a", 0, 0, [RELEASE], now_ms=delivery) == ErrorCode.none
    # released a third time: archived, SPSO moves past it
    assert sp.start_offset == 1 and sp.in_flight == {}
    assert sp.acquire("a", 0, 0, 500, now_ms=9) == []


def test_max_records_and_in_flight_limit() -> None:
    sp = SharePartition(0, max_in_flight=3)
    assert sp.acquire("a", 0, 9, 2, now_ms=0) == [AcquiredBatch(0, 1, 1)]
    assert sp.acquire("b", 0, 9, 500, now_ms=0) == [AcquiredBatch(2, 2, 1)]
    assert not sp.can_acquire()
    sp.acknowledge("a", 0, 1, [ACCEPT], now_ms=1)
    assert sp.acquire("b", 0, 9, 500, now_ms=2) == [AcquiredBatch(3, 4, 1)]


def test_member_release_and_state_round_trip() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 3, 500, now_ms=0)
    sp.acknowledge("a", 1, 1, [ACCEPT], now_ms=0)
    assert sp.release_member("a") == 3
    batches = sp.state_batches()
    assert batches == [(0, 0, 1, 0), (1, 1, 1, 2), (2, 3, 1, 0)]
    assert _available_count_is_exact(sp) and sp.next_fetch_offset(now_ms=0) == 0
    # a GAP acknowledgement of an available record archives it
    sp.acquire("a", 0, 0, 1, now_ms=0)
    assert sp.acknowledge("a", 0, 2, [ACCEPT, 0, 0], now_ms=0) == ErrorCode.none
    assert _available_count_is_exact(sp) and sp.start_offset == 3
    restored = SharePartition(0)
    restored.load(0, batches)
    assert _available_count_is_exact(restored)
    assert restored.acquire("b", 0, 3, 500, now_ms=0) == [AcquiredBatch(0, 0, 2), AcquiredBatch(2, 3, 2)]


def test_log_start_moves_the_start_offset() -> None:
    sp = SharePartition(0)
    sp.acquire("a", 0, 4, 500, now_ms=0)
    sp.release_member("a")
    sp.move_start(3)
    assert (sp.start_offset, sorted(sp.in_flight)) == (3, [3, 4])
    assert _available_count_is_exact(sp) and sp.next_fetch_offset(now_ms=0) == 3


def test_share_session_epochs() -> None:
    mgr = SharePartitionManager(lambda: 0, max_sessions=1)
    assert mgr.session_for("g", "m", 1)[0] == ErrorCode.share_session_not_found
    code, session = mgr.session_for("g", "m", 0)
    assert code == ErrorCode.none and session is not None and session.epoch == 1
    assert mgr.session_for("g", "m", 2)[0] == ErrorCode.invalid_share_session_epoch
    assert mgr.session_for("g", "m", 1)[0] == ErrorCode.none
    assert mgr.session_for("g", "m", 2)[0] == ErrorCode.none
    assert mgr.session_for("g", "other", 0)[0] == ErrorCode.share_session_limit_reached
    assert mgr.session_for("g", "m", -1)[0] == ErrorCode.none
    assert mgr.session_for("g", "m", 3)[0] == ErrorCode.share_session_not_found


def test_simple_assign_shares_partitions_when_members_outnumber_them() -> None:
    tid = uuid.uuid4()
    few = simple_assign({"m1": ("t",), "m2": ("t",)}, {"t": (tid, 4)})
    assert few == {"m1": {tid: frozenset({0, 2})}, "m2": {tid: frozenset({1, 3})}}
    many = simple_assign({f"m{i}": ("t",) for i in range(3)}, {"t": (tid, 1)})
    assert all(a == {tid: frozenset({0})} for a in many.values())


def test_share_group_heartbeats() -> None:
    clock = [0]
    tid = uuid.uuid4()
    topics = {"t": (tid, 2)}
    coordinator = ShareGroupCoordinator(lambda: clock[0], session_timeout_ms=1000)
    assert coordinator.heartbeat("g", "a", 0, None, topics).error == ErrorCode.invalid_request
    joined = coordinator.heartbeat("g", "a", 0, ("t",), topics)
    assert (joined.error, joined.member_epoch, joined.assignment) == (0, 1, {tid: frozenset({0, 1})})
    b = coordinator.heartbeat("g", "b", 0, ("t",), topics)
    assert (b.member_epoch, b.assignment) == (2, {tid: frozenset({1})})
    a = coordinator.heartbeat("g", "a", 1, None, topics)
    assert (a.member_epoch, a.assignment) == (2, {tid: frozenset({0})})
    assert coordinator.heartbeat("g", "a", 1, None, topics).error == ErrorCode.fenced_member_epoch
    assert coordinator.heartbeat("g", "zz", 3, None, topics).error == ErrorCode.unknown_member_id
    # b goes silent: removed after the session timeout, a gets both partitions back
    clock[0] = 900
    assert coordinator.heartbeat("g", "a", 2, None, topics).assignment is None
    clock[0] = 1500
    a = coordinator.heartbeat("g", "a", 2, None, topics)
    assert (a.member_epoch, a.assignment) == (3, {tid: frozenset({0, 1})})
    assert coordinator.heartbeat("g", "a", -1, None, topics).member_epoch == -1
    assert coordinator.describe("g") is not None and coordinator.describe("g").state == "Empty"  # type: ignore[union-attr]
