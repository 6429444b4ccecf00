"""Event-loop lag: how late the broker's single asyncio loop runs its callbacks, and who held it.

Every connection, the controller's heartbeats and the replica fetchers share one event loop, so
any CPU-heavy step on it stalls them all (Kafka keeps such work off its network threads; its
``RequestChannel`` / ``SocketServer`` expose the related ``NetworkProcessorAvgIdlePercent`` and
``RequestHandlerAvgIdlePercent`` gauges). :class:`EventLoopMonitor` measures it two ways:

- a periodic callback (every ``interval_ms``) records how late it ran: the scheduling delay
  every other callback saw at that moment, into :class:`LoopLagStats` (a histogram and the
  maximum), and marks the loop as alive;
- a watchdog thread that, when the loop has not ticked for more than
  ``kafkalite.event.loop.stall.threshold.ms``, takes the loop thread's Python stack with
  ``faulthandler.dump_traceback`` and logs it once per stall episode (a WARNING naming the code
  that holds the loop), then logs the stall's length when the loop runs again. faulthandler
  reads the running thread's frames in C without creating frame objects; building frame objects
  of another running thread (``sys._current_frames()`` and ``f_back``) can crash CPython 3.11
  (python/cpython#99110, #111363).

The figures are served by :meth:`LoopLagStats.snapshot` (a JSON-able dict) and written to the
broker's first log dir as ``loop-lag.json`` every few seconds (``kafkalite cluster status``
shows them).
"""

from __future__ import annotations

import asyncio
import bisect
import faulthandler
import logging
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EventLoopMonitor", "LoopLagStats", "LAG_BUCKETS_MS"]

logger = logging.getLogger(__name__)

LAG_BUCKETS_MS: tuple[float, ...] = (1, 5, 10, 25, 50, 100, 200, 500, 1000, 5000)
"""Upper bounds (ms, inclusive) of the lag histogram; a last bucket counts everything above."""

_STACK_LIMIT = 40  # innermost frames kept of a stalled loop's stack
_THREAD_ID = re.compile(r"0x[0-9a-fA-F]+")


def thread_stack(thread_id: int, limit: int = _STACK_LIMIT) -> str:
    """The Python stack of thread ``thread_id`` (a ``threading.get_ident()`` value) as
    ``faulthandler`` prints it: a ``Thread 0x... (most recent call first):`` line, then at most
    ``limit`` ``File "...", line N in function`` lines, innermost first. Empty when the thread
    has no Python frame or does not exist.

    Safe to call from another thread while ``thread_id`` runs: faulthandler walks the frames in
    C under the GIL without creating frame objects."""
    with tempfile.TemporaryFile() as out:
        faulthandler.dump_traceback(out, all_threads=True)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith(("Thread 0x", "Current thread 0x")):
            if block:
                break
            match = _THREAD_ID.search(line)
            if match is not None and int(match.group(0), 16) == thread_id:
                block.append(line)
        elif block and line.strip():
            if len(block) <= limit:
                block.append(line)
    return "\n".join(block) + "\n" if block else ""


@dataclass
class LoopLagStats:
    """Scheduling delay of the event loop, as the periodic callback saw it.

    Attributes:
        samples: callbacks measured.
        bucket_counts: per :data:`LAG_BUCKETS_MS` bound, then one for larger lags.
        max_lag_ms: the largest lag seen since start.
        stall_episodes: times the loop did not tick for longer than the threshold.
        last_stall_ms: length of the last completed stall episode (0 = none yet).
        last_stall_stack: the loop thread's stack when the last episode was detected.
    """

    samples: int = 0
    bucket_counts: list[int] = field(default_factory=lambda: [0] * (len(LAG_BUCKETS_MS) + 1))
    max_lag_ms: float = 0.0
    stall_episodes: int = 0
    last_stall_ms: float = 0.0
    last_stall_stack: str = ""

    def record(self, lag_ms: float) -> None:
        self.samples += 1
        self.bucket_counts[bisect.bisect_left(LAG_BUCKETS_MS, lag_ms)] += 1
        if lag_ms > self.max_lag_ms:
            self.max_lag_ms = lag_ms

    def count_over(self, bound_ms: float) -> int:
        """Samples whose lag exceeded ``bound_ms`` (one of :data:`LAG_BUCKETS_MS`)."""
        return sum(self.bucket_counts[LAG_BUCKETS_MS.index(bound_ms) + 1 :])

    def snapshot(self) -> dict[str, Any]:
        """The figures as a JSON-able dict (histogram keys: ``le_<ms>`` and ``gt_<last ms>``)."""
        buckets = {f"le_{bound:g}": n for bound, n in zip(LAG_BUCKETS_MS, self.bucket_counts, strict=False)}
        buckets[f"gt_{LAG_BUCKETS_MS[-1]:g}"] = self.bucket_counts[-1]
        return {
            "samples": self.samples,
            "max_lag_ms": round(self.max_lag_ms, 1),
            "histogram_ms": buckets,
            "stall_episodes": self.stall_episodes,
            "last_stall_ms": round(self.last_stall_ms, 1),
            "last_stall_stack": self.last_stall_stack,
        }


