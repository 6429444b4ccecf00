"""OffsetCommit (key 8), v2-9 served (v0-1 advertised only, as librdkafka <= 2.11.0's feature
check wants the range to cover 1-2; Kafka 4.0 dropped them too) (``KafkaApis.handleOffsetCommitRequest``).

Commits are answered after the records reached ``__consumer_offsets`` with acks=-1. v2-4
``retention_time`` (-1 = broker default) sets an explicit expire timestamp; v6+ carries the
committed leader epoch; v7+ ``group_instance_id``. Generation -1 with an empty member id is a
standalone commit (admin / ``assign()`` consumers), accepted only for an Empty or unknown group.
Partitions unknown to the metadata get UNKNOWN_TOPIC_OR_PARTITION (as Kafka's ``KafkaApis``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.offset_commit.v2.request import OffsetCommitRequest as OffsetCommitRequestV2
from kio.schema.offset_commit.v3.request import OffsetCommitRequest as OffsetCommitRequestV3
from kio.schema.offset_commit.v4.request import OffsetCommitRequest as OffsetCommitRequestV4
from kio.schema.offset_commit.v6.request import OffsetCommitRequestPartition as PartitionV6
from kio.schema.offset_commit.v7.request import OffsetCommitRequest as OffsetCommitRequestV7
from kio.schema.offset_commit.v7.request import OffsetCommitRequestPartition as PartitionV7
from kio.schema.offset_commit.v8.request import OffsetCommitRequest as OffsetCommitRequestV8
from kio.schema.offset_commit.v8.request import OffsetCommitRequestPartition as PartitionV8
from kio.schema.offset_commit.v9.request import OffsetCommitRequest as OffsetCommitRequestV9
from kio.schema.offset_commit.v9.request import OffsetCommitRequestPartition as PartitionV9

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of, to_ms
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.group_records import OffsetAndMetadata

if TYPE_CHECKING:
    from broker.apis.kio_types import OffsetCommitRequest, OffsetCommitResponse

_RETENTION_VERSIONS = (OffsetCommitRequestV2, OffsetCommitRequestV3, OffsetCommitRequestV4)
#: v6+ partitions carry the committed leader epoch (KIP-320)
_LEADER_EPOCH_PARTITIONS = (PartitionV6, PartitionV7, PartitionV8, PartitionV9)
#: v7+ carries group_instance_id (KIP-345)
_INSTANCE_ID_VERSIONS = (OffsetCommitRequestV7, OffsetCommitRequestV8, OffsetCommitRequestV9)

__all__ = ["handle_offset_commit", "offset_commit_error_response"]


def _response(
    version: int, request: OffsetCommitRequest, errors: dict[tuple[str, int], int] | None, code: ErrorCode
) -> OffsetCommitResponse:
    cls = response_class(ApiKey.OFFSET_COMMIT, version)
    topic_cls = nested(cls, "OffsetCommitResponseTopic")
    partition_cls = nested(cls, "OffsetCommitResponsePartition")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        topics=tuple(
            topic_cls(
                name=t.name,
                partitions=tuple(
                    partition_cls(
                        partition_index=p.partition_index,
                        error_code=ErrorCode(errors.get((t.name, p.partition_index), 0))
                        if errors is not None
                        else code,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )


async def handle_offset_commit(
    ctx: BrokerContext, rctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    """Handle an OffsetCommitRequest: READ on the group (else GROUP_AUTHORIZATION_FAILED for
    every partition), then READ on each topic (else TOPIC_AUTHORIZATION_FAILED, not committed)."""
    version = rctx.api_version
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return offset_commit_error_response(request, version, ErrorCode.group_authorization_failed)
    readable = authorized_names(
        ctx, rctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in request.topics]
    )
    coordinator = coordinator_of(ctx)
    now_ms = coordinator.scheduler.now_ms()
    expire_ms = -1
    if isinstance(request, _RETENTION_VERSIONS):  # v2-4 name a retention time (gone in v5, KIP-211)
        retention_ms = to_ms(request.retention_time)
        if retention_ms >= 0:
            expire_ms = now_ms + retention_ms
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in request.topics:
        for p in topic.partitions:
            offsets[(topic.name, p.partition_index)] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.committed_leader_epoch if isinstance(p, _LEADER_EPOCH_PARTITIONS) else -1,
                metadata=p.committed_metadata or "",
                commit_timestamp_ms=now_ms,
                expire_timestamp_ms=expire_ms,
            )
    # Kafka's KafkaApis: partitions unknown to this broker's metadata are not committed
    denied = {tp for tp in offsets if tp[0] not in readable}
    unknown = {tp for tp in offsets if tp not in denied and ctx.image.partition(tp[0], tp[1]) is None}
    errors = {tp: int(ErrorCode.unknown_topic_or_partition) for tp in unknown}
    errors.update((tp, int(ErrorCode.topic_authorization_failed)) for tp in denied)
    known = {tp: value for tp, value in offsets.items() if tp not in unknown and tp not in denied}
    if known or not offsets:
        errors.update(
            await coordinator.offsets.handle_commit_offsets(
                request.group_id,
                request.member_id,
                request.group_instance_id if isinstance(request, _INSTANCE_ID_VERSIONS) else None,
                request.generation_id_or_member_epoch,
                known,
                version,
            )
        )
    return _response(version, request, errors, ErrorCode.none)


def offset_commit_error_response(
    request: OffsetCommitRequest, version: int, code: ErrorCode
) -> OffsetCommitResponse:
    return _response(version, request, None, code)
