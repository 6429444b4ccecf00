"""Hand-written codec for ListOffsets v0 (kio's schemas start at v1).

v0 request (header v1): ``replica_id int32, topics [name string, partitions [partition int32,
timestamp int64, max_num_offsets int32]]``. v0 response (header v0): ``topics [name string,
partitions [partition int32, error_code int16, old_style_offsets [int64]]]``
(``ListOffsetsRequest.json`` / ``ListOffsetsResponse.json``, version 0).

Semantics: EARLIEST (-2) / LATEST (-1) return that single offset; for a timestamp target v0
returns the single offset found by time like v1+ (Kafka's legacy "segment offsets before T" list
is not reproduced, and ``max_num_offsets`` is ignored).

The request decodes into objects shaped like kio's v1 request (plus ``max_num_offsets``) so the
ListOffsets handler serves every version with one code path; the response is encoded from the
v1-shaped response entity the handler returns.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from spark_kafkalite.protocol.errors import InvalidRequestError

__all__ = ["decode_list_offsets_v0", "encode_list_offsets_v0_response", "ListOffsetsRequestV0"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PARTITION = struct.Struct(">iqi")


@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionV0:
    partition_index: int
    timestamp: int
    max_num_offsets: int
    current_leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ListOffsetsTopicV0:
    name: str
    partitions: tuple[ListOffsetsPartitionV0, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsRequestV0:
    replica_id: int
    topics: tuple[ListOffsetsTopicV0, ...]
    isolation_level: int = 0
    __version__ = 0


class _Reader:
    def __init__(self, buf: bytes | memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def unpack(self, fmt: struct.Struct) -> tuple[Any, ...]:
        if self.pos + fmt.size > len(self.buf):
            raise InvalidRequestError("truncated ListOffsets v0 request")
        values = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return values

    def array_length(self) -> int:
        (n,) = self.unpack(_I32)
        if n < 0 or n > len(self.buf):
            raise InvalidRequestError(f"invalid array length {n} in ListOffsets v0 request")
        return int(n)

    def string(self) -> str:
        (n,) = self.unpack(_I16)
        if n < 0 or self.pos + n > len(self.buf):
            raise InvalidRequestError("invalid topic name in ListOffsets v0 request")
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequestError("topic name is not UTF-8") from exc


def decode_list_offsets_v0(frame: bytes | memoryview, offset: int) -> ListOffsetsRequestV0:
    """Decode a ListOffsets v0 body.

    Raises:
        InvalidRequestError: malformed or truncated body.
    """
    r = _Reader(frame, offset)
    (replica_id,) = r.unpack(_I32)
    topics = []
    for _ in range(r.array_length()):
        name = r.string()
        partitions = []
        for _ in range(r.array_length()):
            partition, timestamp, max_num = r.unpack(_PARTITION)
            partitions.append(ListOffsetsPartitionV0(partition, timestamp, max_num))
        topics.append(ListOffsetsTopicV0(name, tuple(partitions)))
    return ListOffsetsRequestV0(replica_id, tuple(topics))


def encode_list_offsets_v0_response(response: Any, correlation_id: int) -> bytes:
    """Encode a v1-shaped ListOffsetsResponse as a v0 frame (size prefix + header v0 + body);
    each partition's ``offset`` (when not -1) becomes the single old-style offset."""
    out = bytearray(b"\x00\x00\x00\x00")
    out += _I32.pack(correlation_id)
    out += _I32.pack(len(response.topics))
    for topic in response.topics:
        raw = topic.name.encode("utf-8")
        out += _I16.pack(len(raw)) + raw
        out += _I32.pack(len(topic.partitions))
        for p in topic.partitions:
            out += _I32.pack(p.partition_index) + _I16.pack(int(p.error_code))
            offsets = [p.offset] if p.offset >= 0 and int(p.error_code) == 0 else []
            out += _I32.pack(len(offsets))
            for value in offsets:
                out += _I64.pack(value)
    _I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