class EventLoopMonitor:
    """Measures the lag of the running loop and reports stalls (see the module docstring).

    Args:
        stall_threshold_ms: a loop that has not ticked for longer is a stall episode.
        interval_ms: period of the measuring callback; by default the threshold, within
            [50, 250] ms (each tick wakes the loop: 20 ticks/s cost an idle broker ~0.3 % CPU).
            A stall is seen once the loop is that much late for a tick, so one longer than
            threshold + interval is always reported.
    """

    def __init__(self, stall_threshold_ms: int, interval_ms: int | None = None) -> None:
        self.stall_threshold_s = stall_threshold_ms / 1000.0
        if interval_ms is None:
            interval_ms = min(max(stall_threshold_ms, 50), 250)
        self.interval_s = interval_ms / 1000.0
        self.stats = LoopLagStats()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread_id = 0
        self._last_tick = time.monotonic()
        self._expected = 0.0
        self._handle: asyncio.TimerHandle | None = None
        self._episode_started: float | None = None  # set by the watchdog thread, cleared by a tick
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start measuring the running loop (call on it)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread_id = threading.get_ident()
        self._last_tick = time.monotonic()
        self._expected = self._loop.time() + self.interval_s
        self._handle = self._loop.call_at(self._expected, self._tick)
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="event-loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            self._thread = None

    def _tick(self) -> None:
        loop = self._loop
        if loop is None:
            raise RuntimeError("event loop monitor ticked before start()")
        now = loop.time()
        lag_ms = max(now - self._expected, 0.0) * 1000
        self.stats.record(lag_ms)
        self._last_tick = time.monotonic()
        if self._episode_started is not None:
            self._episode_started = None
            self.stats.last_stall_ms = lag_ms
            logger.warning("event loop running again after a stall of %.0f ms", lag_ms)
        self._expected = now + self.interval_s
        self._handle = loop.call_at(self._expected, self._tick)

    def _watch(self) -> None:
        """Watchdog thread: one WARNING with the loop's stack per stall episode. It sleeps
        until the moment the last tick would become a stall (a healthy loop wakes it about
        once per threshold, not at a fixed short period), and polls every quarter threshold
        (at most 0.1 s) while an episode lasts."""
        period = max(min(self.stall_threshold_s / 4, 0.1), 0.005)
        while True:
            if self._episode_started is not None:
                wait = period
            else:
                due = self._last_tick + self.interval_s + self.stall_threshold_s
                wait = max(due - time.monotonic(), 0.005)
            if self._stop.wait(wait):
                return
            silent = time.monotonic() - self._last_tick - self.interval_s
            if silent <= self.stall_threshold_s or self._episode_started is not None:
                continue
            stack = thread_stack(self._loop_thread_id)
            self._episode_started = time.monotonic()
            self.stats.stall_episodes += 1
            self.stats.last_stall_stack = stack
            logger.warning(
                "event loop stalled: no tick for %.0f ms (kafkalite.event.loop.stall.threshold.ms=%.0f); "
                "the loop thread is in:\n%s",
                silent * 1000,
                self.stall_threshold_s * 1000,
                stack.rstrip(),
            )
