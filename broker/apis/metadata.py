"""Metadata (key 3), v0-v12 (``KafkaApis.handleTopicMetadataRequest``).

* Topics: v0 empty list = all topics; v1+ null = all, empty = none; v10+ topics may be named by
  id (name null) -> ``UNKNOWN_TOPIC_ID`` when unknown.
* Unknown topics: ``UNKNOWN_TOPIC_OR_PARTITION``, or, when ``auto.create.topics.enable`` and the
  request allows it (v4+ ``AllowAutoTopicCreation``; always for v0-v3), the topic is created
  with the broker defaults and this first response says ``LEADER_NOT_AVAILABLE`` (as Kafka's
  ``AutoTopicCreationManager`` does). Illegal names: ``INVALID_TOPIC_EXCEPTION``.
* Brokers: the live (registered, unfenced) brokers' endpoints of the listener the request arrived
  on; cluster id (v2+); controller id (v1+: the active controller); topic ids (v10+); leader
  epochs (v7+); offline replicas (v5+: replicas on fenced or unregistered brokers). A partition
  without a leader has leader -1 and ``LEADER_NOT_AVAILABLE``.
* Authorization: each topic needs DESCRIBE. All-topics requests leave the others out; named
  topics answer ``TOPIC_AUTHORIZATION_FAILED`` with the zero topic id whether they exist or not
  (by id: with the id). Auto-creation also needs CREATE on the cluster or on the topic, else
  ``TOPIC_AUTHORIZATION_FAILED``.
* KIP-430 (v8+): when the request sets ``include_topic_authorized_operations``, each topic entry
  other than an authorization failure or an unknown topic id carries the bitfield of the
  operations the principal may perform on it; ``include_cluster_authorized_operations`` (v8-v10)
  fills the cluster's (0 without DESCRIBE on the cluster). Otherwise both stay INT32_MIN.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.metadata.v0.request import MetadataRequest as MetadataRequestV0
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v2.request import MetadataRequest as MetadataRequestV2
from kio.schema.metadata.v3.request import MetadataRequest as MetadataRequestV3
from kio.schema.metadata.v8.request import MetadataRequest as MetadataRequestV8
from kio.schema.metadata.v9.request import MetadataRequest as MetadataRequestV9
from kio.schema.metadata.v10.request import MetadataRequest as MetadataRequestV10
from kio.schema.metadata.v10.request import MetadataRequestTopic as TopicV10
from kio.schema.metadata.v11.request import MetadataRequest as MetadataRequestV11
from kio.schema.metadata.v11.request import MetadataRequestTopic as TopicV11
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as TopicV12

from broker.apis.auth_helper import (
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
    cluster_authorized_operations,
)
from broker.apis.context import BrokerContext
from broker.apis.metadata_cache import NO_AUTHORIZED_OPERATIONS
from broker.controller.controller import CreatableTopicSpec
from broker.controller.replication_control import validate_topic_name
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.internal_topics import GROUP_METADATA_TOPIC_NAME
from spark_kafkalite.protocol.metadata_response import (
    MetadataResponseParts,
    encode_struct,
    with_topic_authorized_operations,
)

if TYPE_CHECKING:
    from broker.apis.kio_types import MetadataRequest, MetadataResponse

_NO_AUTO_CREATE_FLAG = (MetadataRequestV0, MetadataRequestV1, MetadataRequestV2, MetadataRequestV3)
_OPERATIONS_VERSIONS = (
    MetadataRequestV8,
    MetadataRequestV9,
    MetadataRequestV10,
    MetadataRequestV11,
    MetadataRequestV12,
)
_CLUSTER_OPERATIONS_VERSIONS = (MetadataRequestV8, MetadataRequestV9, MetadataRequestV10)
_TOPIC_ID_TOPICS = (TopicV10, TopicV11, TopicV12)

__all__ = ["handle_metadata", "metadata_error_response"]

logger = logging.getLogger(__name__)

_ZERO_UUID = uuid.UUID(int=0)


def _brokers(ctx: BrokerContext, cls: type[Any], listener_name: str) -> tuple[Any, ...]:
    broker_cls = nested(cls, "MetadataResponseBroker")
    out = []
    for node_id in sorted(ctx.image.brokers):
        registration = ctx.image.brokers[node_id]
        if registration.fenced:  # only live brokers are listed (KRaft's MetadataCache)
            continue
        endpoint = registration.endpoints.get(listener_name)
        if endpoint is None:
            continue
        out.append(
            build(broker_cls, node_id=node_id, host=endpoint[0], port=endpoint[1], rack=registration.rack)
        )
    return tuple(out)


def _error_topic(cls: type[Any], name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None) -> Any:
    topic_cls = nested(cls, "MetadataResponseTopic")
    if name is None and topic_cls.__version__ < 12:  # the name is nullable in responses from v12 only
        name = ""
    return build(
        topic_cls,
        error_code=code,
        name=name,
        topic_id=topic_id or _ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=NO_AUTHORIZED_OPERATIONS,
    )


def _error_entry(
    cls: type[Any], name: str | None, code: ErrorCode, topic_id: uuid.UUID | None = None
) -> bytes:
    return encode_struct(_error_topic(cls, name, code, topic_id))


def _requested(request: MetadataRequest, version: int) -> list[tuple[str | None, uuid.UUID | None]] | None:
    """The requested (name, id) pairs, or None for all topics."""
    topics = request.topics
    if topics is None or (version == 0 and not topics):
        return None
    out: list[tuple[str | None, uuid.UUID | None]] = []
    for t in topics:
        topic_id = t.topic_id if isinstance(t, _TOPIC_ID_TOPICS) else None  # v10+ (KIP-516)
        if topic_id == _ZERO_UUID:
            topic_id = None
        out.append((t.name, topic_id))
    return out


async def handle_metadata(
    ctx: BrokerContext, rctx: RequestContext, request: MetadataRequest
) -> MetadataResponseParts:
    """Handle a MetadataRequest (may auto-create topics). Topic entries come encoded from the
    broker's :class:`~broker.apis.metadata_cache.MetadataResponseCache`."""
    version = rctx.api_version
    cls = response_class(ApiKey.METADATA, version)
    requested = _requested(request, version)
    # v4+ may refuse auto-creation (KIP-204); before, a request always allows it
    allow_auto_create = (
        isinstance(request, _NO_AUTO_CREATE_FLAG) or request.allow_auto_topic_creation
    ) and ctx.config.auto_create_topics_enable
    cache = ctx.metadata_cache
    # v8+ may ask for the authorized operations of each topic (KIP-430); v8-10 of the cluster
    with_operations = (
        isinstance(request, _OPERATIONS_VERSIONS) and request.include_topic_authorized_operations
    )
    flexible = bool(nested(cls, "MetadataResponseTopic").__flexible__)

    def described(entry: bytes, name: str) -> bytes:
        """``entry`` with the topic's authorized operations when the request asks for them."""
        if not with_operations:
            return entry
        operations = authorized_operations(ctx, rctx, ResourceType.TOPIC, name)
        return with_topic_authorized_operations(entry, flexible, operations)

    topics_out: list[bytes] = []
    if requested is None:
        image = ctx.image
        visible = authorized_names(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, image.topics)
        if with_operations:
            topics_out = [
                described(cache.topic_bytes(cls, image.topics[n], image), n) for n in sorted(visible)
            ]
        else:
            topics_out = cache.all_topics(cls, image, visible)
    else:
        to_create: list[str] = []
        seen: set[str] = set()
        may_create_any = ctx.authorizer is None or authorize_cluster(ctx, rctx, AclOperation.CREATE)
        for name, topic_id in requested:
            if name is None:
                topic = ctx.image.topic_by_id(topic_id) if topic_id is not None else None
                if topic is None:
                    code = ErrorCode.unknown_topic_id if topic_id is not None else ErrorCode.invalid_request
                    topics_out.append(_error_entry(cls, None, code, topic_id))
                elif not authorize(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
                    topics_out.append(_error_entry(cls, None, ErrorCode.topic_authorization_failed, topic_id))
                else:
                    topics_out.append(described(cache.topic_bytes(cls, topic, ctx.image), topic.name))
                continue
            if name in seen:
                continue
            seen.add(name)
            topic = ctx.image.topic(name)
            if not authorize(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                topics_out.append(_error_entry(cls, name, ErrorCode.topic_authorization_failed))
            elif topic is not None:
                topics_out.append(described(cache.topic_bytes(cls, topic, ctx.image), name))
            elif validate_topic_name(name) is not None:
                topics_out.append(described(_error_entry(cls, name, ErrorCode.invalid_topic_exception), name))
            elif (name == GROUP_METADATA_TOPIC_NAME or allow_auto_create) and not (
                may_create_any or authorize(ctx, rctx, AclOperation.CREATE, ResourceType.TOPIC, name)
            ):
                topics_out.append(_error_entry(cls, name, ErrorCode.topic_authorization_failed))
            elif name == GROUP_METADATA_TOPIC_NAME and ctx.group_coordinator_service is not None:
                # The internal topic gets its own partitions/RF/compaction (Kafka's AutoTopicCreationManager).
                await ctx.group_coordinator_service.ensure_offsets_topic()
                topics_out.append(described(_error_entry(cls, name, ErrorCode.leader_not_available), name))
            elif allow_auto_create:
                to_create.append(name)
            else:
                topics_out.append(
                    described(_error_entry(cls, name, ErrorCode.unknown_topic_or_partition), name)
                )
        if to_create:
            outcomes = await ctx.controller.create_topics([CreatableTopicSpec(name) for name in to_create])
            for outcome in outcomes:
                if outcome.error is None or outcome.error.error_code in (
                    ErrorCode.topic_already_exists,
                    ErrorCode.not_controller,  # the quorum is electing: retriable for the client
                ):
                    code = ErrorCode.leader_not_available
                    logger.info("auto-created topic %s (%d partitions)", outcome.name, outcome.num_partitions)
                else:
                    code = ErrorCode(outcome.error.error_code)
                topics_out.append(described(_error_entry(cls, outcome.name, code), outcome.name))
    head = build(
        cls,
        throttle_time=ZERO_DURATION,
        brokers=_brokers(ctx, cls, rctx.listener_name),
        cluster_id=ctx.image.cluster_id,
        controller_id=ctx.controller.controller_id,
        topics=(),
        cluster_authorized_operations=(
            cluster_authorized_operations(ctx, rctx)
            if isinstance(request, _CLUSTER_OPERATIONS_VERSIONS)
            and request.include_cluster_authorized_operations
            else NO_AUTHORIZED_OPERATIONS
        ),
    )
    return MetadataResponseParts(head, topics_out)


def metadata_error_response(request: MetadataRequest, version: int, code: ErrorCode) -> MetadataResponse:
    """No brokers, and ``code`` for every requested topic."""
    cls = response_class(ApiKey.METADATA, version)
    topics = tuple(
        _error_topic(cls, t.name, code, t.topic_id if isinstance(t, _TOPIC_ID_TOPICS) else None)
        for t in (request.topics or ())
    )
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        brokers=(),
        cluster_id=None,
        controller_id=-1,
        topics=topics,
        cluster_authorized_operations=NO_AUTHORIZED_OPERATIONS,
    )
