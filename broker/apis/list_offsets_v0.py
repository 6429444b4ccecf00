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

from dataclasses import dataclass
from typing import Any

from spark_kafkalite.protocol.errors import InvalidRequestError
from spark_kafkalite.protocol.schema_io import I16, I32, I64, SchemaReader, write_string

__all__ = ["decode_list_offsets_v0", "encode_list_offsets_v0_response", "ListOffsetsRequestV0"]


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


def decode_list_offsets_v0(frame: bytes | bytearray | memoryview, offset: int) -> ListOffsetsRequestV0:
    """Decode a ListOffsets v0 body.

    Raises:
        InvalidRequestError: malformed or truncated body.
    """
    r = SchemaReader(frame, "ListOffsets v0 request", InvalidRequestError, pos=offset)
    replica_id = r.i32()
    topics = []
    for _ in range(r.count()):
        name = r.string()
        partitions = []
        for _ in range(r.count()):
            partition, timestamp, max_num = r.i32(), r.i64(), r.i32()
            partitions.append(ListOffsetsPartitionV0(partition, timestamp, max_num))
        topics.append(ListOffsetsTopicV0(name, tuple(partitions)))
    return ListOffsetsRequestV0(replica_id, tuple(topics))


def encode_list_offsets_v0_response(response: Any, correlation_id: int) -> bytes:
    """Encode a v1-shaped ListOffsetsResponse as a v0 frame (size prefix + header v0 + body);
    each partition's ``offset`` (when not -1) becomes the single old-style offset."""
    out = bytearray(b"\x00\x00\x00\x00")
    out += I32.pack(correlation_id)
    out += I32.pack(len(response.topics))
    for topic in response.topics:
        write_string(out, topic.name)
        out += I32.pack(len(topic.partitions))
        for p in topic.partitions:
            out += I32.pack(p.partition_index) + I16.pack(int(p.error_code))
            offsets = [p.offset] if p.offset >= 0 and int(p.error_code) == 0 else []
            out += I32.pack(len(offsets))
            for value in offsets:
                out += I64.pack(value)
    I32.pack_into(out, 0, len(out) - 4)
    return bytes(out)
