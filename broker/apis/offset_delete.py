"""OffsetDelete (key 47), v0 (KIP-496, ``KafkaApis.handleOffsetDeleteRequest``): deletes
committed offsets of a group; GROUP_SUBSCRIBED_TO_TOPIC for partitions of topics a non-empty
consumer group subscribes to; GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP at the top level."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import OffsetDeleteRequest, OffsetDeleteResponse

__all__ = ["handle_offset_delete", "offset_delete_error_response"]


def _response(
    version: int, request: OffsetDeleteRequest, error: int, errors: dict[tuple[str, int], int]
) -> OffsetDeleteResponse:
    cls = response_class(ApiKey.OFFSET_DELETE, version)
    topic_cls = nested(cls, "OffsetDeleteResponseTopic")
    partition_cls = nested(cls, "OffsetDeleteResponsePartition")
    topics = ()
    if not error:
        topics = tuple(
            topic_cls(
                name=t.name,
                partitions=tuple(
                    partition_cls(
                        partition_index=p.partition_index,
                        error_code=ErrorCode(errors.get((t.name, p.partition_index), 0)),
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    return build(cls, error_code=ErrorCode(error), throttle_time=ZERO_DURATION, topics=topics)


async def handle_offset_delete(
    ctx: BrokerContext, rctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    """Handle an OffsetDeleteRequest: DELETE on the group (else GROUP_AUTHORIZATION_FAILED), then
    READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, not deleted)."""
    if not authorize(ctx, rctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return offset_delete_error_response(request, rctx.api_version, ErrorCode.group_authorization_failed)
    readable = authorized_names(
        ctx, rctx, AclOperation.READ, ResourceType.TOPIC, [t.name for t in request.topics]
    )
    partitions: list[tuple[str, int]] = [
        (t.name, p.partition_index) for t in request.topics for p in t.partitions if t.name in readable
    ]
    error, errors = await coordinator_of(ctx).offsets.handle_delete_offsets(request.group_id, partitions)
    errors.update(
        ((t.name, p.partition_index), int(ErrorCode.topic_authorization_failed))
        for t in request.topics
        if t.name not in readable
        for p in t.partitions
    )
    return _response(rctx.api_version, request, error, errors)


def offset_delete_error_response(
    request: OffsetDeleteRequest, version: int, code: ErrorCode
) -> OffsetDeleteResponse:
    return _response(version, request, int(code), {})
