"""AlterConfigs (key 33), v0-v2 (``ControllerApis.handleLegacyAlterConfigs``): each TOPIC,
BROKER or GROUP resource's entries *replace* its whole config set (keys left out return to their
defaults). ``validate_only`` checks without changing anything.

BROKER resources are dynamic broker configs (:mod:`broker.dynamic_broker_config`): named by this
broker's id (``ConfigAdminManager.validateResourceNameIsCurrentNodeId``: another id is
INVALID_REQUEST) or "" for the cluster-wide default. GROUP resources are group configs
(:mod:`broker.controller.group_configs`).

Per resource: UNKNOWN_TOPIC_OR_PARTITION, INVALID_CONFIG (naming the key), INVALID_REQUEST (a
resource or key named twice, an unsupported resource type, a broker key that cannot change
dynamically). :func:`alter_resources` is shared with IncrementalAlterConfigs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from broker.apis.auth_helper import config_resource_error
from broker.apis.context import BrokerContext
from broker.controller.metadata_image import RESOURCE_TYPE_BROKER, RESOURCE_TYPE_GROUP, RESOURCE_TYPE_TOPIC
from broker.errors import error_code_for, error_message_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode, InvalidRequestError, KafkaError

if TYPE_CHECKING:
    from broker.apis.kio_types import AlterConfigsRequest, AlterConfigsResponse

__all__ = ["handle_alter_configs", "alter_configs_error_response", "alter_resources", "broker_resource_error"]

ResourceOutcome = tuple[ErrorCode, str | None]


def broker_resource_error(node_id: int, name: str) -> KafkaError | None:
    """Why a BROKER resource cannot be altered through this broker: it names another broker
    (``ConfigAdminManager.validateResourceNameIsCurrentNodeId``); None for "" or this broker."""
    if not name:
        return None
    if not name.lstrip("-").isdigit():
        return InvalidRequestError(f"Node id must be an integer, but it is: {name}")
    if int(name) != node_id:
        return InvalidRequestError(f"Unexpected broker id, expected {node_id}, but received {name}")
    return None


async def alter_resources(
    ctx: BrokerContext,
    rctx: RequestContext,
    resources: Sequence[Any],
    alter_topics: Callable[[list[Any]], Awaitable[list[KafkaError | None]]],
    alter_others: Callable[[list[Any]], Awaitable[list[KafkaError | None]]],
    api_name: str,
) -> list[ResourceOutcome]:
    """Outcome per request resource, in order. A resource named twice is INVALID_REQUEST, then
    one the principal may not ALTER_CONFIGS is refused
    (:func:`~broker.apis.auth_helper.config_resource_error`); allowed TOPIC resources are passed
    together to ``alter_topics``, BROKER resources of this broker (or "") and GROUP resources
    together to ``alter_others`` (-> one error or None each); everything else is refused."""
    counts: dict[tuple[int, str], int] = {}
    for r in resources:
        key = (int(r.resource_type), r.resource_name)
        counts[key] = counts.get(key, 0) + 1
    outcomes: list[ResourceOutcome | None] = [None] * len(resources)
    topic_indexes: list[int] = []
    other_indexes: list[int] = []
    for i, r in enumerate(resources):
        error: KafkaError | None = None
        if counts[(int(r.resource_type), r.resource_name)] > 1:
            error = InvalidRequestError(f"Error due to duplicate resource {r.resource_name} in {api_name}")
        elif (
            refused := config_resource_error(
                ctx, rctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name
            )
        ) is not None:
            error = refused
        elif r.resource_type == RESOURCE_TYPE_TOPIC:
            topic_indexes.append(i)
            continue
        elif r.resource_type == RESOURCE_TYPE_BROKER and (
            (error := broker_resource_error(ctx.node_id, r.resource_name)) is not None
        ):
            pass
        elif r.resource_type in (RESOURCE_TYPE_BROKER, RESOURCE_TYPE_GROUP):
            other_indexes.append(i)
            continue
        else:
            error = InvalidRequestError(f"Unsupported resource type {r.resource_type} for {api_name}")
        outcomes[i] = (error_code_for(error), error_message_for(error))
    for indexes, alter in ((topic_indexes, alter_topics), (other_indexes, alter_others)):
        if not indexes:
            continue
        errors = await alter([resources[i] for i in indexes])
        for i, err in zip(indexes, errors, strict=True):
            outcomes[i] = (
                (ErrorCode.none, None) if err is None else (error_code_for(err), error_message_for(err))
            )
    return [o if o is not None else (ErrorCode.unknown_server_error, None) for o in outcomes]


def build_alter_response(
    api_key: ApiKey, version: int, resources: Sequence[Any], outcomes: list[ResourceOutcome]
) -> Any:
    """An AlterConfigs / IncrementalAlterConfigs response (same shape in every version)."""
    cls = response_class(api_key, version)
    entry_cls = nested(cls, "AlterConfigsResourceResponse")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        responses=tuple(
            entry_cls(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r, (code, message) in zip(resources, outcomes, strict=True)
        ),
    )


async def handle_alter_configs(
    ctx: BrokerContext, rctx: RequestContext, request: AlterConfigsRequest
) -> AlterConfigsResponse:
    """Handle an AlterConfigsRequest (v0-v2)."""

    async def alter_topics(topic_resources: list[Any]) -> list[KafkaError | None]:
        return await ctx.controller.alter_topic_configs(
            [(r.resource_name, [(c.name, c.value) for c in r.configs]) for r in topic_resources],
            bool(request.validate_only),
        )

    async def alter_others(other_resources: list[Any]) -> list[KafkaError | None]:
        return await ctx.controller.alter_resource_configs(
            [
                (int(r.resource_type), r.resource_name, [(c.name, c.value) for c in r.configs])
                for r in other_resources
            ],
            False,
            ctx.config.values,
            bool(request.validate_only),
        )

    outcomes = await alter_resources(ctx, rctx, request.resources, alter_topics, alter_others, "AlterConfigs")
    return build_alter_response(ApiKey.ALTER_CONFIGS, rctx.api_version, request.resources, outcomes)


def alter_configs_error_response(
    request: AlterConfigsRequest, version: int, code: ErrorCode
) -> AlterConfigsResponse:
    """``code`` for every resource of ``request``."""
    return build_alter_response(
        ApiKey.ALTER_CONFIGS, version, request.resources, [(code, None)] * len(request.resources)
    )
