"""Clock and timers of the group coordinator (Kafka's ``Time`` + the purgatory timers of
``DelayedJoin`` / ``InitialDelayedJoin`` / ``DelayedHeartbeat`` / ``DelayedSync``).

:class:`AsyncioScheduler` uses the running event loop; :class:`ManualScheduler` is a fake clock
for unit tests (timers fire only when the test calls :meth:`ManualScheduler.advance`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Scheduler", "TimerHandle", "AsyncioScheduler", "ManualScheduler"]

logger = logging.getLogger(__name__)


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def now_ms(self) -> int:
        """Wall clock in ms since the epoch."""
        ...

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        """Run ``fn()`` once after ``delay_ms`` (>= 0) unless cancelled."""
        ...


class AsyncioScheduler:
    """Timers on the running asyncio loop, wall clock from ``time.time()``."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, _logged, fn)


def _logged(fn: Callable[[], None]) -> None:
    """A failing timer is logged with its traceback; the event loop and other groups go on."""
    try:
        fn()
    except Exception:
        logger.exception("group coordinator timer %r failed", fn)


class _ManualTimer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """A fake clock: ``advance(ms)`` moves time and fires due timers in deadline order."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._seq = itertools.count()
        self._heap: list[tuple[int, int, _ManualTimer, Callable[[], None]]] = []

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        timer = _ManualTimer()
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), next(self._seq), timer, fn))
        return timer

    def advance(self, ms: int) -> None:
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, _, timer, fn = heapq.heappop(self._heap)
            self._now = max(self._now, deadline)
            if not timer.cancelled:
                fn()
        self._now = target

    def pending(self) -> int:
        return sum(1 for _, _, t, _ in self._heap if not t.cancelled)
