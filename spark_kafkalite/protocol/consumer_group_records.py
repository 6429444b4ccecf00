"""Key / value byte formats of the KIP-848 consumer group records in ``__consumer_offsets``
(Kafka's ``GroupCoordinatorRecordHelpers`` / ``GroupCoordinatorRecordSerde`` with the JSON
schemas ``ConsumerGroup*Key`` / ``ConsumerGroup*Value`` of the group-coordinator module).

A key is an int16 record type (the key "version") followed by classic strings:

====  ===========================================  ==========================
type  key                                          value (flexible, version 0)
====  ===========================================  ==========================
3     ConsumerGroupMetadataKey{group}              ConsumerGroupMetadataValue{epoch}
4     ConsumerGroupPartitionMetadataKey{group}     ConsumerGroupPartitionMetadataValue{topics[id, name, numPartitions, partitionMetadata[]]}
5     ConsumerGroupMemberMetadataKey{group, member}  ConsumerGroupMemberMetadataValue{instanceId?, rackId?, clientId, clientHost, subscribedTopicNames[], subscribedTopicRegex?, rebalanceTimeoutMs, serverAssignor?}
6     ConsumerGroupTargetAssignmentMetadataKey{group}  ConsumerGroupTargetAssignmentMetadataValue{assignmentEpoch}
7     ConsumerGroupTargetAssignmentMemberKey{group, member}  ConsumerGroupTargetAssignmentMemberValue{topicPartitions[topicId, partitions[]]}
8     ConsumerGroupCurrentMemberAssignmentKey{group, member}  ConsumerGroupCurrentMemberAssignmentValue{memberEpoch, previousMemberEpoch, state, assignedPartitions[], partitionsPendingRevocation[]}
====  ===========================================  ==========================

Values start with the int16 value version (0), use KIP-482 compact strings and arrays, and end
every struct with a tagged-field section. A null value is a tombstone. Pure, no I/O.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Set
from dataclasses import dataclass

from spark_kafkalite.protocol.byte_utils import write_compact_nullable_string, write_compact_string
from spark_kafkalite.protocol.group_records import RecordFormatError
from spark_kafkalite.protocol.schema_io import I8, I16, I32, SchemaReader, write_string
from spark_kafkalite.protocol.varint import write_unsigned_varint

__all__ = [
    "ConsumerGroupRecordType",
    "ConsumerGroupRecordKey",
    "MemberMetadataValue",
    "CurrentMemberAssignmentValue",
    "TopicPartitionsById",
    "encode_key",
    "decode_key",
    "encode_group_epoch_value",
    "decode_group_epoch_value",
    "encode_partition_metadata_value",
    "decode_partition_metadata_value",
    "encode_member_metadata_value",
    "decode_member_metadata_value",
    "encode_target_assignment_epoch_value",
    "encode_target_assignment_member_value",
    "decode_target_assignment_member_value",
    "encode_current_member_assignment_value",
    "decode_current_member_assignment_value",
]

#: topic id -> partition indexes
TopicPartitionsById = Mapping[uuid.UUID, Set[int]]


class ConsumerGroupRecordType(enum.IntEnum):
    """The record types (key versions) of Kafka's consumer group records."""

    GROUP_METADATA = 3
    PARTITION_METADATA = 4
    MEMBER_METADATA = 5
    TARGET_ASSIGNMENT_METADATA = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_MEMBER_ASSIGNMENT = 8


_PER_MEMBER = frozenset(
    {
        ConsumerGroupRecordType.MEMBER_METADATA,
        ConsumerGroupRecordType.TARGET_ASSIGNMENT_MEMBER,
        ConsumerGroupRecordType.CURRENT_MEMBER_ASSIGNMENT,
    }
)


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecordKey:
    type: ConsumerGroupRecordType
    group: str
    member_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """``ConsumerGroupMemberMetadataValue`` v0."""

    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    #: tagged field 0 ``ClassicMemberMetadata``: (session timeout ms, ((protocol name, metadata), ...))
    #: for a member that joined with the classic protocol (JoinGroup) in a consumer group
    classic: tuple[int, tuple[tuple[str, bytes], ...]] | None = None


