"""The active controller's duty loop (``BrokerHeartbeatManager``) after a stall of its own process (SIGSTOP, swap): the
silence it measured across the stall is its own, so it restarts the broker session clocks
instead of fencing brokers whose heartbeats wait unread in its sockets (seen in the chaos soak:
a resumed controller fenced a healthy leader, ``no heartbeat for 3.3 s``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from broker.controller import broker_heartbeat_manager as bhm
from broker.controller.controller_commands import MetadataStateMachine
from spark_kafkalite.protocol.errors import ErrorCode


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0


async def _never_submitted(command: object) -> None:
    raise AssertionError(f"unexpected proposal {command!r}")


def _run_loop(
    monkeypatch: pytest.MonkeyPatch, jumps: list[float]
) -> tuple[bhm.BrokerHeartbeatManager, list[float]]:
    """Run the active controller's duty loop (``BrokerHeartbeatManager.run``) on a fake clock:
    each sleep advances it by the tick plus the next value of ``jumps`` (extra seconds the
    process was stopped); returns the manager and the clock times at which the fencing check
    ran."""
    clock = _Clock()
    monkeypatch.setattr(bhm.time, "monotonic", lambda: clock.now)
    checks: list[float] = []
    manager = bhm.BrokerHeartbeatManager(
        1, SimpleNamespace(is_leader=True), _never_submitted, session_timeout_s=2.0, auto_rebalance=False
    )
    manager.leader_since = clock.now

    async def fence() -> None:
        checks.append(clock.now)

    manager.fence_expired_brokers = fence  # type: ignore[method-assign]
    remaining = list(jumps)

    async def fake_sleep(seconds: float) -> None:
        if not remaining:
            raise asyncio.CancelledError
        clock.now += seconds + remaining.pop(0)

    monkeypatch.setattr(bhm.asyncio, "sleep", fake_sleep)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(manager.run())
    return manager, checks


def test_a_stall_longer_than_half_the_session_restarts_the_session_clocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    controller, checks = _run_loop(monkeypatch, [0.0, 3.3, 0.0])
    # the tick after the 3.3 s stall skips the fencing check and restarts the clocks there
    assert len(checks) == 2
    stalled_tick = checks[0] + 0.25 + 3.3
    assert controller.fence_after == pytest.approx(stalled_tick + 2.0)
    assert checks[1] == pytest.approx(stalled_tick + 0.25)


def test_normal_ticks_and_short_delays_keep_checking(monkeypatch: pytest.MonkeyPatch) -> None:
    controller, checks = _run_loop(monkeypatch, [0.0, 0.5, 0.0, 0.9])
    assert len(checks) == 4
    assert controller.fence_after == 0.0


def test_a_new_controller_fences_a_broker_one_session_after_its_last_heartbeat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Heartbeats reach every voter outside the log, and each voter notes them. Broker 1 died
    with the previous controller (its last heartbeat reached this voter at 999.3); broker 2
    heartbeats on; this node becomes active at 1000.0 (session 2 s): broker 1 is fenced at
    ~1001.3 instead of 1002.0+ (one session after the election), broker 2 never, and a
    heartbeat of a stale epoch does not count."""
    clock = _Clock()
    monkeypatch.setattr(bhm.time, "monotonic", lambda: clock.now)
    fenced: list[tuple[int, float]] = []
    brokers = {1: SimpleNamespace(fenced=False, epoch=7), 2: SimpleNamespace(fenced=False, epoch=8)}
    image = SimpleNamespace(brokers=brokers)
    machine = MetadataStateMachine(image)  # type: ignore[arg-type]
    quorum = SimpleNamespace(is_leader=True, term=4, image=image, machine=machine)

    async def submit(command: object) -> None:
        fenced.append((command.node_id, clock.now))  # type: ignore[attr-defined]
        brokers[command.node_id].fenced = True  # type: ignore[attr-defined]  # as the commit does

    controller = bhm.BrokerHeartbeatManager(3, quorum, submit, session_timeout_s=2.0)
    clock.now = 999.3
    assert controller.answer_heartbeat((1, 7, 7), False) is None  # heard as a follower
    clock.now = 999.9
    assert controller.answer_heartbeat((2, 8, 8), False) is None
    clock.now = 1000.0
    controller.on_state_change(True)
    for now in (1000.5, 1000.9, 1001.4, 1001.8):
        clock.now = now
        assert controller.answer_heartbeat((2, 8, 8), True) == (0, True, False, False)
        assert controller.answer_heartbeat((1, 6, 0), True)[0] == ErrorCode.stale_broker_epoch  # type: ignore[index]
        asyncio.run(controller.fence_expired_brokers())
    assert fenced == [(1, 1001.4)]
