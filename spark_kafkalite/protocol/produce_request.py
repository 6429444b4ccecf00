"""Hand-written ProduceRequest (api key 0) body decoder for v3-v9 (KIP-482 flexible from v9).

Kafka's generated ``ProduceRequestData.read``: ``transactional_id`` (nullable string, v3+),
``acks`` (int16), ``timeout_ms`` (int32), ``topic_data`` (array of ``TopicProduceData``: ``name``
string, ``partition_data`` array of ``PartitionProduceData``: ``index`` int32, ``records``
nullable bytes); v9 uses compact strings/arrays/bytes and a tagged-field section after each
struct. It is on every produced batch's critical path (an idempotent producer keeps one request
in flight per partition), so it returns each partition's ``records`` as a ``memoryview`` slice of
the frame (no copy of the batch; kio's native decoder returns ``bytes``). Measured on a
one-partition 60 KB v9 request: ~4.8 us, the same as the bounded scan + kio (~4.7 us); the gain
is the batch copy it avoids, not decode time.

It is a fast path only: whenever the body is anything but a plain well-formed request (a
truncation, a null array, invalid UTF-8, a tagged field, trailing bytes...) it returns ``None``
and the caller decodes through the bounded scan + kio (``framing.decode_request_body``), so
every malformed or unusual body gets exactly the errors and the hostile-input guarantees
(issue #14) of that path. Every loop reads at least one byte per element, bounds-checked, so a
huge count costs nothing before it fails.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from spark_kafkalite.protocol.byte_utils import FastPathMiss
from spark_kafkalite.protocol.varint import VarintError, read_unsigned_varint

__all__ = [
    "PRODUCE_MIN_FAST_VERSION",
    "PartitionProduceData",
    "ProduceRequest",
    "TopicProduceData",
    "decode_produce_request_fast",
]

PRODUCE_MIN_FAST_VERSION = 3
PRODUCE_MAX_FAST_VERSION = 9
_FIRST_FLEXIBLE_VERSION = 9

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


class PartitionProduceData:
    """Kafka's ``ProduceRequestData.PartitionProduceData``; ``records`` is a view into the frame.
    (A plain slots class: a NamedTuple field may not be called ``index``.)"""

    __slots__ = ("index", "records")

    def __init__(self, index: int, records: memoryview | None) -> None:
        self.index = index
        self.records = records


class TopicProduceData(NamedTuple):
    """Kafka's ``ProduceRequestData.TopicProduceData``."""

    name: str
    partition_data: tuple[PartitionProduceData, ...]


class ProduceRequest(NamedTuple):
    """Kafka's ``ProduceRequestData`` with the field names of kio's entity (``timeout`` in ms)."""

    transactional_id: str | None
    acks: int
    timeout: int  # timeout_ms
    topic_data: tuple[TopicProduceData, ...]


def _decode(frame: Any, pos: int, version: int) -> ProduceRequest:
    buf = memoryview(frame)
    end = len(buf)
    if version >= _FIRST_FLEXIBLE_VERSION:
        n, pos = read_unsigned_varint(buf, pos, end)
        n -= 1
    else:
        if pos + 2 > end:
            raise FastPathMiss
        n = _I16.unpack_from(buf, pos)[0]
        pos += 2
    if n >= 0:
        if pos + n > end:
            raise FastPathMiss
        transactional_id: str | None = str(buf[pos : pos + n], "utf-8")
        pos += n
    elif n == -1:
        transactional_id = None
    else:
        raise FastPathMiss
    if pos + 6 > end:
        raise FastPathMiss
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(buf, pos)
    pos += 6
    if version >= _FIRST_FLEXIBLE_VERSION:
        topics, pos = _decode_topics_flexible(buf, pos, end)
        tags, pos = read_unsigned_varint(buf, pos, end)
        if tags:
            raise FastPathMiss
    else:
        topics, pos = _decode_topics_classic(buf, pos, end)
    if pos != end:
        raise FastPathMiss
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


def _decode_topics_classic(buf: memoryview, pos: int, end: int) -> tuple[tuple[TopicProduceData, ...], int]:
    unpack_i16 = _I16.unpack_from
    unpack_i32 = _I32.unpack_from
    if pos + 4 > end:
        raise FastPathMiss
    topic_count = unpack_i32(buf, pos)[0]
    pos += 4
    if topic_count < 0:
        raise FastPathMiss
    topics = []
    for _ in range(topic_count):
        if pos + 2 > end:
            raise FastPathMiss
        n = unpack_i16(buf, pos)[0]
        pos += 2
        if n < 0 or pos + n > end:
            raise FastPathMiss
        name = str(buf[pos : pos + n], "utf-8")
        pos += n
        if pos + 4 > end:
            raise FastPathMiss
        partition_count = unpack_i32(buf, pos)[0]
        pos += 4
        if partition_count < 0:
            raise FastPathMiss
        partitions = []
        for _ in range(partition_count):
            if pos + 8 > end:
                raise FastPathMiss
            index = unpack_i32(buf, pos)[0]
            size = unpack_i32(buf, pos + 4)[0]
            pos += 8
            if size >= 0:
                if pos + size > end:
                    raise FastPathMiss
                records = buf[pos : pos + size]
                pos += size
            elif size == -1:
                records = None
            else:
                raise FastPathMiss
            partitions.append(PartitionProduceData(index, records))
        topics.append(TopicProduceData(name, tuple(partitions)))
    return tuple(topics), pos


def _decode_topics_flexible(buf: memoryview, pos: int, end: int) -> tuple[tuple[TopicProduceData, ...], int]:
    unpack_i32 = _I32.unpack_from
    topic_count, pos = read_unsigned_varint(buf, pos, end)
    if topic_count == 0:  # null array
        raise FastPathMiss
    topics = []
    for _ in range(topic_count - 1):
        n, pos = read_unsigned_varint(buf, pos, end)
        n -= 1
        if n < 0 or pos + n > end:
            raise FastPathMiss
        name = str(buf[pos : pos + n], "utf-8")
        pos += n
        partition_count, pos = read_unsigned_varint(buf, pos, end)
        if partition_count == 0:
            raise FastPathMiss
        partitions = []
        for _ in range(partition_count - 1):
            if pos + 4 > end:
                raise FastPathMiss
            index = unpack_i32(buf, pos)[0]
            pos += 4
            size, pos = read_unsigned_varint(buf, pos, end)
            size -= 1
            if size < 0:
                records = None
            else:
                if pos + size > end:
                    raise FastPathMiss
                records = buf[pos : pos + size]
                pos += size
            tags, pos = read_unsigned_varint(buf, pos, end)
            if tags:
                raise FastPathMiss
            partitions.append(PartitionProduceData(index, records))
        tags, pos = read_unsigned_varint(buf, pos, end)
        if tags:
            raise FastPathMiss
        topics.append(TopicProduceData(name, tuple(partitions)))
    return tuple(topics), pos


def decode_produce_request_fast(frame: Any, offset: int, version: int) -> ProduceRequest | None:
    """Decode a ProduceRequest v3-v9 body at ``offset`` of ``frame``; ``None`` when the body is
    not a plain well-formed request (the caller then uses the bounded scan + kio decoder)."""
    if not PRODUCE_MIN_FAST_VERSION <= version <= PRODUCE_MAX_FAST_VERSION:
        return None
    try:
        return _decode(frame, offset, version)
    except (FastPathMiss, VarintError, UnicodeDecodeError):
        return None
