"""The KIP-848 member state machine (``ConsumerMembershipManager``) and the delta heartbeats
(``HeartbeatState``): pure logic, no I/O."""

from __future__ import annotations

import datetime
import uuid
from types import SimpleNamespace

from spark_kafkalite.client.consumer.consumer_heartbeat_request_manager import (
    ConsumerHeartbeatRequestManager,
    HeartbeatState,
)
from spark_kafkalite.client.consumer.consumer_membership_manager import (
    ConsumerMembershipManager,
    MemberState,
)
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import ErrorCode, UnsupportedAssignorError

T1, T2 = uuid.uuid4(), uuid.uuid4()
NAMES = {T1: "a", T2: "b"}


def joined(instance: str | None = None) -> ConsumerMembershipManager:
    m = ConsumerMembershipManager(instance)
    m.subscribe()
    assert m.state is MemberState.JOINING and m.member_epoch == 0
    return m


def test_join_reconcile_acknowledge_stable() -> None:
    m = joined()
    assert len(m.member_id) == 22  # Kafka's Uuid.toString: 16 bytes URL-safe base64
    m.on_heartbeat_success(None, 1, 100, {T1: frozenset({0, 1})})
    assert m.state is MemberState.RECONCILING
    assert m.plan_reconciliation({}, set()) is None  # topic id not resolved yet
    plan = m.plan_reconciliation(NAMES, set())
    assert plan is not None and plan.added == {TopicPartition("a", 0), TopicPartition("a", 1)}
    assert not plan.revoked
    m.on_reconciled(plan)
    assert m.state is MemberState.ACKNOWLEDGING and m.send_heartbeat_now()
    m.on_heartbeat_sent()
    assert m.state is MemberState.STABLE and not m.send_heartbeat_now()
    m.on_heartbeat_success(None, 1, 100, None)  # unchanged assignment
    assert m.state is MemberState.STABLE


def test_empty_first_assignment_is_reconciled_and_revocation_planned_first() -> None:
    m = joined()
    m.on_heartbeat_success(None, 1, 100, {})
    plan = m.plan_reconciliation(NAMES, set())
    assert plan is not None and not plan.added and not plan.assigned
    m.on_reconciled(plan)
    m.on_heartbeat_sent()
    m.on_heartbeat_success(None, 2, 100, {T1: frozenset({0}), T2: frozenset({0})})
    m.on_reconciled(m.plan_reconciliation(NAMES, set()))
    m.on_heartbeat_sent()
    m.on_heartbeat_success(None, 3, 100, {T2: frozenset({0})})
    owned = {TopicPartition("a", 0), TopicPartition("b", 0)}
    plan = m.plan_reconciliation(NAMES, owned)
    assert plan.revoked == {TopicPartition("a", 0)} and not plan.added and plan.epoch == 3


def test_newer_target_during_reconciliation_stays_reconciling() -> None:
    m = joined()
    m.on_heartbeat_success(None, 1, 100, {T1: frozenset({0})})
    plan = m.plan_reconciliation(NAMES, set())
    m.on_heartbeat_success(None, 2, 100, {T1: frozenset({0, 1})})  # arrives while committing
    m.on_reconciled(plan)
    assert m.state is MemberState.RECONCILING
    assert m.plan_reconciliation(NAMES, {TopicPartition("a", 0)}).added == {TopicPartition("a", 1)}


def test_fenced_rejoins_with_epoch_zero_and_same_member_id() -> None:
    m = joined()
    member_id = m.member_id
    m.on_heartbeat_success(None, 5, 100, {T1: frozenset({0})})
    m.on_reconciled(m.plan_reconciliation(NAMES, set()))
    m.on_fenced()
    assert m.state is MemberState.FENCED
    m.on_heartbeat_success(None, 6, 100, {T1: frozenset({1})})  # ignored while fenced
    assert m.state is MemberState.FENCED
    m.on_lost_released()
    assert m.state is MemberState.JOINING and m.member_epoch == 0 and m.member_id == member_id
    assert m.current_assignment == {}


def test_leave_epochs_dynamic_and_static() -> None:
    for instance, epoch in ((None, -1), ("static-1", -2)):
        m = joined(instance)
        m.on_heartbeat_success(None, 3, 100, {})
        assert m.leave() == epoch and m.state is MemberState.PREPARE_LEAVING and not m.in_group()
        m.on_revoked_for_leave()
        assert m.state is MemberState.LEAVING and m.member_epoch == epoch and m.send_heartbeat_now()
        m.on_heartbeat_success(None, 4, 100, {T1: frozenset({0})})  # late answer ignored
        m.on_heartbeat_sent()
        assert m.state is MemberState.UNSUBSCRIBED


def test_heartbeat_state_sends_full_on_join_then_only_changes() -> None:
    m = joined("inst")
    hs = HeartbeatState(300000, "rack-a", "range")
    full = hs.build(m, ("a",), None)
    assert (full.instance_id, full.rack_id, full.rebalance_timeout_ms) == ("inst", "rack-a", 300000)
    assert full.subscribed_topic_names == ("a",) and full.server_assignor == "range"
    assert full.topic_partitions == ()
    m.on_heartbeat_success(None, 1, 100, {T1: frozenset({0})})
    delta = hs.build(m, ("a",), None)
    assert delta.subscribed_topic_names is None and delta.server_assignor is None
    assert delta.rack_id is None and delta.rebalance_timeout_ms == -1 and delta.topic_partitions is None
    assert delta.instance_id == "inst"  # every request: the coordinator needs it for a static leave
    m.on_reconciled(m.plan_reconciliation(NAMES, set()))
    ack = hs.build(m, ("a", "b"), None)
    assert ack.topic_partitions == ((T1, (0,)),) and ack.subscribed_topic_names == ("a", "b")
    hs.reset()  # after an error: everything again
    again = hs.build(m, ("a", "b"), None)
    assert again.subscribed_topic_names == ("a", "b") and again.server_assignor == "range"
    assert again.topic_partitions == ((T1, (0,)),)


class ScriptedCoordinator:
    """Collects the heartbeats sent; the test completes each future with a response."""

    def __init__(self) -> None:
        self.sent: list = []
        self.unknown: list[str] = []
        self.now = 0.0

    def send(self, builder):  # noqa: ANN001, ANN201 - test double of send_to_coordinator
        future = RequestFuture()
        self.sent.append((builder.build(1), future))
        return future


def response(error: int = 0, epoch: int = 1, assignment=None):  # noqa: ANN001, ANN201
    return SimpleNamespace(
        error_code=error,
        error_message=None,
        member_id=None,
        member_epoch=epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=500),
        assignment=assignment,
    )


def manager() -> tuple[ConsumerMembershipManager, ConsumerHeartbeatRequestManager, ScriptedCoordinator]:
    m = joined()
    net = ScriptedCoordinator()
    hb = ConsumerHeartbeatRequestManager(
        "g", m, HeartbeatState(1000, None, None), net.send, net.unknown.append, 100.0, lambda: net.now
    )
    return m, hb, net


def test_heartbeat_interval_one_in_flight_and_errors() -> None:
    m, hb, net = manager()
    assert hb.maybe_send(("a",), None) is not None
    assert hb.maybe_send(("a",), None) is None  # one in flight
    request, future = net.sent[-1]
    assert request.member_epoch == 0 and request.subscribed_topic_names == ("a",)
    future.success(response(epoch=3, assignment=SimpleNamespace(topic_partitions=())))
    assert m.member_epoch == 3 and m.heartbeat_interval_ms == 500 and m.state is MemberState.RECONCILING
    m.on_reconciled(m.plan_reconciliation(NAMES, set()))
    assert hb.maybe_send(("a",), None) is not None  # the acknowledgement leaves at once
    net.sent[-1][1].success(response(epoch=3))
    assert m.state is MemberState.STABLE
    assert hb.maybe_send(("a",), None) is None and hb.time_to_next_heartbeat_ms(net.now) == 500
    net.now = 500
    hb.maybe_send(("a",), None)
    assert net.sent[-1][0].subscribed_topic_names is None  # unchanged: not sent
    net.sent[-1][1].success(response(error=int(ErrorCode.not_coordinator)))
    assert net.unknown == ["NOT_COORDINATOR"] and hb.time_to_next_heartbeat_ms(net.now) == 100
    net.now = 600
    hb.maybe_send(("a",), None)
    assert net.sent[-1][0].subscribed_topic_names == ("a",)  # after an error: every field
    net.sent[-1][1].success(response(error=int(ErrorCode.fenced_member_epoch)))
    assert m.state is MemberState.FENCED and hb.fatal_error is None
    m.on_lost_released()
    net.now = 700
    hb.maybe_send(("a",), None)
    assert net.sent[-1][0].member_epoch == 0
    net.sent[-1][1].success(response(error=int(ErrorCode.unsupported_assignor)))
    assert m.state is MemberState.FATAL and isinstance(hb.fatal_error, UnsupportedAssignorError)
    assert hb.maybe_send(("a",), None) is None
