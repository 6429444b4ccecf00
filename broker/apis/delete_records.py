"""DeleteRecords (key 21), v0-v2 (Kafka's ``ReplicaManager.deleteRecords`` +
``Partition.deleteRecordsOnLeader``).

For each partition led here: offset -1 means the high watermark; a negative offset or one
above the high watermark gives ``OFFSET_OUT_OF_RANGE``; a topic whose ``cleanup.policy`` lacks
``delete`` gives ``POLICY_VIOLATION``. Otherwise the log start offset moves up to the offset
(never back), whole segments below it are deleted at once, and the response carries the new
low watermark (the log start offset). With one replica there is no follower to wait for. The
log-start-offset checkpoint is written before answering, so the deletion survives a crash.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorized_names
from broker.apis.context import BrokerContext
from broker.errors import error_code_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    OffsetOutOfRangeError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
)

if TYPE_CHECKING:
    from broker.apis.kio_types import DeleteRecordsRequest, DeleteRecordsResponse

__all__ = ["handle_delete_records", "delete_records_error_response", "HIGH_WATERMARK_OFFSET"]

logger = logging.getLogger(__name__)

HIGH_WATERMARK_OFFSET = -1


def _delete(ctx: BrokerContext, topic: str, partition: int, offset: int) -> int:
    """The new low watermark of one partition; raises KafkaError."""
    _, log = ctx.leader_log(topic, partition)
    if not log.config.delete:
        raise PolicyViolationError(
            f"Records of partition {topic}-{partition} can not be deleted due to the configured policy"
        )
    target = log.high_watermark if offset == HIGH_WATERMARK_OFFSET else offset
    if target < 0 or target > log.high_watermark:
        raise OffsetOutOfRangeError(
            f"Cannot delete records of partition {topic}-{partition} before offset {offset}: "
            f"the high watermark is {log.high_watermark}"
        )
    low_watermark = log.delete_records(target)
    ctx.fetch_purgatory.notify((topic, partition))  # the new log start offset is news to fetchers
    return low_watermark


async def handle_delete_records(
    ctx: BrokerContext, rctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    """Handle a DeleteRecordsRequest (any of v0-v2); each topic needs DELETE (else
    TOPIC_AUTHORIZATION_FAILED per partition)."""
    version = rctx.api_version
    allowed = authorized_names(
        ctx, rctx, AclOperation.DELETE, ResourceType.TOPIC, [t.name for t in request.topics]
    )
    cls = response_class(ApiKey.DELETE_RECORDS, version)
    topic_cls = nested(cls, "DeleteRecordsTopicResult")
    partition_cls = nested(cls, "DeleteRecordsPartitionResult")
    changed = False
    topics_out = []
    for t in request.topics:
        partitions_out = []
        for p in t.partitions:
            low_watermark = -1
            try:
                if t.name not in allowed:
                    raise TopicAuthorizationFailedError(f"Not authorized to delete records of {t.name}")
                low_watermark = _delete(ctx, t.name, p.partition_index, p.offset)
                code = ErrorCode.none
                changed = True
            except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
                code = error_code_for(exc, f"DeleteRecords v{version} of {t.name}-{p.partition_index}")
            partitions_out.append(
                build(
                    partition_cls,
                    partition_index=p.partition_index,
                    low_watermark=low_watermark,
                    error_code=code,
                )
            )
        topics_out.append(build(topic_cls, name=t.name, partitions=tuple(partitions_out)))
    if changed:
        ctx.log_manager.checkpoint_log_start_offsets()
    return build(cls, throttle_time=ZERO_DURATION, topics=tuple(topics_out))


def delete_records_error_response(
    request: DeleteRecordsRequest, version: int, code: ErrorCode
) -> DeleteRecordsResponse:
    """``code`` for every requested partition."""
    cls = response_class(ApiKey.DELETE_RECORDS, version)
    topic_cls = nested(cls, "DeleteRecordsTopicResult")
    partition_cls = nested(cls, "DeleteRecordsPartitionResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        topics=tuple(
            build(
                topic_cls,
                name=t.name,
                partitions=tuple(
                    build(partition_cls, partition_index=p.partition_index, low_watermark=-1, error_code=code)
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )
