"""OffsetForLeaderEpoch (key 23), v2-v4 (``Partition.lastOffsetForLeaderEpoch``, KIP-101/279).

Served by the leader only (clients validating positions, followers truncating; ``replica_id``
of v3+ is accepted: -1 consumer, -2 debugging, >= 0 a follower). Answers from the leader epoch
cache (``LeaderEpochFileCache.endOffsetFor``): the requested epoch is the latest -> (it, log end
offset); else (largest epoch <= requested, start offset of the next higher epoch); no epoch <= it
-> (requested, start offset of the first epoch); above every epoch or -1 -> (-1, -1)
(UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET). ``current_leader_epoch`` fences stale requesters
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, KIP-320); non-leaders answer NOT_LEADER_OR_FOLLOWER.
Authorization (``KafkaApis.handleOffsetForLeaderEpochRequest``): CLUSTER_ACTION on the cluster
allows every topic, else each topic needs DESCRIBE (TOPIC_AUTHORIZATION_FAILED per partition).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize_cluster, authorized_names
from broker.apis.context import BrokerContext
from broker.errors import error_code_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode, TopicAuthorizationFailedError

if TYPE_CHECKING:
    from broker.apis.kio_types import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

__all__ = ["handle_offset_for_leader_epoch", "offset_for_leader_epoch_error_response"]


async def handle_offset_for_leader_epoch(
    ctx: BrokerContext, rctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    cls = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, rctx.api_version)
    topic_cls = nested(cls, "OffsetForLeaderTopicResult")
    partition_cls = nested(cls, "EpochEndOffset")
    names = [t.topic for t in request.topics]
    allowed = (
        set(names)
        if authorize_cluster(ctx, rctx, AclOperation.CLUSTER_ACTION)
        else authorized_names(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    )
    topics_out = []
    for t in request.topics:
        partitions_out = []
        for p in t.partitions:
            epoch, end_offset = -1, -1
            try:
                if t.topic not in allowed:
                    raise TopicAuthorizationFailedError(f"Not authorized to describe topic {t.topic}")
                partition = ctx.replica_manager.leader_partition(t.topic, p.partition, p.current_leader_epoch)
                epoch, end_offset = partition.last_offset_for_leader_epoch(
                    p.current_leader_epoch, p.leader_epoch
                )
                code = ErrorCode.none
            except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
                code = error_code_for(exc, f"OffsetForLeaderEpoch of {t.topic}-{p.partition}")
            partitions_out.append(
                build(
                    partition_cls,
                    error_code=code,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics_out.append(topic_cls(topic=t.topic, partitions=tuple(partitions_out)))
    return build(cls, throttle_time=ZERO_DURATION, topics=tuple(topics_out))


def offset_for_leader_epoch_error_response(
    request: OffsetForLeaderEpochRequest, version: int, code: ErrorCode
) -> OffsetForLeaderEpochResponse:
    cls = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    topic_cls = nested(cls, "OffsetForLeaderTopicResult")
    partition_cls = nested(cls, "EpochEndOffset")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        topics=tuple(
            topic_cls(
                topic=t.topic,
                partitions=tuple(
                    build(
                        partition_cls, error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )
