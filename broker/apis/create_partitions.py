"""CreatePartitions (key 37), v0-v3 (``ControllerApis.createPartitions`` /
``ReplicationControlManager.createPartitions``).

Grows each topic to ``count`` partitions; the new partitions' logs are created and Metadata lists
them at once. Per topic: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS (``count`` not above the
current number), INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST (topic named twice).
``validate_only`` checks without creating.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorized_names
from broker.apis.context import BrokerContext
from broker.controller.controller import CreatePartitionsSpec
from broker.errors import error_code_for, error_message_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError, TopicAuthorizationFailedError

if TYPE_CHECKING:
    from broker.apis.kio_types import CreatePartitionsRequest, CreatePartitionsResponse

__all__ = ["handle_create_partitions", "create_partitions_error_response"]


def _specs(request: CreatePartitionsRequest, allowed: Collection[str]) -> list[CreatePartitionsSpec]:
    """The controller's spec of each requested topic in ``allowed``."""
    return [
        CreatePartitionsSpec(
            name=topic.name,
            count=int(topic.count),
            assignments=None
            if topic.assignments is None
            else [tuple(int(b) for b in a.broker_ids) for a in topic.assignments],
        )
        for topic in request.topics
        if topic.name in allowed
    ]


async def handle_create_partitions(
    ctx: BrokerContext, rctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    """Handle a CreatePartitionsRequest (v0-v3); each topic needs ALTER (else
    TOPIC_AUTHORIZATION_FAILED)."""
    cls = response_class(ApiKey.CREATE_PARTITIONS, rctx.api_version)
    result_cls = nested(cls, "CreatePartitionsTopicResult")
    allowed = authorized_names(
        ctx, rctx, AclOperation.ALTER, ResourceType.TOPIC, [t.name for t in request.topics]
    )
    grown = iter(
        await ctx.controller.create_partitions(_specs(request, allowed), bool(request.validate_only))
    )
    outcomes: list[tuple[str, KafkaError | None]] = [
        next(grown) if t.name in allowed else (t.name, TopicAuthorizationFailedError("Authorization failed."))
        for t in request.topics
    ]
    results = []
    for name, error in outcomes:
        if error is None:
            results.append(result_cls(name=name, error_code=ErrorCode.none, error_message=None))
        else:
            results.append(
                result_cls(
                    name=name,
                    error_code=error_code_for(error, f"CreatePartitions of {name}"),
                    error_message=error_message_for(error),
                )
            )
    return build(cls, throttle_time=ZERO_DURATION, results=tuple(results))


def create_partitions_error_response(
    request: CreatePartitionsRequest, version: int, code: ErrorCode
) -> CreatePartitionsResponse:
    """``code`` for every topic of ``request``."""
    cls = response_class(ApiKey.CREATE_PARTITIONS, version)
    result_cls = nested(cls, "CreatePartitionsTopicResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        results=tuple(result_cls(name=t.name, error_code=code, error_message=None) for t in request.topics),
    )
