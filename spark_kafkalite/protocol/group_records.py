"""Key / value byte formats of the records in ``__consumer_offsets`` (Kafka's
``GroupMetadataManager`` / ``GroupCoordinatorRecordSerde`` with the JSON schemas
``OffsetCommitKey``, ``OffsetCommitValue``, ``GroupMetadataKey``, ``GroupMetadataValue``), so the
topic can be read with Kafka's own tools.

Every key and value starts with an int16 schema version:
- key version 0/1: ``OffsetCommitKey{group: string, topic: string, partition: int32}``;
  key version 2: ``GroupMetadataKey{group: string}``. We write versions 1 and 2.
- ``OffsetCommitValue`` v0-v4 (we write v3: offset int64, leaderEpoch int32, metadata string,
  commitTimestamp int64; v1 carries an expireTimestamp, v4 is flexible).
- ``GroupMetadataValue`` v0-v4 (we write v3: protocolType, generation, protocol (nullable),
  leader (nullable), currentStateTimestamp, members[memberId, groupInstanceId (nullable),
  clientId, clientHost, rebalanceTimeout, sessionTimeout, subscription bytes, assignment bytes]).
A record with a null value is a tombstone (offset or group deleted).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spark_kafkalite.protocol.schema_io import I16, I32, I64, SchemaReader, write_bytes, write_string

__all__ = [
    "OffsetCommitKey",
    "GroupMetadataKey",
    "OffsetAndMetadata",
    "MemberRecord",
    "GroupMetadataRecord",
    "RecordFormatError",
    "encode_offset_commit_key",
    "encode_group_metadata_key",
    "encode_offset_commit_value",
    "encode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_group_metadata_value",
]


class RecordFormatError(ValueError):
    """A key or value in ``__consumer_offsets`` cannot be parsed (unknown version, truncated)."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's ``OffsetAndMetadata`` and the client's
    ``org.apache.kafka.clients.consumer.OffsetAndMetadata``, fields in the Java constructor's
    order): the next offset to consume, the leader epoch of the last consumed record (-1
    unknown), a metadata string; timestamps in ms since the epoch (-1 on the client side),
    ``expire_timestamp_ms`` -1 unless a v2-v4 OffsetCommit set a retention time."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp_ms: int = -1
    expire_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberRecord, ...] = field(default_factory=tuple)


# -- writers ------------------------------------------------------------------------------------
def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """``OffsetCommitKey`` version 1."""
    out = bytearray(I16.pack(1))
    write_string(out, group)
    write_string(out, topic)
    out += I32.pack(partition)
    return bytes(out)


def encode_group_metadata_key(group: str) -> bytes:
    """``GroupMetadataKey`` version 2."""
    out = bytearray(I16.pack(2))
    write_string(out, group)
    return bytes(out)


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    """``OffsetCommitValue`` v3, or v1 when an explicit expire timestamp is set (as Kafka)."""
    if value.expire_timestamp_ms >= 0:
        out = bytearray(I16.pack(1))
        out += I64.pack(value.offset)
        write_string(out, value.metadata)
        out += I64.pack(value.commit_timestamp_ms)
        out += I64.pack(value.expire_timestamp_ms)
        return bytes(out)
    out = bytearray(I16.pack(3))
    out += I64.pack(value.offset)
    out += I32.pack(value.leader_epoch)
    write_string(out, value.metadata)
    out += I64.pack(value.commit_timestamp_ms)
    return bytes(out)


def encode_group_metadata_value(value: GroupMetadataRecord) -> bytes:
    """``GroupMetadataValue`` v3."""
    out = bytearray(I16.pack(3))
    write_string(out, value.protocol_type)
    out += I32.pack(value.generation)
    write_string(out, value.protocol)
    write_string(out, value.leader)
    out += I64.pack(value.current_state_timestamp_ms)
    out += I32.pack(len(value.members))
    for m in value.members:
        write_string(out, m.member_id)
        write_string(out, m.group_instance_id)
        write_string(out, m.client_id)
        write_string(out, m.client_host)
        out += I32.pack(m.rebalance_timeout_ms)
        out += I32.pack(m.session_timeout_ms)
        write_bytes(out, m.subscription)
        write_bytes(out, m.assignment)
    return bytes(out)


# -- readers ------------------------------------------------------------------------------------
def _reader(data: bytes, what: str) -> SchemaReader:
    return SchemaReader(data, what, RecordFormatError)


def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """Parse a record key; None for key versions we don't know (Kafka skips them: e.g. the
    KIP-848 consumer-group records, versions 3+).

    Raises:
        RecordFormatError: a known version is truncated.
    """
    r = _reader(key, "__consumer_offsets key")
    version = r.i16()
    if version in (0, 1):
        group = r.string()
        topic = r.string()
        return OffsetCommitKey(group, topic, r.i32())
    if version == 2:
        group = r.string()
        return GroupMetadataKey(group)
    return None


def decode_offset_commit_value(value: bytes) -> OffsetAndMetadata:
    """Parse ``OffsetCommitValue`` v0-v4.

    Raises:
        RecordFormatError: unknown version or truncated.
    """
    r = _reader(value, "OffsetCommitValue")
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_ts, expire_ts)


def decode_group_metadata_value(value: bytes) -> GroupMetadataRecord:
    """Parse ``GroupMetadataValue`` v0-v4.

    Raises:
        RecordFormatError: unknown version or truncated.
    """
    r = _reader(value, "GroupMetadataValue")
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.count()):
        member_id = r.string() or ""
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        subscription = r.nullable_bytes() or b""
        assignment = r.nullable_bytes() or b""
        r.skip_tags()
        members.append(
            MemberRecord(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.skip_tags()
    return GroupMetadataRecord(protocol_type, generation, protocol, leader, state_ts, tuple(members))
