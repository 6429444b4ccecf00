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

import struct
from dataclasses import dataclass, field

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

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


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
    """A committed offset (Kafka's ``OffsetAndMetadata``); timestamps in ms since the epoch,
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
def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    raw = value.encode("utf-8")
    out += _I16.pack(len(raw))
    out += raw


def _bytes(out: bytearray, value: bytes) -> None:
    out += _I32.pack(len(value))
    out += value


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """``OffsetCommitKey`` version 1."""
    out = bytearray(_I16.pack(1))
    _string(out, group)
    _string(out, topic)
    out += _I32.pack(partition)
    return bytes(out)


def encode_group_metadata_key(group: str) -> bytes:
    """``GroupMetadataKey`` version 2."""
    out = bytearray(_I16.pack(2))
    _string(out, group)
    return bytes(out)


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    """``OffsetCommitValue`` v3, or v1 when an explicit expire timestamp is set (as Kafka)."""
    if value.expire_timestamp_ms >= 0:
        out = bytearray(_I16.pack(1))
        out += _I64.pack(value.offset)
        _string(out, value.metadata)
        out += _I64.pack(value.commit_timestamp_ms)
        out += _I64.pack(value.expire_timestamp_ms)
        return bytes(out)
    out = bytearray(_I16.pack(3))
    out += _I64.pack(value.offset)
    out += _I32.pack(value.leader_epoch)
    _string(out, value.metadata)
    out += _I64.pack(value.commit_timestamp_ms)
    return bytes(out)


def encode_group_metadata_value(value: GroupMetadataRecord) -> bytes:
    """``GroupMetadataValue`` v3."""
    out = bytearray(_I16.pack(3))
    _string(out, value.protocol_type)
    out += _I32.pack(value.generation)
    _string(out, value.protocol)
    _string(out, value.leader)
    out += _I64.pack(value.current_state_timestamp_ms)
    out += _I32.pack(len(value.members))
    for m in value.members:
        _string(out, m.member_id)
        _string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# -- readers ------------------------------------------------------------------------------------
class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise RecordFormatError("truncated record")
        chunk = self.buf[self.pos : end]
        self.pos = end
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise RecordFormatError("varint too long")

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if not nullable:
                raise RecordFormatError("null in a non-nullable string")
            return None
        return self._take(n).decode("utf-8")

    def nbytes(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return b""
        return self._take(n)

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return max(n, 0)

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def decode_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """Parse a record key; None for key versions we don't know (Kafka skips them: e.g. the
    KIP-848 consumer-group records, versions 3+).

    Raises:
        RecordFormatError: a known version is truncated.
    """
    r = _Reader(key)
    version = r.i16()
    if version in (0, 1):
        group = r.string()
        topic = r.string()
        assert group is not None and topic is not None
        return OffsetCommitKey(group, topic, r.i32())
    if version == 2:
        group = r.string()
        assert group is not None
        return GroupMetadataKey(group)
    return None


def decode_offset_commit_value(value: bytes) -> OffsetAndMetadata:
    """Parse ``OffsetCommitValue`` v0-v4.

    Raises:
        RecordFormatError: unknown version or truncated.
    """
    r = _Reader(value)
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
    r = _Reader(value)
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
    for _ in range(r.array_len()):
        member_id = r.string() or ""
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        subscription = r.nbytes()
        assignment = r.nbytes()
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
