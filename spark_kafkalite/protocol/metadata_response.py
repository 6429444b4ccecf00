"""MetadataResponse (key 3, v0-v12) assembled from pre-encoded parts, byte-identical to kio's
generic encoder (a unit test compares them for every version).

A full Metadata response lists every partition of the cluster; encoding thousands of partition
entities per request made its cost follow the size of the cluster. Kafka's broker serves
Metadata from ``KRaftMetadataCache``, whose image changes only through deltas; here a broker
keeps the encoded bytes of each partition and topic entry until the metadata image replaces
them, and a response is the concatenation of those bytes (:class:`MetadataResponseParts`).

Layout (``MetadataResponse.json``): ``throttle_time_ms int32 (v3+), brokers [...], cluster_id
(v2+), controller_id int32 (v1+), topics [error_code int16, name, topic_id uuid (v10+),
is_internal bool (v1+), partitions [...], topic_authorized_operations int32 (v8+)],
cluster_authorized_operations int32 (v8-v10)``. v9+ is flexible (KIP-482): compact arrays
(unsigned varint count + 1) and an empty tagged-field section (one zero byte) closing every
struct. The two arrays spliced here (a topic's partitions, the response's topics) are each
followed by exactly the fixed-size fields above, which is what :func:`_splice` relies on.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_writer

from spark_kafkalite.protocol.framing import SIZE_PREFIX, encode_response
from spark_kafkalite.protocol.varint import unsigned_varint_bytes

__all__ = [
    "MetadataResponseParts",
    "encode_struct",
    "encode_metadata_response",
    "metadata_topic_bytes",
    "with_topic_authorized_operations",
]

_I32 = struct.Struct(">i")


def encode_struct(entity: Any) -> bytes:
    """The wire bytes of one kio entity (a nested struct such as a partition entry), no header."""
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def _array_prefix(count: int, flexible: bool) -> bytes:
    if not flexible:
        return _I32.pack(count)
    return unsigned_varint_bytes(count + 1)


def _splice(encoded: bytes, flexible: bool, suffix_bytes: int, items: Sequence[bytes]) -> list[bytes]:
    """``encoded`` has an empty array followed by ``suffix_bytes`` of fixed fields; returns the
    chunks with ``items`` as that array's elements."""
    empty = 1 if flexible else 4
    cut = len(encoded) - suffix_bytes
    return [encoded[: cut - empty], _array_prefix(len(items), flexible), *items, encoded[cut:]]


def metadata_topic_bytes(topic: Any, partitions: Sequence[bytes]) -> bytes:
    """A ``MetadataResponseTopic`` entry: ``topic`` (a kio entity whose ``partitions`` is empty)
    with ``partitions`` (each :func:`encode_struct` of a ``MetadataResponsePartition`` of the
    same version) as its partition array."""
    cls = type(topic)
    flexible = bool(cls.__flexible__)
    suffix = (4 if cls.__version__ >= 8 else 0) + (1 if flexible else 0)
    return b"".join(_splice(encode_struct(topic), flexible, suffix, partitions))


def with_topic_authorized_operations(entry: bytes, flexible: bool, operations: int) -> bytes:
    """An encoded ``MetadataResponseTopic`` (v8+, as :func:`metadata_topic_bytes` returns it)
    with its closing ``topic_authorized_operations`` int32 replaced by ``operations`` (the
    KIP-430 bitfield); the cached entry's other bytes are reused as they are."""
    end = len(entry) - (1 if flexible else 0)
    return b"".join((entry[: end - 4], _I32.pack(operations), entry[end:]))


@dataclass(frozen=True, slots=True)
class MetadataResponseParts:
    """A MetadataResponse as ``head`` (a kio ``MetadataResponse`` whose ``topics`` is empty) and
    the encoded topic entries (:func:`metadata_topic_bytes`) that go in its topic array."""

    head: Any
    topics: Sequence[bytes]


def encode_metadata_response(response: MetadataResponseParts | Any, correlation_id: int) -> bytes:
    """The response frame (size prefix, response header, body) of ``response``: parts are
    spliced, a plain kio entity (an error response) is encoded as usual."""
    if not isinstance(response, MetadataResponseParts):
        return encode_response(response, correlation_id)
    cls = type(response.head)
    version, flexible = cls.__version__, bool(cls.__flexible__)
    suffix = (4 if 8 <= version <= 10 else 0) + (1 if flexible else 0)
    chunks = _splice(encode_response(response.head, correlation_id), flexible, suffix, response.topics)
    frame = bytearray().join(chunks)
    SIZE_PREFIX.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)
