"""Small value types both sides of the wire use.

``TopicPartitionKey`` is the ``(topic, partition)`` pair that keys per-partition state in the
broker (logs, replicas, purgatories, fetch sessions, group offsets) and in the client. The client's
public ``TopicPartition`` NamedTuple (Java's ``TopicPartition``) is a ``TopicPartitionKey`` too.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["TopicPartitionKey"]

TopicPartitionKey: TypeAlias = tuple[str, int]
