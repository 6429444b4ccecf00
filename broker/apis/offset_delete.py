"""OffsetDelete (key 47), v0 (KIP-496, ``KafkaApis.handleOffsetDeleteRequest``): deletes
committed offsets of a group; GROUP_SUBSCRIBED_TO_TOPIC for partitions of topics a non-empty
consumer group subscribes to; GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP at the top level."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import OffsetDeleteRequest, OffsetDeleteResponse

__all__ = ["handle_offset_delete", "offset_delete_error_response"]


def _response(version: int, request: Any, error: int, errors: dict[tuple[str, int], int]) -> Any:
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
    """Handle an OffsetDeleteRequest."""
    partitions = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    error, errors = await coordinator_of(ctx).offsets.handle_delete_offsets(request.group_id, partitions)
    return _response(rctx.api_version, request, error, errors)


def offset_delete_error_response(request: Any, version: int, code: ErrorCode) -> Any:
    return _response(version, request, int(code), {})
