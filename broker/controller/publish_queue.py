"""Applies committed metadata deltas to the logs and replication in order, in slices.

A delta is applied by a generator of steps (one per partition or small group of partitions).
A small delta (the usual case) runs to the end at once, inside the call that published it, as
Kafka's ``BrokerMetadataPublisher`` does; a large one (CreateTopics of thousands of partitions,
a controller failover moving a broker's leaderships) runs for at most ``slice_ms`` per
event-loop step and continues in a task, so requests (health probes, fetches, heartbeats) are
served between slices. Deltas published while one is being applied wait behind it: they are
applied strictly in publication order, never interleaved (Kafka applies one delta at a time on
its single metadata-loader thread).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Iterator

logger = logging.getLogger(__name__)


class MetadataPublishQueue:
    """FIFO of delta applications (generators of steps), run with a time budget per loop step.

    Attributes:
        slices: how many event-loop steps the applications took (counts, for tests and logs).
    """

    def __init__(self, slice_ms: float = 20.0) -> None:
        self._slice_s = slice_ms / 1000
        self._pending: collections.deque[Iterator[None]] = collections.deque()
        self._task: asyncio.Task[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self.slices = 0

    @property
    def busy(self) -> bool:
        """True while an application is pending or under way."""
        return bool(self._pending)

    async def applied(self) -> None:
        """Return once everything published so far is applied (at once when nothing is
        pending). A CreateTopics response waits for it, so the topic is served here when the
        client gets its answer, as when a delta was applied in one step."""
        if not self._pending:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter

    def publish(self, steps: Iterator[None]) -> None:
        """Queue ``steps`` behind the applications already pending; run them now for up to one
        slice when nothing is pending (a small delta completes before this returns), else in
        the queue's task. Without a running event loop, everything runs at once."""
        self._pending.append(steps)
        if self._task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.run_all()
            return
        if not self._run_for(time.monotonic() + self._slice_s):
            self._task = loop.create_task(self._drain(), name="metadata-publisher")

    def run_all(self) -> None:
        """Apply everything pending now, without yielding (start-up, before serving)."""
        self._run_for(float("inf"))

    def _run_for(self, deadline: float) -> bool:
        """Run pending steps until the queue is empty (True) or ``deadline`` passed (False)."""
        self.slices += 1
        while self._pending:
            steps = self._pending[0]
            for _ in steps:
                if time.monotonic() >= deadline:
                    return False
            self._pending.popleft()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        return True

    async def _drain(self) -> None:
        try:
            while True:
                await asyncio.sleep(0)
                try:
                    if self._run_for(time.monotonic() + self._slice_s):
                        return
                except Exception:
                    logger.exception("applying a metadata delta failed; the next deltas are applied")
                    self._pending.popleft()
        finally:
            self._task = None

    async def close(self) -> None:
        """Stop applying (shutdown): pending applications are dropped."""
        task, self._task = self._task, None
        self._pending.clear()
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.cancel()
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
