"""Per-partition append order for appends that wait before they append.

A produce request whose batches are too large to check on the event loop is validated on a
worker thread (``broker.apis.produce``); meanwhile later requests to the same partitions must not
overtake it. Kafka gets the same order from its request queue and the partition's
``leaderIsrUpdateLock``; here an :class:`AppendTicket` taken on the event loop when the request
arrives (before any await) marks its partitions, and every later append to one of them
(``ReplicaManager.append_records``, client or coordinator) waits until the earlier tickets
appended or gave up. Appends to partitions without a pending ticket pay one dict truthiness
check.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

__all__ = ["AppendOrder", "AppendTicket"]

TopicPartitionKey = tuple[str, int]


class AppendOrder:
    """The pending tickets per partition: partition -> the future of its last ticket."""

    def __init__(self) -> None:
        self._tails: dict[TopicPartitionKey, asyncio.Future[None]] = {}

    def must_wait(self, keys: Iterable[TopicPartitionKey]) -> bool:
        """True when one of ``keys`` has an earlier ticket still pending."""
        tails = self._tails
        return bool(tails) and any(key in tails for key in keys)

    def reserve(self, keys: Iterable[TopicPartitionKey]) -> AppendTicket:
        """A ticket after every pending one on ``keys``; call on the event loop in arrival order.
        The caller must :meth:`AppendTicket.release` it (after appending, or when giving up)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        tails = self._tails
        keys = tuple(keys)
        before = []
        for key in keys:
            previous = tails.get(key)
            if previous is not None:
                before.append(previous)
            tails[key] = done
        return AppendTicket(self, keys, done, before)

    def pending_partitions(self) -> int:
        """Partitions with a pending ticket (for tests and diagnostics)."""
        return len(self._tails)

    def _remove(self, keys: tuple[TopicPartitionKey, ...], done: asyncio.Future[None]) -> None:
        tails = self._tails
        for key in keys:
            if tails.get(key) is done:
                del tails[key]


class AppendTicket:
    """One request's place in the append order of its partitions."""

    __slots__ = ("_order", "_keys", "_done", "_before", "_released")

    def __init__(
        self,
        order: AppendOrder,
        keys: tuple[TopicPartitionKey, ...],
        done: asyncio.Future[None],
        before: list[asyncio.Future[None]],
    ) -> None:
        self._order = order
        self._keys = keys
        self._done = done
        self._before = before
        self._released = False

    async def turn(self) -> None:
        """Wait until every earlier ticket on these partitions is released (their appends are
        done). Cancelling the wait leaves the earlier tickets alone."""
        for future in self._before:
            if not future.done():
                await asyncio.shield(future)

    def release(self) -> None:
        """Let the next tickets go. A ticket released before its turn (its request failed or
        was cancelled) lets them go only once the tickets before it are released, so a later
        append never overtakes an earlier one. Idempotent."""
        if self._released:
            return
        self._released = True
        pending = [future for future in self._before if not future.done()]
        if pending:
            asyncio.gather(*pending).add_done_callback(lambda _f: self._finish())
        else:
            self._finish()

    def _finish(self) -> None:
        if not self._done.done():
            self._done.set_result(None)
        self._order._remove(self._keys, self._done)
