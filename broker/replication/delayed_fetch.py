"""The fetch purgatory: long-polling Fetch requests parked until data arrives or they time out.

Kafka parks a ``DelayedFetch`` keyed by its partitions and re-checks it (``tryComplete``) when a
partition's log or high watermark changes (``ReplicaManager`` calls
``delayedFetchPurgatory.checkAndComplete``). Here a waiter is an asyncio future registered under
each (topic, partition) it reads; :meth:`FetchPurgatory.notify` completes the futures of a
partition and the fetch handler re-reads and decides whether it has enough (MinBytes).

Every notification is also passed to the change listeners (the KIP-227 session cache, which
marks the partition for the next read of each incremental session holding it), so an idle
incremental fetch reads and watches only what changed.

Expiry is paced: Kafka expires delayed operations on the purgatory's own reaper thread
(``DelayedOperationPurgatory.ExpiredOperationReaper``), beside the threads that serve new
requests. Here everything shares one event loop, and the long polls of many consumers that
started together (1,000 clients reconnecting, or answered in one burst) time out in the same
loop turn: each then reads and answers its fetch, and a request that arrived meanwhile would
wait behind all of them. An expired wait therefore joins a FIFO of expirations, of which at most
:data:`EXPIRATIONS_PER_LOOP_TURN` are resolved per loop turn (the event loop polls its sockets
between turns), so new requests interleave with an expiry burst instead of queueing behind it;
none waits more than :data:`MAX_EXPIRY_LAG_S` for its turn. A notification still wakes its
waiters at once.

A high-watermark move alone wakes consumers' fetches only: a follower's ``DelayedFetch``
completes on bytes up to the log end offset (``FetchIsolation.LOG_END``), which a HW move does
not add, so Kafka's ``tryComplete`` leaves it parked. The follower learns the new HW with its
next records, or when its fetch expires after ``replica.fetch.wait.max.ms``. Waking it anyway
would cost the leader a read and a re-park of every other follower's fetch each time an
``acks=all`` batch is acknowledged.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable
from typing import Protocol

from spark_kafkalite.protocol.types import TopicPartitionKey

__all__ = ["FetchPurgatory", "PartitionChangeListener", "EXPIRATIONS_PER_LOOP_TURN", "MAX_EXPIRY_LAG_S"]

EXPIRATIONS_PER_LOOP_TURN = 4
"""Expired waits resolved per event-loop turn (each then reads and answers its fetch, ~0.3 ms of
CPU for an empty partition): a request arriving during an expiry burst waits behind at most this
many, not the whole burst. On an idle loop a turn takes microseconds, so a burst still drains at
once in wall-clock terms."""

MAX_EXPIRY_LAG_S = 0.02
"""An expired wait is resolved at most this long after its timer fired, however many are queued:
on a loop saturated with other work (turns of tens of ms) the pace above would otherwise let
expirations fall behind without bound; past this lag they are resolved as before, all at once."""


class PartitionChangeListener(Protocol):
    """Told of every partition whose log, high watermark, log start offset or leadership
    changed (the same events that wake parked fetches)."""

    def partition_changed(self, key: TopicPartitionKey, wake_followers: bool = True) -> None: ...

    def wake_all(self) -> None: ...


class FetchPurgatory:
    """Wake-up registry of parked fetches (single event loop; not thread-safe).

    Args:
        expirations_per_turn: expired waits resolved per loop turn (see the module docstring).
        max_expiry_lag_s: the longest an expired wait is queued for its turn.
    """

    def __init__(
        self,
        expirations_per_turn: int = EXPIRATIONS_PER_LOOP_TURN,
        max_expiry_lag_s: float = MAX_EXPIRY_LAG_S,
    ) -> None:
        self._watchers: dict[TopicPartitionKey, set[asyncio.Future[bool]]] = {}
        #: parked followers' fetches (woken by :meth:`notify`, not by :meth:`notify_high_watermark`)
        self._follower_watchers: dict[TopicPartitionKey, set[asyncio.Future[bool]]] = {}
        self._listeners: list[PartitionChangeListener] = []
        self._expirations_per_turn = max(1, expirations_per_turn)
        self._expired: deque[tuple[float, asyncio.Future[bool]]] = deque()  # (timer fired, wait)
        self._reaping = False
        self._max_expiry_lag_s = max_expiry_lag_s

    def add_change_listener(self, listener: PartitionChangeListener) -> None:
        """Pass every later :meth:`notify` / :meth:`notify_all` to ``listener`` too."""
        self._listeners.append(listener)

    def watch_count(self) -> int:
        """Parked fetches summed over the partitions each watches (Kafka's PurgatorySize counts
        an operation once per key it watches); safe to call from another thread."""
        return sum(map(len, list(self._watchers.values()))) + sum(
            map(len, list(self._follower_watchers.values()))
        )

    @property
    def num_watched_keys(self) -> int:
        return len(self._watchers.keys() | self._follower_watchers.keys())

    async def wait(self, keys: Iterable[TopicPartitionKey], timeout_s: float, follower: bool = False) -> bool:
        """Wait until one of ``keys`` is notified or ``timeout_s`` elapses (then, in a burst of
        expirations, for its turn: see the module docstring); a ``follower``'s fetch is not
        woken by a high-watermark move alone (see the module docstring).

        Returns: True if woken by a notification, False on timeout.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        watched = list(keys)
        watchers = self._follower_watchers if follower else self._watchers
        for key in watched:
            watchers.setdefault(key, set()).add(future)
        timer = loop.call_later(max(0.0, timeout_s), self._expire, loop, future)
        try:
            return bool(await future)
        finally:
            timer.cancel()
            for key in watched:
                waiters = watchers.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del watchers[key]

    def _expire(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[bool]) -> None:
        """Timer callback: queue ``future`` for the reaper, which resolves it in its turn."""
        if future.done():
            return
        self._expired.append((loop.time(), future))
        if not self._reaping:
            self._reaping = True
            loop.call_soon(self._reap, loop)

    def _reap(self, loop: asyncio.AbstractEventLoop) -> None:
        """Resolve (False: timed out) at most ``expirations_per_turn`` queued expirations, and
        any queued longer than ``max_expiry_lag_s``; come back on the next loop turn while
        some remain (a notified or cancelled wait is skipped)."""
        expired = self._expired
        overdue_before = loop.time() - self._max_expiry_lag_s
        resolved = 0
        while expired and (resolved < self._expirations_per_turn or expired[0][0] <= overdue_before):
            _fired, future = expired.popleft()
            if not future.done():
                future.set_result(False)
                resolved += 1
        if expired:
            loop.call_soon(self._reap, loop)
        else:
            self._reaping = False

    def notify(self, key: TopicPartitionKey) -> None:
        """Wake every fetch watching ``key`` (after an append, a leadership, ISR or log start
        change, a deletion)."""
        for listener in self._listeners:
            listener.partition_changed(key)
        _resolve_all(self._watchers.pop(key, None))
        _resolve_all(self._follower_watchers.pop(key, None))

    def notify_high_watermark(self, key: TopicPartitionKey) -> None:
        """The high watermark of ``key`` moved and nothing else changed: wake the consumers'
        fetches watching it; followers' fetches stay parked (the listeners mark the partition
        so that their next response carries the new HW)."""
        for listener in self._listeners:
            listener.partition_changed(key, False)
        _resolve_all(self._watchers.pop(key, None))

    def notify_all(self) -> None:
        """Wake every parked fetch (shutdown)."""
        for key in list(self._watchers.keys() | self._follower_watchers.keys()):
            self.notify(key)
        for listener in self._listeners:
            listener.wake_all()


def _resolve_all(futures: set[asyncio.Future[bool]] | None) -> None:
    if futures:
        for future in futures:
            _resolve(future, True)


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