@dataclass(frozen=True, slots=True)
class CurrentMemberAssignmentValue:
    """``ConsumerGroupCurrentMemberAssignmentValue`` v0; ``state`` is Kafka's ``MemberState`` byte."""

    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: dict[uuid.UUID, frozenset[int]]
    partitions_pending_revocation: dict[uuid.UUID, frozenset[int]]


# -- keys -----------------------------------------------------------------------------------------
def encode_key(record_type: ConsumerGroupRecordType, group: str, member_id: str | None = None) -> bytes:
    """The key of a record of ``record_type`` (``member_id`` for the per-member types)."""
    out = bytearray(I16.pack(int(record_type)))
    write_string(out, group)
    if record_type in _PER_MEMBER:
        if member_id is None:
            raise ValueError(f"{record_type.name} keys need a member id")
        write_string(out, member_id)
    return bytes(out)


def decode_key(key: bytes) -> ConsumerGroupRecordKey | None:
    """Parse a consumer group record key; None for other record types.

    Raises:
        RecordFormatError: truncated.
    """
    r = SchemaReader(key, "__consumer_offsets key", RecordFormatError)
    version = r.i16()
    try:
        record_type = ConsumerGroupRecordType(version)
    except ValueError:
        return None
    group = r.string()
    member_id = r.string() if record_type in _PER_MEMBER else None
    return ConsumerGroupRecordKey(record_type, group, member_id)


# -- helpers --------------------------------------------------------------------------------------
def _value_writer() -> bytearray:
    return bytearray(I16.pack(0))


def _end_struct(out: bytearray) -> None:
    out.append(0)  # no tagged fields


def _reader(value: bytes, what: str) -> SchemaReader:
    r = SchemaReader(value, what, RecordFormatError, flexible=True)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown {what} version {version}")
    return r


def _write_topic_partitions(out: bytearray, partitions: TopicPartitionsById) -> None:
    topics = [(t, p) for t, p in partitions.items() if p]
    write_unsigned_varint(out, len(topics) + 1)
    for topic_id, parts in topics:
        out += topic_id.bytes
        write_unsigned_varint(out, len(parts) + 1)
        for p in sorted(parts):
            out += I32.pack(p)
        _end_struct(out)


def _read_topic_partitions(r: SchemaReader) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for _ in range(r.count()):
        topic_id = r.uuid()
        out[topic_id] = frozenset(r.i32() for _ in range(r.count()))
        r.skip_tags()
    return out


# -- values ---------------------------------------------------------------------------------------
def encode_group_epoch_value(epoch: int) -> bytes:
    out = _value_writer()
    out += I32.pack(epoch)
    _end_struct(out)
    return bytes(out)


def decode_group_epoch_value(value: bytes) -> int:
    """The epoch of a ConsumerGroupMetadataValue or ConsumerGroupTargetAssignmentMetadataValue."""
    r = _reader(value, "epoch value")
    return r.i32()


encode_target_assignment_epoch_value = encode_group_epoch_value


def encode_partition_metadata_value(topics: Mapping[str, tuple[uuid.UUID, int]]) -> bytes:
    """``topics``: name -> (topic id, partition count); no per-partition rack metadata."""
    out = _value_writer()
    write_unsigned_varint(out, len(topics) + 1)
    for name, (topic_id, num_partitions) in sorted(topics.items()):
        out += topic_id.bytes
        write_compact_string(out, name)
        out += I32.pack(num_partitions)
        write_unsigned_varint(out, 1)  # PartitionMetadata: empty
        _end_struct(out)
    _end_struct(out)
    return bytes(out)


