"""The fetch purgatory: long-polling Fetch requests parked until data arrives or they time out.

Kafka parks a ``DelayedFetch`` keyed by its partitions and re-checks it (``tryComplete``) when a
partition's log or high watermark changes (``ReplicaManager`` calls
``delayedFetchPurgatory.checkAndComplete``). Here a waiter is an asyncio future registered under
each (topic, partition) it reads; :meth:`FetchPurgatory.notify` completes the futures of a
partition and the fetch handler re-reads and decides whether it has enough (MinBytes).

Every notification is also passed to the change listeners (the KIP-227 session cache, which
marks the partition for the next read of each incremental session holding it), so an idle
incremental fetch reads and watches only what changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol

from spark_kafkalite.protocol.types import TopicPartitionKey

__all__ = ["FetchPurgatory", "PartitionChangeListener"]


class PartitionChangeListener(Protocol):
    """Told of every partition whose log, high watermark, log start offset or leadership
    changed (the same events that wake parked fetches)."""

    def partition_changed(self, key: TopicPartitionKey) -> None: ...

    def wake_all(self) -> None: ...


class FetchPurgatory:
    """Wake-up registry of parked fetches (single event loop; not thread-safe)."""

    def __init__(self) -> None:
        self._watchers: dict[TopicPartitionKey, set[asyncio.Future[bool]]] = {}
        self._listeners: list[PartitionChangeListener] = []

    def add_change_listener(self, listener: PartitionChangeListener) -> None:
        """Pass every later :meth:`notify` / :meth:`notify_all` to ``listener`` too."""
        self._listeners.append(listener)

    @property
    def num_watched_keys(self) -> int:
        return len(self._watchers)

    async def wait(self, keys: Iterable[TopicPartitionKey], timeout_s: float) -> bool:
        """Wait until one of ``keys`` is notified or ``timeout_s`` elapses.

        Returns: True if woken by a notification, False on timeout.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        watched = list(keys)
        for key in watched:
            self._watchers.setdefault(key, set()).add(future)
        timer = loop.call_later(max(0.0, timeout_s), _resolve, future, False)
        try:
            return bool(await future)
        finally:
            timer.cancel()
            for key in watched:
                waiters = self._watchers.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._watchers[key]

    def notify(self, key: TopicPartitionKey) -> None:
        """Wake every fetch watching ``key`` (after an append, HW move or deletion)."""
        for listener in self._listeners:
            listener.partition_changed(key)
        waiters = self._watchers.pop(key, None)
        if waiters:
            for future in waiters:
                _resolve(future, True)

    def notify_all(self) -> None:
        """Wake every parked fetch (shutdown)."""
        for key in list(self._watchers):
            self.notify(key)
        for listener in self._listeners:
            listener.wake_all()


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)
