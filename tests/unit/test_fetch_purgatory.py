"""The fetch purgatory's waits: notifications, timeouts, and expiry bursts paced per loop turn
(broker.replication.delayed_fetch)."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.replication.delayed_fetch import EXPIRATIONS_PER_LOOP_TURN, MAX_EXPIRY_LAG_S, FetchPurgatory


class _TurnCounter:
    """Counts event-loop turns: one callback that reschedules itself with call_soon runs once
    per turn (the loop polls its sockets between turns)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.turn = 0
        self._loop = loop
        self._handle = loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.turn += 1
        self._handle = self._loop.call_soon(self._tick)

    def stop(self) -> None:
        self._handle.cancel()


@pytest.mark.parametrize("per_turn", [1, EXPIRATIONS_PER_LOOP_TURN])
def test_a_burst_of_expirations_is_resolved_a_bounded_number_per_loop_turn(per_turn: int) -> None:
    async def main() -> dict[int, int]:
        # (no lag bound here: a preempted test process must not resolve the rest at once)
        purgatory = FetchPurgatory(expirations_per_turn=per_turn, max_expiry_lag_s=60.0)
        turns = _TurnCounter(asyncio.get_running_loop())
        woken_at: dict[int, int] = {}

        async def fetch(i: int) -> None:
            assert await purgatory.wait([("t", i % 3)], 0.02) is False  # timed out
            woken_at[i] = turns.turn

        await asyncio.gather(*(fetch(i) for i in range(25)))  # all expire in the same timer tick
        turns.stop()
        assert purgatory.num_watched_keys == 0
        per = {}
        for turn in woken_at.values():
            per[turn] = per.get(turn, 0) + 1
        return per

    per = asyncio.run(main())
    assert sum(per.values()) == 25
    assert max(per.values()) <= per_turn
    assert len(per) >= 25 // per_turn  # spread over that many turns, not answered in one


def test_a_notification_wakes_at_once_and_a_notified_wait_is_not_expired_again() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        purgatory = FetchPurgatory(expirations_per_turn=1, max_expiry_lag_s=60.0)
        timed_out = [asyncio.ensure_future(purgatory.wait([("idle", 0)], 0.01)) for _ in range(6)]
        notified = asyncio.ensure_future(purgatory.wait([("busy", 0)], 0.01))
        await asyncio.wait([timed_out[0]])  # the timers fired: resolved one per turn from here
        assert not notified.done()  # queued last for expiry ...
        purgatory.notify(("busy", 0))  # ... when the notification wins
        assert await notified is True
        started = loop.time()
        assert await asyncio.gather(*timed_out) == [False] * 6
        assert loop.time() - started < 1.0
        assert purgatory.num_watched_keys == 0
        # A cancelled wait (its connection closed) leaves nothing behind either.
        cancelled = asyncio.ensure_future(purgatory.wait([("idle", 1)], 10.0))
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert purgatory.num_watched_keys == 0

    asyncio.run(main())


def test_on_a_saturated_loop_expirations_are_not_held_back_past_the_lag_bound() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        purgatory = FetchPurgatory(expirations_per_turn=1)
        busy_turns = [0]

        def busy() -> None:  # other work: each loop turn takes 10 ms of CPU
            time.sleep(0.01)
            busy_turns[0] += 1
            if busy_turns[0] < 100:
                loop.call_soon(busy)

        waits = [asyncio.ensure_future(purgatory.wait([("t", i)], 0.01)) for i in range(20)]
        loop.call_soon(busy)
        assert await asyncio.gather(*waits) == [False] * 20
        # One per turn would take 20 turns; past the lag bound (a few 10 ms turns after the
        # timers fired) the rest are resolved together.
        assert busy_turns[0] <= 2 + round(MAX_EXPIRY_LAG_S / 0.01) + 4

    asyncio.run(main())
