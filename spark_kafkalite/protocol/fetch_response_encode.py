"""Hand-written encoder for FetchResponse v4-v12 (``FetchResponse.json``), byte-identical to
kio's generic encoder (a unit test compares them on generated responses).

Every long-poll of a consumer and every round of a follower's replica fetcher ends in one of
these, so with a thousand connections the broker encodes thousands per second; kio's
schema-walking writer was about a tenth of the broker's CPU per long-poll fetch.

Layout (versions as in ``FetchResponse.json``): ``throttle_time_ms int32, error_code int16
(v7+), session_id int32 (v7+), responses [topic string, partitions [partition_index int32,
error_code int16, high_watermark int64, last_stable_offset int64, log_start_offset int64 (v5+),
aborted_transactions nullable [producer_id int64, first_offset int64],
preferred_read_replica int32 (v11+), records nullable records]]``. v12 is flexible (KIP-482):
compact strings, arrays and records, a tagged-field section after every struct (a partition's
tags 0 ``diverging_epoch``, 1 ``current_leader``, 2 ``snapshot_id``, each written only when it
differs from its default), and response header v1.

The broker's fetch handler answers with :class:`FetchResponseData` of :class:`FetchTopicResult`
and :class:`FetchPartitionResult`: the same fields as plain slots, without a kio entity per
partition (whose ``__init__`` checks every field's type: a follower fetch from a leader of
thousands of partitions answers hundreds per response); the encoder takes either.

Record sets of at least 64 KiB are not copied: they are chunks of their own in the returned
:data:`~spark_kafkalite.protocol.framing.FrameChunks` (Kafka sends ``FileRecords`` the same way).
"""

from __future__ import annotations

import datetime
import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from spark_kafkalite.protocol.byte_utils import write_array_length
from spark_kafkalite.protocol.varint import write_unsigned_varint

__all__ = [
    "FETCH_RESPONSE_MIN_VERSION",
    "FETCH_RESPONSE_MAX_VERSION",
    "AbortedTransaction",
    "EpochEndOffset",
    "FetchPartitionResult",
    "FetchResponseData",
    "FetchTopicResult",
    "encode_fetch_response",
]

FETCH_RESPONSE_MIN_VERSION = 4
FETCH_RESPONSE_MAX_VERSION = 12

_BY_REFERENCE_MIN_BYTES = 64 * 1024  # as framing._ChunkWriter
_HEAD = struct.Struct(">ii")  # frame size, correlation id
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_TOP_V7 = struct.Struct(">ihi")  # throttle_time, error_code, session_id
_PARTITION_V4 = struct.Struct(">ihqq")  # index, error_code, high_watermark, last_stable_offset
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... + log_start_offset
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
_EPOCH_END_OFFSET = struct.Struct(">iqB")  # tag 0: epoch, end_offset, no tags
_LEADER = struct.Struct(">iiB")  # tag 1: leader_id, leader_epoch, no tags
_SNAPSHOT = struct.Struct(">qiB")  # tag 2: end_offset, epoch, no tags


class AbortedTransaction(NamedTuple):
    """``FetchResponse.AbortedTransaction``."""

    producer_id: int
    first_offset: int


class EpochEndOffset(NamedTuple):
    """``FetchResponse.EpochEndOffset`` (KIP-595 ``DivergingEpoch``; (-1, -1): none)."""

    epoch: int = -1
    end_offset: int = -1


class _LeaderIdAndEpoch(NamedTuple):
    leader_id: int = -1
    leader_epoch: int = -1


class _SnapshotId(NamedTuple):
    end_offset: int = -1
    epoch: int = -1


NO_DIVERGING_EPOCH = EpochEndOffset()


class FetchPartitionResult:
    """Kafka's ``FetchResponseData.PartitionData`` without kio's entity machinery.

    ``aborted_transactions``: None (read_uncommitted) or objects with ``producer_id`` and
    ``first_offset``; ``diverging_epoch``: :data:`NO_DIVERGING_EPOCH` unless the leader reports
    a divergence (v12+); ``records``: bytes-like, None for null (assignable: the fetch handler
    replaces a deferred read by its bytes). The broker never sends ``current_leader`` or
    ``snapshot_id``."""

    __slots__ = (
        "partition_index",
        "error_code",
        "high_watermark",
        "last_stable_offset",
        "log_start_offset",
        "aborted_transactions",
        "records",
        "diverging_epoch",
        "preferred_read_replica",
    )
    current_leader = _LeaderIdAndEpoch()
    snapshot_id = _SnapshotId()

    def __init__(
        self,
        partition_index: int,
        error_code: int,
        high_watermark: int,
        last_stable_offset: int,
        log_start_offset: int,
        aborted_transactions: Any,
        records: Any,
        diverging_epoch: EpochEndOffset = NO_DIVERGING_EPOCH,
        preferred_read_replica: int = -1,
    ) -> None:
        self.partition_index = partition_index
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.aborted_transactions = aborted_transactions
        self.records = records
        self.diverging_epoch = diverging_epoch
        self.preferred_read_replica = preferred_read_replica

    def __repr__(self) -> str:
        size = None if self.records is None else len(self.records)
        return (
            f"FetchPartitionResult({self.partition_index}, error={self.error_code}, hw={self.high_watermark}, "
            f"lso={self.last_stable_offset}, log_start={self.log_start_offset}, records={size} bytes)"
        )


