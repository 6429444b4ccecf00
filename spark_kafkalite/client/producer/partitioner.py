"""Default partitioning, compatible with Kafka's Java producer.

Keyed records: ``toPositive(murmur2(key)) % num_partitions`` (``BuiltInPartitioner.partitionForKey``
with ``Utils.murmur2``, seed ``0x9747b28c``) over *all* partitions, so keys land where the Java
client and librdkafka's ``murmur2_random`` put them. Records without a key use a sticky partition
per topic (KIP-480 / KIP-794): the producer keeps filling one partition that has a leader and
moves to another random one after ``batch.size`` bytes.
"""

from __future__ import annotations

import random
import struct
import threading
from functools import lru_cache

__all__ = ["murmur2", "to_positive", "partition_for_key", "StickyPartitioner"]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``data`` as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length // 4
    if n4:
        for k in struct.unpack_from(f"<{n4}I", data, 0):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return number & 0x7FFFFFFF


@lru_cache(maxsize=65536)
def _positive_hash(key: bytes) -> int:
    return to_positive(murmur2(key))


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition the Java client picks for ``key`` among ``num_partitions``.

    Hashes of recent keys are cached (real key sets repeat: users, carriers, devices), which
    removes the pure-Python murmur2 from the per-record cost for repeated keys."""
    if type(key) is bytes and len(key) <= 256:
        return _positive_hash(key) % num_partitions
    return to_positive(murmur2(bytes(key))) % num_partitions


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
            state = self._current.get(topic)
            if state is None or state[1] >= self._limit or (available and state[0] not in available):
                previous = state[0] if state is not None else -1
                choices = available or list(range(num_partitions))
                if len(choices) > 1:
                    choices = [p for p in choices if p != previous]
                state = [random.choice(choices), 0]
                self._current[topic] = state
            state[1] += record_size
            return state[0]
