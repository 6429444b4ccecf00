"""IncrementalAlterConfigs (key 44), v0-v1 (KIP-339; ``ControllerApis.handleIncrementalAlterConfigs``
+ ``ConfigurationControlManager.incrementalAlterConfigs``).

Per TOPIC, BROKER or GROUP resource, each entry is ``(name, op, value)`` with op SET (0), DELETE
(1), APPEND (2) or SUBTRACT (3); APPEND / SUBTRACT only for LIST configs such as
``cleanup.policy`` / ``log.cleanup.policy``. The resulting config set is validated as a whole
and applied atomically per resource; ``validate_only`` checks without changing anything. Errors
and resources as in :mod:`broker.apis.alter_configs`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.apis.alter_configs import alter_resources, build_alter_response
from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from broker.apis.kio_types import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

__all__ = ["handle_incremental_alter_configs", "incremental_alter_configs_error_response"]


async def handle_incremental_alter_configs(
    ctx: BrokerContext, rctx: RequestContext, request: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    """Handle an IncrementalAlterConfigsRequest (v0-v1)."""

    async def alter_topics(topic_resources: list[Any]) -> list[KafkaError | None]:
        return await ctx.controller.incremental_alter_topic_configs(
            [
                (r.resource_name, [(c.name, int(c.config_operation), c.value) for c in r.configs])
                for r in topic_resources
            ],
            ctx.config.values,
            bool(request.validate_only),
        )

    async def alter_others(other_resources: list[Any]) -> list[KafkaError | None]:
        return await ctx.controller.alter_resource_configs(
            [
                (
                    int(r.resource_type),
                    r.resource_name,
                    [(c.name, int(c.config_operation), c.value) for c in r.configs],
                )
                for r in other_resources
            ],
            True,
            ctx.config.values,
            bool(request.validate_only),
        )

    outcomes = await alter_resources(
        ctx, rctx, request.resources, alter_topics, alter_others, "IncrementalAlterConfigs"
    )
    return build_alter_response(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, rctx.api_version, request.resources, outcomes
    )


def incremental_alter_configs_error_response(
    request: IncrementalAlterConfigsRequest, version: int, code: ErrorCode
) -> IncrementalAlterConfigsResponse:
    """``code`` for every resource of ``request``."""
    return build_alter_response(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, version, request.resources, [(code, None)] * len(request.resources)
    )