@dataclass(slots=True)
class FetchTopicResult:
    """Kafka's ``FetchResponseData.FetchableTopicResponse``."""

    topic: str
    partitions: tuple[FetchPartitionResult, ...]


@dataclass(slots=True)
class FetchResponseData:
    """Kafka's ``FetchResponseData`` (``version``: the request's api version)."""

    version: int
    error_code: int
    session_id: int
    responses: tuple[FetchTopicResult, ...]
    throttle_time: datetime.timedelta = datetime.timedelta(0)


def _millis(value: Any) -> int:
    if hasattr(value, "total_seconds"):
        return round(value.total_seconds() * 1000)
    return int(value)


def encode_fetch_response(response: Any, correlation_id: int) -> list[bytes | bytearray | memoryview]:
    """The response frame (size prefix included) of a kio ``FetchResponse`` v4-v12 or a
    :class:`FetchResponseData`, as chunks whose concatenation is the frame (the first one a
    bytearray).

    Raises:
        ValueError: the version is outside v4-v12, or a topic name is too long.
    """
    version = response.version if isinstance(response, FetchResponseData) else response.__version__
    if not FETCH_RESPONSE_MIN_VERSION <= version <= FETCH_RESPONSE_MAX_VERSION:
        raise ValueError(f"FetchResponse v{version} is not encoded here (v4-v12 only)")
    flexible = version >= 12
    chunks: list[bytes | bytearray | memoryview] = []
    out = bytearray(_HEAD.pack(0, correlation_id))
    first = out
    if flexible:
        out.append(0)  # response header v1: no tagged fields
    throttle = _millis(response.throttle_time)
    if version >= 7:
        out += _TOP_V7.pack(throttle, int(response.error_code), int(response.session_id))
    else:
        out += _I32.pack(throttle)
    partition_struct = _PARTITION_V5 if version >= 5 else _PARTITION_V4
    topics = response.responses
    write_array_length(out, len(topics), flexible)
    for topic in topics:
        name = topic.topic.encode()
        if flexible:
            write_unsigned_varint(out, len(name) + 1)
        else:
            if len(name) > 0x7FFF:
                raise ValueError(f"topic name of {len(name)} bytes is too long for an int16 length")
            out += _I16.pack(len(name))
        out += name
        partitions = topic.partitions
        write_array_length(out, len(partitions), flexible)
        for p in partitions:
            if version >= 5:
                out += partition_struct.pack(
                    p.partition_index,
                    int(p.error_code),
                    p.high_watermark,
                    p.last_stable_offset,
                    p.log_start_offset,
                )
            else:
                out += partition_struct.pack(
                    p.partition_index, int(p.error_code), p.high_watermark, p.last_stable_offset
                )
            aborted = p.aborted_transactions
            if aborted is None:
                if flexible:
                    out.append(0)
                else:
                    out += b"\xff\xff\xff\xff"
            else:
                write_array_length(out, len(aborted), flexible)
                for t in aborted:
                    out += _ABORTED.pack(t.producer_id, t.first_offset)
                    if flexible:
                        out.append(0)
            if version >= 11:
                out += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                if flexible:
                    out.append(0)
                else:
                    out += b"\xff\xff\xff\xff"
            else:
                size = len(records)
                if flexible:
                    write_unsigned_varint(out, size + 1)
                else:
                    out += _I32.pack(size)
                if size >= _BY_REFERENCE_MIN_BYTES:
                    chunks.append(out)
                    chunks.append(records)
                    out = bytearray()
                else:
                    out += records
            if flexible:
                _partition_tags(out, p)
        if flexible:
            out.append(0)
    if flexible:
        out.append(0)
    if out or not chunks:
        chunks.append(out)
    _I32.pack_into(first, 0, sum(len(c) for c in chunks) - 4)
    return chunks


def _partition_tags(out: bytearray, p: Any) -> None:
    """A v12 partition's tagged fields: each present only when it differs from its default."""
    tags: list[bytes] = []
    diverging, leader, snapshot = p.diverging_epoch, p.current_leader, p.snapshot_id
    if diverging.epoch != -1 or diverging.end_offset != -1:
        tags.append(b"\x00\x0d" + _EPOCH_END_OFFSET.pack(diverging.epoch, diverging.end_offset, 0))
    if leader.leader_id != -1 or leader.leader_epoch != -1:
        tags.append(b"\x01\x09" + _LEADER.pack(leader.leader_id, leader.leader_epoch, 0))
    if snapshot.end_offset != -1 or snapshot.epoch != -1:
        tags.append(b"\x02\x0d" + _SNAPSHOT.pack(snapshot.end_offset, snapshot.epoch, 0))
    out.append(len(tags))
    for tag in tags:
        out += tag
