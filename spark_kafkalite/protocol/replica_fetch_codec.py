"""The replica fetcher's Fetch codecs (the replication hot path), field- and byte-identical to
kio's generic ones (unit tests compare them on generated messages):

* :func:`encode_replica_fetch_request`: the FetchRequest v12 a follower sends (Kafka's
  ``ReplicaFetcherThread``: ``replica_id`` = the follower, isolation level 0, no rack, no
  ``cluster_id``);
* :func:`decode_fetch_request_v12_fast`: that request on the leader (a fast path: anything but a
  plain well-formed body goes to the bounded scan + kio);
* :func:`decode_replica_fetch_response`: the FetchResponse v12 it receives, as the
  :class:`~spark_kafkalite.protocol.fetch_response_encode.FetchResponseData` the leader's
  handler builds, record sets as views of the frame (never copied), every length and count
  checked against the bytes left (``InvalidRequestError`` otherwise, as
  :func:`~spark_kafkalite.protocol.framing.decode_response`).

Why: a follower of thousands of partitions sends and receives hundreds of partitions per round,
each with one small batch when a producer spreads its records over all of them; a kio entity per
partition (built, type-checked, walked by the schema writer or reader) cost more than the batch.

Layouts (``FetchRequest.json`` / ``FetchResponse.json`` v12, flexible, KIP-482): request header
v2 (api key, version, correlation id, int16-length client id, no tags); ``replica_id int32,
max_wait_ms int32, min_bytes int32, max_bytes int32, isolation_level int8, session_id int32,
session_epoch int32, topics [topic, partitions [partition int32, current_leader_epoch int32,
fetch_offset int64, last_fetched_epoch int32, log_start_offset int64, partition_max_bytes
int32]], forgotten_topics_data [topic, partitions [int32]], rack_id``; the response as in
:mod:`~spark_kafkalite.protocol.fetch_response_encode`, tagged field 0 of a partition being its
``DivergingEpoch`` (tags 1 and 2 are skipped).
"""

from __future__ import annotations

import datetime
import struct
from typing import NamedTuple

from spark_kafkalite.protocol.byte_utils import FastPathMiss, write_compact_string
from spark_kafkalite.protocol.errors import InvalidRequestError
from spark_kafkalite.protocol.fetch_response_encode import (
    NO_DIVERGING_EPOCH,
    AbortedTransaction,
    EpochEndOffset,
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
)
from spark_kafkalite.protocol.varint import VarintError, read_unsigned_varint, write_unsigned_varint

__all__ = [
    "REPLICA_FETCH_VERSION",
    "FetchRequestV12",
    "decode_fetch_request_v12_fast",
    "ReplicaFetchPartition",
    "decode_replica_fetch_response",
    "encode_replica_fetch_request",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ABORTED = struct.Struct(">qq")


REPLICA_FETCH_VERSION = 12
_FETCH_API_KEY = 1
_REQUEST_HEAD = struct.Struct(">ihhi")  # frame size, api key, api version, correlation id
_REQUEST_TOP = struct.Struct(">iiiibii")  # replica_id, max_wait_ms, min_bytes, max_bytes,
# isolation_level, session_id, session_epoch
_REQUEST_PARTITION = struct.Struct(">iiqiqiB")  # partition, current_leader_epoch, fetch_offset,
# last_fetched_epoch, log_start_offset, partition_max_bytes, no tagged fields
_RESPONSE_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_RESPONSE_PARTITION = struct.Struct(">ihqqq")
_I32_I64 = struct.Struct(">iq")


class ReplicaFetchPartition:
    """What a fetcher asks of one partition (``FetchRequest.FetchPartition`` v12 fields)."""

    __slots__ = (
        "partition",
        "current_leader_epoch",
        "fetch_offset",
        "last_fetched_epoch",
        "log_start_offset",
        "partition_max_bytes",
    )

    def __init__(
        self,
        partition: int,
        current_leader_epoch: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        log_start_offset: int,
        partition_max_bytes: int,
    ) -> None:
        self.partition = partition
        self.current_leader_epoch = current_leader_epoch
        self.fetch_offset = fetch_offset
        self.last_fetched_epoch = last_fetched_epoch
        self.log_start_offset = log_start_offset
        self.partition_max_bytes = partition_max_bytes


def encode_replica_fetch_request(
    correlation_id: int,
    client_id: str,
    *,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    session_id: int,
    session_epoch: int,
    topics: dict[str, list[ReplicaFetchPartition]],
    forgotten: dict[str, list[int]],
    rack_id: str = "",
) -> bytes:
    """A FetchRequest v12 frame (size prefix, request header v2, body) with isolation level 0
    (a follower reads up to the log end) and no ``cluster_id``.

    Raises:
        ValueError: the client id is longer than an int16 length allows.
    """
    out = bytearray(_REQUEST_HEAD.pack(0, _FETCH_API_KEY, REPLICA_FETCH_VERSION, correlation_id))
    client = client_id.encode()
    if len(client) > 0x7FFF:
        raise ValueError(f"client id of {len(client)} bytes is too long for an int16 length")
    out += _I16.pack(len(client))
    out += client
    out.append(0)  # request header v2: no tagged fields
    out += _REQUEST_TOP.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch)
    write_unsigned_varint(out, len(topics) + 1)
    pack_partition = _REQUEST_PARTITION.pack
    for topic, partitions in topics.items():
        write_compact_string(out, topic)
        write_unsigned_varint(out, len(partitions) + 1)
        for p in partitions:
            out += pack_partition(
                p.partition,
                p.current_leader_epoch,
                p.fetch_offset,
                p.last_fetched_epoch,
                p.log_start_offset,
                p.partition_max_bytes,
                0,
            )
        out.append(0)
    write_unsigned_varint(out, len(forgotten) + 1)
    for topic, indexes in forgotten.items():
        write_compact_string(out, topic)
        write_unsigned_varint(out, len(indexes) + 1)
        for index in indexes:
            out += _I32.pack(index)
        out.append(0)
    write_compact_string(out, rack_id)
    out.append(0)
    struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


