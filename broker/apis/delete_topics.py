"""DeleteTopics (key 20), v1-v6 (``ControllerApis.deleteTopics``).

v1-v5 name topics; v6 names them or gives topic ids. Unknown names ->
``UNKNOWN_TOPIC_OR_PARTITION``, unknown ids -> ``UNKNOWN_TOPIC_ID``; ``delete.topic.enable=false``
-> ``TOPIC_DELETION_DISABLED``. Parked fetches on deleted partitions are woken (they then answer
``UNKNOWN_TOPIC_OR_PARTITION``). Authorization: DELETE on each topic (by id also DESCRIBE),
else ``TOPIC_AUTHORIZATION_FAILED``, checked before existence.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.delete_topics.v6.request import DeleteTopicsRequest as DeleteTopicsRequestV6

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode, TopicAuthorizationFailedError

if TYPE_CHECKING:
    from broker.apis.kio_types import DeleteTopicsRequest, DeleteTopicsResponse

__all__ = ["handle_delete_topics", "delete_topics_error_response"]

_ZERO_UUID = uuid.UUID(int=0)


def _requested(request: DeleteTopicsRequest) -> list[tuple[str | None, uuid.UUID | None]]:
    """The (name, id) pairs to delete: v6+ names topics by name or id (KIP-516), v1-5 by name."""
    if isinstance(request, DeleteTopicsRequestV6):
        return [(t.name, None if t.topic_id in (None, _ZERO_UUID) else t.topic_id) for t in request.topics]
    return [(name, None) for name in request.topic_names]


async def handle_delete_topics(
    ctx: BrokerContext, rctx: RequestContext, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    """Handle a DeleteTopicsRequest."""
    cls = response_class(ApiKey.DELETE_TOPICS, rctx.api_version)
    result_cls = nested(cls, "DeletableTopicResult")
    requested = _requested(request)
    denied = [not _may_delete(ctx, rctx, name, topic_id) for name, topic_id in requested]
    allowed = [entry for entry, no in zip(requested, denied, strict=True) if not no]
    deleted = iter(await ctx.controller.delete_topics([n for n, _ in allowed], [i for _, i in allowed]))
    results = [
        (name, topic_id, TopicAuthorizationFailedError("Authorization failed.")) if no else next(deleted)
        for (name, topic_id), no in zip(requested, denied, strict=True)
    ]
    out = []
    for name, topic_id, error in results:
        out.append(
            build(
                result_cls,
                name=name,
                topic_id=topic_id or _ZERO_UUID,
                error_code=ErrorCode.none if error is None else ErrorCode(error.error_code),
                error_message=None if error is None else error.message,
            )
        )
    return build(cls, throttle_time=ZERO_DURATION, responses=tuple(out))


def _may_delete(
    ctx: BrokerContext, rctx: RequestContext, name: str | None, topic_id: uuid.UUID | None
) -> bool:
    if ctx.authorizer is None:
        return True
    if name is None:
        topic = ctx.image.topic_by_id(topic_id) if topic_id is not None else None
        if topic is None:
            return True  # UNKNOWN_TOPIC_ID from the controller
        if not authorize(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
            return False
        name = topic.name
    return authorize(ctx, rctx, AclOperation.DELETE, ResourceType.TOPIC, name)


def delete_topics_error_response(
    request: DeleteTopicsRequest, version: int, code: ErrorCode
) -> DeleteTopicsResponse:
    cls = response_class(ApiKey.DELETE_TOPICS, version)
    result_cls = nested(cls, "DeletableTopicResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        responses=tuple(
            build(result_cls, name=name, topic_id=topic_id or _ZERO_UUID, error_code=code, error_message=None)
            for name, topic_id in _requested(request)
        ),
    )
