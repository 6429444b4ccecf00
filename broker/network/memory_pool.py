"""Kafka's ``MemoryPool`` for request buffers (``queued.max.request.bytes``, KIP-72).

Kafka's processors allocate each request's buffer from a ``SimpleMemoryPool`` (non-strict) as
soon as the 4-byte size has been read; when the pool is exhausted the channel is muted (not read)
until memory is released, so a large request *waits* instead of failing. Non-strict as in Kafka:
an allocation is granted as soon as any memory is free, even when it is larger than what is free,
so a request of up to ``socket.request.max.bytes`` can never wait forever; the pool's bound is
therefore ``queued.max.request.bytes`` plus one request. ``-1`` (Kafka's default) = unbounded.
Waiters are served in arrival order.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["MemoryPool"]


class MemoryPool:
    """An async byte budget. ``capacity_bytes`` < 0 means unbounded (Kafka's ``MemoryPool.NONE``)."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self.available_bytes = capacity_bytes
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def bounded(self) -> bool:
        return self.capacity_bytes >= 0

    async def allocate(self, size_bytes: int) -> None:
        """Take ``size_bytes`` from the pool, waiting while it is exhausted (available <= 0) or
        earlier requests wait. Give them back with :meth:`release`."""
        if not self.bounded:
            return
        if self.available_bytes > 0 and not self._waiters:
            self.available_bytes -= size_bytes
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((size_bytes, waiter))
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(size_bytes)  # granted, then cancelled: give it back
            else:
                self._waiters.remove((size_bytes, waiter))
            raise

    def release(self, size_bytes: int) -> None:
        if not self.bounded:
            return
        self.available_bytes += size_bytes
        # Grant waiters in order while memory is free (non-strict: the last grant may overdraw).
        while self._waiters and self.available_bytes > 0:
            size, head = self._waiters.popleft()
            if head.done():  # cancelled while waiting
                continue
            self.available_bytes -= size
            head.set_result(None)
