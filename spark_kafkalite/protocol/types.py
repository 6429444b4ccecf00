"""Small value types both sides of the wire use.

``TopicPartitionKey`` is the ``(topic, partition)`` pair that keys per-partition state in the
broker (logs, replicas, purgatories, fetch sessions, group offsets) and in the client.
``TopicPartition`` (Java's ``TopicPartition``, public in the client) is a named
``TopicPartitionKey``: the two compare and hash alike.
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

__all__ = ["TopicPartitionKey", "TopicPartition"]

TopicPartitionKey: TypeAlias = tuple[str, int]


class TopicPartition(NamedTuple):
    """A partition of a topic (Java ``TopicPartition``)."""

    topic: str
    partition: int