class _Reader:
    """Bounds-checked reads of one frame."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.pos = 0
        self.end = len(buf)

    def need(self, n: int) -> int:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise InvalidRequestError(f"FetchResponse truncated: {n} bytes needed at {pos} of {self.end}")
        self.pos = pos + n
        return pos

    def uvarint(self) -> int:
        try:
            value, self.pos = read_unsigned_varint(self.buf, self.pos, self.end)
        except VarintError as exc:
            raise InvalidRequestError(f"FetchResponse: {exc}") from None
        return value

    def count(self) -> int:
        """A compact array count (-1: null), at most the bytes left (each entry takes one)."""
        n = self.uvarint() - 1
        if n > self.end - self.pos:
            raise InvalidRequestError(f"FetchResponse array of {n} entries in {self.end - self.pos} bytes")
        return n

    def skip_tagged(self) -> None:
        for _ in range(self.count() + 1):
            self.uvarint()
            self.need(self.uvarint())


def decode_replica_fetch_response(frame: bytes | bytearray | memoryview) -> tuple[int, FetchResponseData]:
    """Decode a FetchResponse v12 frame (without size prefix): (correlation id, response).
    ``records`` are read-only views of ``frame`` (None when null); ``diverging_epoch`` is an
    :class:`EpochEndOffset` ((-1, -1) when the leader sent none); unknown tagged fields are
    skipped.

    Raises:
        InvalidRequestError: the frame is truncated or a length or count exceeds it.
    """
    view = memoryview(frame).toreadonly()
    r = _Reader(view)
    try:
        (correlation_id,) = _I32.unpack_from(view, r.need(4))
        r.skip_tagged()  # response header v1
        throttle_ms, error_code, session_id = _RESPONSE_TOP.unpack_from(view, r.need(10))
        topics = []
        for _ in range(max(r.count(), 0)):
            n = r.count()
            start = r.need(max(n, 0))
            topic = str(view[start : start + n], "utf-8") if n > 0 else ""
            partitions = []
            for _ in range(max(r.count(), 0)):
                index, code, hw, lso, log_start = _RESPONSE_PARTITION.unpack_from(view, r.need(30))
                aborted: tuple[AbortedTransaction, ...] | None = None
                n = r.count()
                if n >= 0:
                    entries = []
                    for _ in range(n):
                        entries.append(AbortedTransaction(*_ABORTED.unpack_from(view, r.need(16))))
                        r.skip_tagged()
                    aborted = tuple(entries)
                (preferred,) = _I32.unpack_from(view, r.need(4))
                n = r.uvarint() - 1
                records = None
                if n >= 0:
                    start = r.need(n)
                    records = view[start : start + n]
                diverging = NO_DIVERGING_EPOCH
                for _ in range(r.count() + 1):
                    tag = r.uvarint()
                    size = r.uvarint()
                    field_start = r.need(size)
                    if tag == 0:
                        sub = _Reader(view[field_start : field_start + size])
                        epoch, end_offset = _I32_I64.unpack_from(sub.buf, sub.need(12))
                        sub.skip_tagged()
                        diverging = EpochEndOffset(epoch, end_offset)
                partitions.append(
                    FetchPartitionResult(
                        index, code, hw, lso, log_start, aborted, records, diverging, preferred
                    )
                )
            r.skip_tagged()
            topics.append(FetchTopicResult(topic, tuple(partitions)))
        r.skip_tagged()
    except (struct.error, UnicodeDecodeError) as exc:
        raise InvalidRequestError(f"malformed FetchResponse: {exc}") from None
    return correlation_id, FetchResponseData(
        REPLICA_FETCH_VERSION,
        error_code,
        session_id,
        tuple(topics),
        datetime.timedelta(milliseconds=throttle_ms),
    )


# ---------------------------------------------------------------------------------------------
# leader: the FetchRequest v12 body a fetcher sends


class FetchTopic(NamedTuple):
    """``FetchRequest.FetchTopic`` (v12: by name)."""

    topic: str
    partitions: tuple[ReplicaFetchPartition, ...]


class ForgottenTopic(NamedTuple):
    """``FetchRequest.ForgottenTopic``."""

    topic: str
    partitions: tuple[int, ...]


class FetchRequestV12(NamedTuple):
    """``FetchRequestData`` v12 with the field names of kio's entity (``max_wait`` a timedelta)."""

    replica_id: int
    max_wait: datetime.timedelta
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: tuple[FetchTopic, ...]
    forgotten_topics_data: tuple[ForgottenTopic, ...]
    rack_id: str


