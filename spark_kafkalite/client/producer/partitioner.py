"""Default partitioning, compatible with Kafka's Java producer.

Keyed records: ``toPositive(murmur2(key)) % num_partitions`` (``BuiltInPartitioner.partitionForKey``
with ``Utils.murmur2``, seed ``0x9747b28c``) over *all* partitions, so keys land where the Java
client and librdkafka's ``murmur2_random`` put them. Records without a key use a sticky partition
per topic (KIP-480 / KIP-794): the producer keeps filling one partition that has a leader and
moves to another random one after ``batch.size`` bytes.
"""

from __future__ import annotations

import bisect
import random
import threading
from typing import TYPE_CHECKING

from spark_kafkalite.protocol.record_encoding import murmur2

if TYPE_CHECKING:
    from _typeshed import SupportsLenAndGetItem

__all__ = ["murmur2", "to_positive", "partition_for_key", "StickyPartitioner"]


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client picks for ``key`` among ``num_partitions``
    (``BuiltInPartitioner.partitionForKey``)."""
    return (murmur2(bytes(key)) & 0x7FFFFFFF) % num_partitions


class StickyPartitioner:
    """Sticky partition choice for records without a key (thread-safe).

    Args:
        sticky_batch_size_bytes: bytes to send to one partition before switching (``batch.size``).
    """

    def __init__(self, sticky_batch_size_bytes: int) -> None:
        self._limit = max(1, sticky_batch_size_bytes)
        self._lock = threading.Lock()
        self._current: dict[str, list[int]] = {}  # topic -> [partition, bytes produced]

    def partition(self, topic: str, available: list[int], num_partitions: int, record_size: int) -> int:
        """A partition for a keyless record of ``record_size`` bytes.

        ``available`` are the partitions with a leader; when empty, any of ``num_partitions``.
        """
        state = self._current.get(topic)
        if state is not None and state[1] < self._limit and (not available or state[0] in available):
            state[1] += record_size  # racy under threads, harmless: only the switch point moves
            return state[0]
        with self._lock:
            state = self._sticky_state(topic, available, num_partitions)
            state[1] += record_size
            return state[0]

    def _sticky_state(self, topic: str, available: list[int], num_partitions: int) -> list[int]:
        """The topic's [partition, bytes produced], switched first when full or unavailable
        (caller holds the lock)."""
        state = self._current.get(topic)
        if state is None or state[1] >= self._limit or (available and state[0] not in available):
            previous = state[0] if state is not None else -1
            choices = available or list(range(num_partitions))
            if len(choices) > 1:
                choices = [p for p in choices if p != previous]
            state = [random.choice(choices), 0]
            self._current[topic] = state
        return state

    def partition_runs(
        self,
        topic: str,
        available: list[int],
        num_partitions: int,
        cumulative_sizes: SupportsLenAndGetItem[int],
    ) -> list[tuple[int, int]]:
        """Sticky partitions for consecutive keyless records, the same choices as calling
        :meth:`partition` for each: record ``i`` brings the running byte total to
        ``cumulative_sizes[i]``. Returns ``(end, partition)`` runs: records ``[previous end, end)``
        go to ``partition``. Work per partition switch (every ``batch.size`` bytes), not per record.
        """
        runs: list[tuple[int, int]] = []
        n = len(cumulative_sizes)
        i = 0
        base = 0
        with self._lock:
            while i < n:
                state = self._sticky_state(topic, available, num_partitions)
                # records go to the current partition while its byte count before them is < limit
                j = min(bisect.bisect_left(cumulative_sizes, base + self._limit - state[1], lo=i) + 1, n)
                total = int(cumulative_sizes[j - 1])
                state[1] += total - base
                base = total
                runs.append((j, state[0]))
                i = j
        return runs
