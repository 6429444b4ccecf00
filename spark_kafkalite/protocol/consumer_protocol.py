"""Java's ``ConsumerProtocol``: the ``consumer`` protocol type's member metadata and assignment bytes.

The group coordinator relays these bytes opaquely; consumers of every client (Java,
librdkafka, kafka-python, ours) must agree on them for a mixed group to work. The layout is a
big-endian ``int16`` version followed by the version's fields (Kafka's
``ConsumerProtocolSubscription.json`` / ``ConsumerProtocolAssignment.json``, never flexible):

Subscription
    v0: ``topics: [string]``, ``user_data: nullable bytes``
    v1: + ``owned_partitions: [{topic: string, partitions: [int32]}]`` (KIP-429)
    v2: + ``generation_id: int32`` (default -1, KIP-792)
    v3: + ``rack_id: nullable string`` (KIP-881)
Assignment (v0-v3 share one layout)
    ``assigned_partitions: [{topic: string, partitions: [int32]}]``, ``user_data: nullable bytes``

Arrays have an ``int32`` count, strings an ``int16`` length, bytes an ``int32`` length (-1 =
null). As in Java, a version newer than ours is read with our newest schema (fields appended by
later versions are ignored), a negative version is an error. Pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spark_kafkalite.protocol.errors import KafkaError
from spark_kafkalite.protocol.schema_io import I16, I32, SchemaReader, write_bytes, write_string
from spark_kafkalite.protocol.types import TopicPartition

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "SUBSCRIPTION_HIGHEST_VERSION",
    "ASSIGNMENT_HIGHEST_VERSION",
    "Subscription",
    "Assignment",
    "ConsumerProtocolError",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
    "decode_subscription_topics",
    "group_by_topic",
]

#: JoinGroup ``protocol_type`` of consumer groups.
CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_HIGHEST_VERSION = 3
ASSIGNMENT_HIGHEST_VERSION = 3


class ConsumerProtocolError(KafkaError):
    """Member metadata or assignment bytes that do not parse (Java ``SchemaException``)."""

    error_code = -1
    retriable = False

    def _format(self, message: str | None) -> str:
        return f"CONSUMER_PROTOCOL_ERROR: {message}" if message else "CONSUMER_PROTOCOL_ERROR"


@dataclass(frozen=True, slots=True)
class Subscription:
    """A member's JoinGroup metadata (Java ``ConsumerPartitionAssignor.Subscription``).

    ``owned_partitions`` are the partitions the member holds now (cooperative protocol);
    ``generation_id`` the generation they were assigned in (-1 unknown). ``group_instance_id``
    and ``member_id`` are not serialized: the coordinator fills them from the JoinGroup member
    list so assignors can order members as Java's ``MemberInfo`` does.
    """

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class Assignment:
    """Partitions assigned to one member (Java ``ConsumerPartitionAssignor.Assignment``)."""

    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def group_by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """``[(topic, [partition, ...]), ...]`` in order of each topic's first appearance (as Java's
    topic-keyed collection serializes them)."""
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(int(tp.partition))
    return list(grouped.items())


# ---------------------------------------------------------------------------------- writing
def _string(out: bytearray, value: str | None) -> None:
    try:
        write_string(out, value)
    except ValueError as exc:
        raise ConsumerProtocolError(str(exc)) from exc


def _topic_partitions(out: bytearray, partitions: Iterable[TopicPartition]) -> None:
    grouped = group_by_topic(partitions)
    out += I32.pack(len(grouped))
    for topic, parts in grouped:
        _string(out, topic)
        out += I32.pack(len(parts))
        for p in parts:
            out += I32.pack(p)


def encode_subscription(subscription: Subscription, version: int = SUBSCRIPTION_HIGHEST_VERSION) -> bytes:
    """The JoinGroup protocol metadata for ``subscription`` at ``version`` (0-3; Java sends 3).

    Raises:
        ValueError: unknown version.
    """
    if not 0 <= version <= SUBSCRIPTION_HIGHEST_VERSION:
        raise ValueError(f"unsupported ConsumerProtocolSubscription version {version}")
    out = bytearray(I16.pack(version))
    out += I32.pack(len(subscription.topics))
    for topic in subscription.topics:
        _string(out, topic)
    write_bytes(out, subscription.user_data)
    if version >= 1:
        _topic_partitions(out, subscription.owned_partitions)
    if version >= 2:
        out += I32.pack(int(subscription.generation_id))
    if version >= 3:
        _string(out, subscription.rack_id)
    return bytes(out)


def encode_assignment(assignment: Assignment, version: int = ASSIGNMENT_HIGHEST_VERSION) -> bytes:
    """The SyncGroup assignment bytes for ``assignment`` (every version has the same layout).

    Raises:
        ValueError: unknown version.
    """
    if not 0 <= version <= ASSIGNMENT_HIGHEST_VERSION:
        raise ValueError(f"unsupported ConsumerProtocolAssignment version {version}")
    out = bytearray(I16.pack(version))
    _topic_partitions(out, assignment.partitions)
    write_bytes(out, assignment.user_data)
    return bytes(out)


# ---------------------------------------------------------------------------------- reading
def _reader(data: bytes, what: str) -> SchemaReader:
    return SchemaReader(bytes(data), what, ConsumerProtocolError)


def _topic_partitions_of(reader: SchemaReader) -> tuple[TopicPartition, ...]:
    out: list[TopicPartition] = []
    for _ in range(reader.count()):
        topic = reader.string()
        for _ in range(reader.count()):
            out.append(TopicPartition(topic, reader.i32()))
    return tuple(out)


def _topics_of(reader: SchemaReader) -> list[str]:
    topics = []
    for _ in range(reader.count()):
        topic = reader.string()
        topics.append(topic)
    return topics


def _version(reader: SchemaReader, highest: int) -> int:
    version = reader.i16()
    if version < 0:
        raise ConsumerProtocolError(f"{reader.what}: unsupported version {version}")
    return min(version, highest)


def decode_subscription(data: bytes) -> Subscription:
    """Parse JoinGroup member metadata of the ``consumer`` protocol type (any version; newer
    than 3 reads as 3).

    Raises:
        ConsumerProtocolError: the bytes are truncated or malformed.
    """
    reader = _reader(data, "consumer protocol subscription")
    version = _version(reader, SUBSCRIPTION_HIGHEST_VERSION)
    topics = _topics_of(reader)
    user_data = reader.nullable_bytes()
    owned: tuple[TopicPartition, ...] = ()
    generation_id = -1
    rack_id = None
    if version >= 1:
        owned = _topic_partitions_of(reader)
    if version >= 2:
        generation_id = reader.i32()
    if version >= 3:
        rack_id = reader.string(nullable=True)
    return Subscription(tuple(topics), user_data, owned, generation_id, rack_id or None)


def decode_assignment(data: bytes | None) -> Assignment:
    """Parse SyncGroup assignment bytes (any version). Empty bytes are an empty assignment
    (what the coordinator returns to a member the leader assigned nothing).

    Raises:
        ConsumerProtocolError: the bytes are truncated or malformed.
    """
    if not data:
        return Assignment(())
    reader = _reader(data, "consumer protocol assignment")
    _version(reader, ASSIGNMENT_HIGHEST_VERSION)
    partitions = _topic_partitions_of(reader)
    user_data = reader.nullable_bytes()
    return Assignment(partitions, user_data)


def decode_subscription_topics(data: bytes) -> list[str]:
    """Only the subscribed topics of JoinGroup member metadata (the group coordinator's view:
    Kafka's ``ConsumerProtocol.deserializeSubscription(...).topics()`` in
    ``ClassicGroup.computeSubscribedTopics``); the fields after them are not read.

    Raises:
        ConsumerProtocolError: the version or topics are truncated or malformed.
    """
    reader = _reader(data, "consumer protocol subscription")
    _version(reader, SUBSCRIPTION_HIGHEST_VERSION)
    return _topics_of(reader)
