"""The produce purgatory: ``acks=all`` produce requests waiting for the high watermark
(Kafka's ``DelayedProduce`` in ``DelayedOperationPurgatory``).

A :class:`DelayedProduce` holds, per partition it appended to, the offset the HW must reach
(``required_offset`` = last offset + 1) and a status that starts as ``REQUEST_TIMED_OUT``. It is
watched under each of its partitions; whenever a partition's HW, ISR or leadership changes the
ReplicaManager calls :meth:`ProducePurgatory.check_and_complete`, which re-evaluates the
watchers with ``Partition.check_enough_replicas_reach_offset`` (NONE,
NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER). The operation completes when every
partition is settled, or on timeout with the unsettled ones left at REQUEST_TIMED_OUT.

A change to one partition re-checks only that partition of each watching operation (Kafka's
``tryComplete`` re-checks every partition of the request): a produce request spanning P
partitions costs O(P) checks in total, not O(P^2).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from broker.cluster.partition import Partition

__all__ = ["DelayedProduce", "ProducePurgatory"]

PartitionLookup = Callable[[TopicPartitionKey], "Partition | None"]


class DelayedProduce:
    """One parked produce request.

    Attributes:
        required_offsets: {(topic, partition): offset the HW must reach}.
        errors: {(topic, partition): settled error code} (absent = still waiting).
    """

    def __init__(self, required_offsets: dict[TopicPartitionKey, int]) -> None:
        self.required_offsets = required_offsets
        self.errors: dict[TopicPartitionKey, ErrorCode] = {}
        self._future: asyncio.Future[None] | None = None

    @property
    def is_completed(self) -> bool:
        return len(self.errors) == len(self.required_offsets)

    def try_complete(self, lookup: PartitionLookup) -> bool:
        """Settle what can be settled (Kafka's ``DelayedProduce.tryComplete``); True when all are."""
        for key, required in self.required_offsets.items():
            if key in self.errors:
                continue
            partition = lookup(key)
            if partition is None:
                self.errors[key] = ErrorCode.unknown_topic_or_partition
                continue
            done, error = partition.check_enough_replicas_reach_offset(required)
            if done:
                self.errors[key] = error
        if self.is_completed and self._future is not None and not self._future.done():
            self._future.set_result(None)
        return self.is_completed

    def try_complete_partition(self, key: TopicPartitionKey, lookup: PartitionLookup) -> bool:
        """``try_complete`` for the one partition ``key`` that changed; True when all are settled."""
        required = self.required_offsets.get(key)
        if required is None or key in self.errors:
            return self.is_completed
        partition = lookup(key)
        if partition is None:
            self.errors[key] = ErrorCode.unknown_topic_or_partition
        else:
            done, error = partition.check_enough_replicas_reach_offset(required)
            if done:
                self.errors[key] = error
        if self.is_completed and self._future is not None and not self._future.done():
            self._future.set_result(None)
        return self.is_completed

    def result(self) -> dict[TopicPartitionKey, ErrorCode]:
        """Final error per partition; unsettled ones are REQUEST_TIMED_OUT."""
        return {key: self.errors.get(key, ErrorCode.request_timed_out) for key in self.required_offsets}


class ProducePurgatory:
    """Watchers of parked :class:`DelayedProduce` operations by partition (one event loop)."""

    def __init__(self, lookup: PartitionLookup) -> None:
        self._lookup = lookup
        self._watchers: dict[TopicPartitionKey, set[DelayedProduce]] = {}

    def watch_count(self) -> int:
        """Parked produces summed over the partitions each watches (Kafka's PurgatorySize);
        safe to call from another thread."""
        return sum(map(len, list(self._watchers.values())))

    @property
    def num_delayed(self) -> int:
        return len({op for ops in self._watchers.values() for op in ops})

    async def try_complete_else_watch(
        self, op: DelayedProduce, timeout_ms: int, on_park: Callable[[], None] | None = None
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """Complete ``op`` now if possible, else park it until completed or ``timeout_ms``
        elapses (one timer; Kafka's ``DelayedOperation`` timer task). ``on_park`` is called
        when it parks (the socket server frees the request's ``queued.max.requests`` slot).
        Returns the error per partition."""
        if op.try_complete(self._lookup):
            return op.result()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        op._future = future
        keys = list(op.required_offsets)
        for key in keys:
            self._watchers.setdefault(key, set()).add(op)
        timer = loop.call_later(max(timeout_ms, 0) / 1000, _expire, future)
        try:
            if on_park is not None:
                on_park()
            await future
        finally:
            timer.cancel()
            for key in keys:
                ops = self._watchers.get(key)
                if ops is not None:
                    ops.discard(op)
                    if not ops:
                        del self._watchers[key]
        return op.result()

    def check_and_complete(self, key: TopicPartitionKey) -> int:
        """Re-evaluate the operations watching ``key``; returns how many completed."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        completed = 0
        for op in list(ops):
            if op.try_complete_partition(key, self._lookup):
                completed += 1
        return completed

    def complete_all(self) -> None:
        """Re-evaluate everything (shutdown / large metadata changes)."""
        for key in list(self._watchers):
            self.check_and_complete(key)


def _expire(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)  # the unsettled partitions stay REQUEST_TIMED_OUT