def decode_partition_metadata_value(value: bytes) -> dict[str, tuple[uuid.UUID, int]]:
    r = _reader(value, "ConsumerGroupPartitionMetadataValue")
    topics: dict[str, tuple[uuid.UUID, int]] = {}
    for _ in range(r.count()):
        topic_id = r.uuid()
        name = r.string()
        num_partitions = r.i32()
        for _ in range(r.count()):
            r.i32()
            for _ in range(r.count()):
                r.string()
            r.skip_tags()
        r.skip_tags()
        topics[name] = (topic_id, num_partitions)
    return topics


def encode_member_metadata_value(value: MemberMetadataValue) -> bytes:
    out = _value_writer()
    write_compact_nullable_string(out, value.instance_id)
    write_compact_nullable_string(out, value.rack_id)
    write_compact_string(out, value.client_id)
    write_compact_string(out, value.client_host)
    write_unsigned_varint(out, len(value.subscribed_topic_names) + 1)
    for name in value.subscribed_topic_names:
        write_compact_string(out, name)
    write_compact_nullable_string(out, value.subscribed_topic_regex)
    out += I32.pack(value.rebalance_timeout_ms)
    write_compact_nullable_string(out, value.server_assignor)
    if value.classic is None:
        _end_struct(out)
        return bytes(out)
    session_timeout_ms, protocols = value.classic
    tagged = bytearray(I32.pack(session_timeout_ms))
    write_unsigned_varint(tagged, len(protocols) + 1)
    for name, metadata in protocols:
        write_compact_string(tagged, name)
        write_unsigned_varint(tagged, len(metadata) + 1)
        tagged += metadata
        _end_struct(tagged)
    _end_struct(tagged)
    write_unsigned_varint(out, 1)  # one tagged field: ClassicMemberMetadata (tag 0)
    write_unsigned_varint(out, 0)
    write_unsigned_varint(out, len(tagged))
    out += tagged
    return bytes(out)


def decode_member_metadata_value(value: bytes) -> MemberMetadataValue:
    r = _reader(value, "ConsumerGroupMemberMetadataValue")
    instance_id = r.string(nullable=True)
    rack_id = r.string(nullable=True)
    client_id = r.string()
    client_host = r.string()
    names = tuple(r.string() for _ in range(r.count()))
    regex = r.string(nullable=True)
    rebalance_timeout_ms = r.i32()
    assignor = r.string(nullable=True)
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        if tag != 0:
            r.skip_bytes(size)
            continue
        session_timeout_ms = r.i32()
        protocols = []
        for _ in range(r.count()):
            name = r.string()
            metadata = r.nullable_bytes() or b""
            r.skip_tags()
            protocols.append((name, metadata))
        r.skip_tags()
        classic = (session_timeout_ms, tuple(protocols))
    return MemberMetadataValue(
        instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout_ms, assignor, classic
    )


def encode_target_assignment_member_value(partitions: TopicPartitionsById) -> bytes:
    out = _value_writer()
    _write_topic_partitions(out, partitions)
    _end_struct(out)
    return bytes(out)


def decode_target_assignment_member_value(value: bytes) -> dict[uuid.UUID, frozenset[int]]:
    return _read_topic_partitions(_reader(value, "ConsumerGroupTargetAssignmentMemberValue"))


def encode_current_member_assignment_value(value: CurrentMemberAssignmentValue) -> bytes:
    out = _value_writer()
    out += I32.pack(value.member_epoch)
    out += I32.pack(value.previous_member_epoch)
    out += I8.pack(value.state)
    _write_topic_partitions(out, value.assigned_partitions)
    _write_topic_partitions(out, value.partitions_pending_revocation)
    _end_struct(out)
    return bytes(out)


def decode_current_member_assignment_value(value: bytes) -> CurrentMemberAssignmentValue:
    r = _reader(value, "ConsumerGroupCurrentMemberAssignmentValue")
    member_epoch = r.i32()
    previous = r.i32()
    state = r.i8()
    assigned = _read_topic_partitions(r)
    pending = _read_topic_partitions(r)
    return CurrentMemberAssignmentValue(member_epoch, previous, state, assigned, pending)
