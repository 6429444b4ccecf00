"""Public value types of the client (Java's ``TopicPartition``, ``ConsumerRecord``, ...).

All are immutable tuples (cheap to build on the consumer's hot path) except ``NewTopic``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from spark_kafkalite.protocol.types import TopicPartition

__all__ = [
    "TopicPartition",
    "ConsumerRecord",
    "RecordMetadata",
    "OffsetAndTimestamp",
    "NewTopic",
    "PartitionInfo",
    "Header",
    "TIMESTAMP_TYPE_CREATE_TIME",
    "TIMESTAMP_TYPE_LOG_APPEND_TIME",
]

Header = tuple[str, "bytes | None"]

TIMESTAMP_TYPE_CREATE_TIME = 0
TIMESTAMP_TYPE_LOG_APPEND_TIME = 1


class ConsumerRecord(NamedTuple):
    """One record returned by ``KafkaConsumer.poll``.

    ``timestamp_ms`` is milliseconds since the epoch; ``timestamp_type`` is 0 for CreateTime and 1
    for LogAppendTime (Kafka's ``TimestampType`` ids); ``headers`` keeps the wire order.
    """

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. ``offset`` is -1 with ``acks=0``."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


class OffsetAndTimestamp(NamedTuple):
    """An offset and the timestamp (ms) of the record there (-1 when the broker gives none)."""

    offset: int
    timestamp_ms: int


class PartitionInfo(NamedTuple):
    """A partition as the cluster metadata describes it; ``leader`` is -1 when there is none."""

    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    leader_epoch: int


@dataclass
class NewTopic:
    """A topic to create. ``-1`` partitions / replication factor use the broker's defaults
    (``num.partitions`` / ``default.replication.factor``; CreateTopics v4+, KIP-464)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: dict[str, str] = field(default_factory=dict)
