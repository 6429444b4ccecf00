"""ListOffsets (key 2), v0-v7 (v0 through :mod:`broker.apis.list_offsets_v0`).

Special timestamps (``ListOffsetsRequest``): -2 EARLIEST -> log start offset; -1 LATEST -> high
watermark (``isolation_level`` 0, read_uncommitted) / last stable offset (1, read_committed, v2+,
KIP-98); -3 MAX_TIMESTAMP (v7+, KIP-734) -> the first record with the largest timestamp. Any other
value: the first offset whose timestamp is >= it (``UnifiedLog.fetchOffsetByTimestamp``), or
offset/timestamp -1 when none; consumers never see offsets at or beyond the high watermark (the
LSO under read_committed: ``Partition.fetchOffsetForTimestamp``). Brokers (replica_id >= 0)
and debugging consumers (-2) read up to the log end. Served by the leader only;
``current_leader_epoch`` (v4+) fences stale requests (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH).
A newly elected leader answers LATEST with ``OFFSET_NOT_AVAILABLE`` to consumers until its high
watermark reaches the start offset of its epoch (``Partition.fetchOffsetForTimestamp``, KIP-279).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.list_offsets.v1.request import ListOffsetsPartition as PartitionV1
from kio.schema.list_offsets.v1.request import ListOffsetsRequest as ListOffsetsRequestV1
from kio.schema.list_offsets.v2.request import ListOffsetsPartition as PartitionV2
from kio.schema.list_offsets.v3.request import ListOffsetsPartition as PartitionV3

from broker.apis.auth_helper import authorized_names
from broker.apis.context import BrokerContext
from broker.apis.list_offsets_v0 import ListOffsetsRequestV0
from broker.errors import error_code_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode, OffsetNotAvailableError

if TYPE_CHECKING:
    from broker.apis.kio_types import ListOffsetsRequest, ListOffsetsResponse

_NO_LEADER_EPOCH_PARTITIONS = (PartitionV1, PartitionV2, PartitionV3)

__all__ = [
    "handle_list_offsets",
    "list_offsets_error_response",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
]

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3


def _response_class(version: int) -> type[Any]:
    return response_class(ApiKey.LIST_OFFSETS, max(version, 1))


def _lookup(
    ctx: BrokerContext,
    request: ListOffsetsRequest | ListOffsetsRequestV0,
    topic: str,
    index: int,
    ts: int,
    current_leader_epoch: int,
    version: int,
) -> tuple[int, int, int]:
    """(offset, timestamp, leader_epoch) for partition ``index`` of ``topic`` at timestamp
    ``ts``; raises KafkaError."""
    registration, log = ctx.leader_log(topic, index, current_leader_epoch)
    epoch = registration.leader_epoch
    # v2+ (and our v0 decode) name the isolation level (KIP-98); v1 reads uncommitted
    isolation_level = 0 if isinstance(request, ListOffsetsRequestV1) else request.isolation_level
    if request.replica_id != -1:
        fetch_limit = log.log_end_offset
    elif isolation_level == 1:
        fetch_limit = log.last_stable_offset
    else:
        fetch_limit = log.high_watermark
    partition = ctx.replica_manager.partition(topic, index) if ctx.replica_manager else None
    if (
        partition is not None
        and request.replica_id == -1
        and ts == LATEST_TIMESTAMP
        and partition.leader_epoch_start_offset is not None
        and log.high_watermark < partition.leader_epoch_start_offset
    ):
        raise OffsetNotAvailableError(
            f"{topic}-{index}: high watermark {log.high_watermark} is below the start offset "
            f"{partition.leader_epoch_start_offset} of leader epoch {epoch}"
        )
    if ts == EARLIEST_TIMESTAMP:
        return log.log_start_offset, -1, epoch
    if ts == LATEST_TIMESTAMP:
        return fetch_limit, -1, epoch
    if ts == MAX_TIMESTAMP and version >= 7:
        found = log.latest_timestamp()
    else:
        found = log.fetch_offset_by_timestamp(ts)
    if found is None or found[0] >= fetch_limit:
        return -1, -1, -1
    return found[0], found[1], epoch


async def handle_list_offsets(
    ctx: BrokerContext, rctx: RequestContext, request: ListOffsetsRequest | ListOffsetsRequestV0
) -> ListOffsetsResponse:
    """Handle a ListOffsetsRequest; returns a v1+-shaped response entity (v0 is re-encoded).
    Each topic needs DESCRIBE (else TOPIC_AUTHORIZATION_FAILED per partition)."""
    version = rctx.api_version
    names = [t.name for t in request.topics]
    allowed = authorized_names(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    cls = _response_class(version)
    topic_cls = nested(cls, "ListOffsetsTopicResponse")
    partition_cls = nested(cls, "ListOffsetsPartitionResponse")
    seen: set[tuple[str, int]] = set()
    topics_out = []
    for t in request.topics:
        partitions_out = []
        for p in t.partitions:
            offset = timestamp = epoch = -1
            key = (t.name, p.partition_index)
            if t.name not in allowed:
                code = ErrorCode.topic_authorization_failed
            elif key in seen:
                code = ErrorCode.invalid_request  # Kafka rejects duplicate partitions
            else:
                seen.add(key)
                try:
                    # v4+ (and our v0 decode) carry the fetcher's leader epoch (KIP-320)
                    leader_epoch = (
                        -1 if isinstance(p, _NO_LEADER_EPOCH_PARTITIONS) else p.current_leader_epoch
                    )
                    offset, timestamp, epoch = _lookup(
                        ctx, request, t.name, p.partition_index, p.timestamp, leader_epoch, version
                    )
                    code = ErrorCode.none
                except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
                    code = error_code_for(exc, f"ListOffsets v{version} of {t.name}-{p.partition_index}")
            partitions_out.append(
                build(
                    partition_cls,
                    partition_index=p.partition_index,
                    error_code=code,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics_out.append(topic_cls(name=t.name, partitions=tuple(partitions_out)))
    return build(cls, throttle_time=ZERO_DURATION, topics=tuple(topics_out))


def list_offsets_error_response(
    request: ListOffsetsRequest | ListOffsetsRequestV0, version: int, code: ErrorCode
) -> ListOffsetsResponse:
    """The error for every requested partition."""
    cls = _response_class(version)
    topic_cls = nested(cls, "ListOffsetsTopicResponse")
    partition_cls = nested(cls, "ListOffsetsPartitionResponse")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        topics=tuple(
            topic_cls(
                name=t.name,
                partitions=tuple(
                    build(
                        partition_cls,
                        partition_index=p.partition_index,
                        error_code=code,
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )
