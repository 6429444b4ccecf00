"""DescribeConfigs (key 32), v1-v4 (Kafka 4.0's range; ``KafkaApis.handleDescribeConfigsRequest``
+ ``ConfigHelper.describeConfigs``).

Resources (:mod:`broker.apis.config_helper`): TOPIC (2) -> every topic config with its source
(DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG), UNKNOWN_TOPIC_OR_PARTITION for a missing topic; BROKER (4) named by this broker's
id -> every broker config with its source, "" -> the cluster-wide dynamic defaults; GROUP (32) ->
every group config (GROUP_CONFIG or DEFAULT_CONFIG), whether the group exists or not; other
broker ids or resource types -> INVALID_REQUEST. ``configuration_keys``
null or empty means every config; unknown keys are skipped. Synonyms only when
``include_synonyms``; documentation (v3+) only when ``include_documentation``; ``config_type`` v3+.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.describe_configs.v3.request import DescribeConfigsRequest as DescribeConfigsRequestV3
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest as DescribeConfigsRequestV4

from broker.apis.auth_helper import config_resource_error
from broker.apis.config_helper import (
    DescribedConfig,
    describe_broker_configs,
    describe_broker_default_configs,
    describe_group_configs,
    describe_topic_configs,
)
from broker.apis.context import BrokerContext
from broker.controller.metadata_image import RESOURCE_TYPE_BROKER, RESOURCE_TYPE_GROUP, RESOURCE_TYPE_TOPIC
from broker.errors import error_code_for, error_message_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    InvalidTopicError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    from broker.apis.kio_types import DescribeConfigsRequest, DescribeConfigsResponse

_DOCS_VERSIONS = (DescribeConfigsRequestV3, DescribeConfigsRequestV4)

__all__ = ["handle_describe_configs", "describe_configs_error_response", "describe_resource"]


def describe_resource(
    ctx: BrokerContext, resource_type: int, resource_name: str, keys: tuple[str, ...] | None
) -> list[DescribedConfig]:
    """The configs of one resource.

    Raises:
        UnknownTopicOrPartitionError: the topic does not exist.
        InvalidTopicError: empty topic name.
        InvalidRequestError: another broker's id, an empty group name, or an unsupported
            resource type.
    """
    if resource_type == RESOURCE_TYPE_TOPIC:
        if not resource_name:
            raise InvalidTopicError("Topic name can't be empty")
        if ctx.image.topic(resource_name) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{resource_name}' does not exist.")
        return describe_topic_configs(ctx.dynamic_config, ctx.image.topic_config(resource_name), keys)
    if resource_type == RESOURCE_TYPE_BROKER:
        if resource_name == "":
            return describe_broker_default_configs(ctx.dynamic_config, keys)
        if resource_name != str(ctx.node_id):
            raise InvalidRequestError(
                f"Unexpected broker id, expected {ctx.node_id} or empty string, but received {resource_name}"
            )
        return describe_broker_configs(ctx.dynamic_config, keys)
    if resource_type == RESOURCE_TYPE_GROUP:
        if not resource_name:
            raise InvalidRequestError("Group name must not be empty")
        overrides = ctx.image.resource_config(RESOURCE_TYPE_GROUP, resource_name)
        return describe_group_configs(overrides, ctx.config.values, keys)
    raise InvalidRequestError(f"Unsupported resource type {resource_type} for DescribeConfigs")


async def handle_describe_configs(
    ctx: BrokerContext, rctx: RequestContext, request: DescribeConfigsRequest
) -> DescribeConfigsResponse:
    """Handle a DescribeConfigsRequest (v1-v4); each resource needs DESCRIBE_CONFIGS
    (:func:`~broker.apis.auth_helper.config_resource_error`)."""
    cls = response_class(ApiKey.DESCRIBE_CONFIGS, rctx.api_version)
    result_cls = nested(cls, "DescribeConfigsResult")
    entry_cls = nested(cls, "DescribeConfigsResourceResult")
    synonym_cls = nested(cls, "DescribeConfigsSynonym")
    include_synonyms = bool(request.include_synonyms)
    # v3+ may ask for each config's documentation (KIP-569)
    include_docs = isinstance(request, _DOCS_VERSIONS) and bool(request.include_documentation)
    results = []
    for resource in request.resources:
        # null or empty = every config (Kafka's ConfigHelper.describeConfigs)
        keys = tuple(resource.configuration_keys) if resource.configuration_keys else None
        try:
            refused = config_resource_error(
                ctx, rctx, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name
            )
            if refused is not None:
                raise refused
            described = describe_resource(ctx, resource.resource_type, resource.resource_name, keys)
            code, message = ErrorCode.none, None
        except Exception as exc:  # noqa: BLE001 - one resource's error
            described = []
            code = error_code_for(
                exc, f"DescribeConfigs of {resource.resource_type}/{resource.resource_name}"
            )
            message = error_message_for(exc)
        entries = tuple(
            build(
                entry_cls,
                name=c.name,
                value=c.value,
                read_only=c.read_only,
                config_source=int(c.source),
                is_sensitive=c.is_sensitive,
                synonyms=tuple(synonym_cls(name=n, value=v, source=int(s)) for n, v, s in c.synonyms)
                if include_synonyms
                else (),
                config_type=int(c.config_type),
                documentation=c.documentation if include_docs else None,
            )
            for c in described
        )
        results.append(
            result_cls(
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=entries,
            )
        )
    return build(cls, throttle_time=ZERO_DURATION, results=tuple(results))


def describe_configs_error_response(
    request: DescribeConfigsRequest, version: int, code: ErrorCode
) -> DescribeConfigsResponse:
    """``code`` for every resource of ``request``."""
    cls = response_class(ApiKey.DESCRIBE_CONFIGS, version)
    result_cls = nested(cls, "DescribeConfigsResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        results=tuple(
            result_cls(
                error_code=code,
                error_message=None,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=(),
            )
            for r in request.resources
        ),
    )
