"""CreateTopics (key 19), v2-v7 (``ControllerApis.createTopics``).

num_partitions / replication_factor -1 use ``num.partitions`` / ``default.replication.factor``;
explicit assignments are accepted when they name registered brokers. ``validate_only`` checks
without creating. v5+ results carry the partition count, replication factor and the topic's
configs (KIP-525, as DescribeConfigs describes them); v7 the topic id. Per-topic ``configs``
become the topic's overrides (validated by :mod:`broker.controller.topic_configs`,
``INVALID_CONFIG`` naming the key) and drive its logs' ``LogConfig``. Authorization: CREATE on
the cluster, else CREATE on each topic (``TOPIC_AUTHORIZATION_FAILED`` for the others).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize_cluster, authorized_names
from broker.apis.config_helper import describe_topic_configs
from broker.apis.context import BrokerContext
from broker.controller.controller import CreatableTopicSpec, CreateTopicOutcome
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, has_field, nested
from spark_kafkalite.protocol.errors import ErrorCode, TopicAuthorizationFailedError

if TYPE_CHECKING:
    from broker.apis.kio_types import CreateTopicsRequest, CreateTopicsResponse

__all__ = ["handle_create_topics", "create_topics_error_response"]


def _specs(request: CreateTopicsRequest, allowed: Collection[str]) -> list[CreatableTopicSpec]:
    """The controller's spec of each requested topic in ``allowed``."""
    return [
        CreatableTopicSpec(
            name=topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            assignments={a.partition_index: tuple(a.broker_ids) for a in topic.assignments},
            configs={c.name: c.value for c in topic.configs},
        )
        for topic in request.topics
        if topic.name in allowed
    ]


async def handle_create_topics(
    ctx: BrokerContext, rctx: RequestContext, request: CreateTopicsRequest
) -> CreateTopicsResponse:
    """Handle a CreateTopicsRequest."""
    cls = response_class(ApiKey.CREATE_TOPICS, rctx.api_version)
    result_cls = nested(cls, "CreatableTopicResult")
    config_cls = nested(cls, "CreatableTopicConfigs") if has_field(result_cls, "configs") else None
    names = [t.name for t in request.topics]
    allowed = (
        set(names)
        if authorize_cluster(ctx, rctx, AclOperation.CREATE)
        else authorized_names(ctx, rctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    )
    created = iter(await ctx.controller.create_topics(_specs(request, allowed), bool(request.validate_only)))
    await ctx.metadata_publish_queue.applied()  # the new partitions led here are served now
    outcomes = [
        next(created)
        if t.name in allowed
        else CreateTopicOutcome(t.name, TopicAuthorizationFailedError("Authorization failed."))
        for t in request.topics
    ]
    results = []
    for outcome in outcomes:
        if outcome.error is None:
            configs = ()
            if config_cls is not None:
                configs = tuple(
                    config_cls(
                        name=c.name,
                        value=c.value,
                        read_only=c.read_only,
                        config_source=int(c.source),
                        is_sensitive=c.is_sensitive,
                    )
                    for c in describe_topic_configs(ctx.dynamic_config, outcome.configs)
                )
            results.append(
                build(
                    result_cls,
                    name=outcome.name,
                    topic_id=outcome.topic_id,
                    error_code=ErrorCode.none,
                    error_message=None,
                    num_partitions=outcome.num_partitions,
                    replication_factor=outcome.replication_factor,
                    configs=configs,
                )
            )
        else:
            results.append(
                build(
                    result_cls,
                    name=outcome.name,
                    topic_id=None,
                    error_code=ErrorCode(outcome.error.error_code),
                    error_message=outcome.error.message,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
            )
    return build(cls, throttle_time=ZERO_DURATION, topics=tuple(results))


def create_topics_error_response(
    request: CreateTopicsRequest, version: int, code: ErrorCode
) -> CreateTopicsResponse:
    cls = response_class(ApiKey.CREATE_TOPICS, version)
    result_cls = nested(cls, "CreatableTopicResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        topics=tuple(
            build(
                result_cls,
                name=t.name,
                topic_id=None,
                error_code=code,
                error_message=None,
                num_partitions=-1,
                replication_factor=-1,
                configs=None,
            )
            for t in request.topics
        ),
    )