def _fast_string(buf: memoryview, pos: int, end: int) -> tuple[str, int]:
    n, pos = read_unsigned_varint(buf, pos, end)
    n -= 1
    if n < 0 or pos + n > end:
        raise FastPathMiss
    return str(buf[pos : pos + n], "utf-8"), pos + n


def _no_tags(buf: memoryview, pos: int, end: int) -> int:
    tags, pos = read_unsigned_varint(buf, pos, end)
    if tags:
        raise FastPathMiss
    return pos


def decode_fetch_request_v12_fast(
    frame: bytes | bytearray | memoryview, offset: int
) -> FetchRequestV12 | None:
    """Decode a FetchRequest v12 body at ``offset`` of ``frame``; ``None`` when it is not a plain
    well-formed request (a truncation, a null array, invalid UTF-8, any tagged field such as
    ``cluster_id``, trailing bytes...): the caller then decodes through the bounded scan + kio,
    which gives every unusual body that path's errors and hostile-input guarantees (issue #14).
    Every loop reads at least one byte per element, bounds-checked."""
    buf = memoryview(frame)
    end = len(buf)
    pos = offset
    try:
        if pos + _REQUEST_TOP.size > end:
            raise FastPathMiss
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session_id, epoch = (
            _REQUEST_TOP.unpack_from(buf, pos)
        )
        pos += _REQUEST_TOP.size
        count, pos = read_unsigned_varint(buf, pos, end)
        if count == 0:
            raise FastPathMiss
        topics = []
        unpack_partition = _REQUEST_PARTITION.unpack_from
        size = _REQUEST_PARTITION.size
        for _ in range(count - 1):
            name, pos = _fast_string(buf, pos, end)
            n, pos = read_unsigned_varint(buf, pos, end)
            if n == 0:
                raise FastPathMiss
            partitions = []
            for _ in range(n - 1):
                if pos + size > end:
                    raise FastPathMiss
                index, leader_epoch, fetch_offset, last_epoch, log_start, max_part, tags = unpack_partition(
                    buf, pos
                )
                if tags:
                    raise FastPathMiss
                pos += size
                partitions.append(
                    ReplicaFetchPartition(index, leader_epoch, fetch_offset, last_epoch, log_start, max_part)
                )
            pos = _no_tags(buf, pos, end)
            topics.append(FetchTopic(name, tuple(partitions)))
        count, pos = read_unsigned_varint(buf, pos, end)
        if count == 0:
            raise FastPathMiss
        forgotten = []
        for _ in range(count - 1):
            name, pos = _fast_string(buf, pos, end)
            n, pos = read_unsigned_varint(buf, pos, end)
            if n == 0 or pos + 4 * (n - 1) > end:
                raise FastPathMiss
            indexes = struct.unpack_from(f">{n - 1}i", buf, pos)
            pos += 4 * (n - 1)
            pos = _no_tags(buf, pos, end)
            forgotten.append(ForgottenTopic(name, indexes))
        rack_id, pos = _fast_string(buf, pos, end)
        pos = _no_tags(buf, pos, end)
        if pos != end:
            raise FastPathMiss
    except (FastPathMiss, VarintError, UnicodeDecodeError):
        return None
    return FetchRequestV12(
        replica_id,
        datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes,
        max_bytes,
        isolation,
        session_id,
        epoch,
        tuple(topics),
        tuple(forgotten),
        rack_id,
    )
