"""ConsumerGroupHeartbeat (key 68), v0-1 (KIP-848; Kafka's ``KafkaApis.handleConsumerGroupHeartbeat``
and ``GroupMetadataManager.consumerGroupHeartbeat``): join, heartbeat, reconcile and leave a
consumer group whose assignment the broker computes. The rules live in
:mod:`broker.coordinator.group.consumer_group_coordinator`; this module maps the request and
response. v1 (KIP-1082) has the client generate the member id; v0 is served the same way (a
v0 client without a member id gets one from the coordinator).

Needs READ on the group (GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic
name (TOPIC_AUTHORIZATION_FAILED), as Kafka. The session timeout and heartbeat interval are
the group's ``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` (GROUP config
resource, else the broker's ``group.consumer.*``).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest as RequestV1

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.apis.group_heartbeat_helper import heartbeat_response
from broker.controller.group_configs import group_config
from broker.coordinator.group.api_support import coordinator_of, to_ms
from broker.coordinator.group.consumer_group_coordinator import HeartbeatRequest, HeartbeatResult
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

__all__ = ["handle_consumer_group_heartbeat", "consumer_group_heartbeat_error_response"]


def _response(version: int, result: HeartbeatResult) -> ConsumerGroupHeartbeatResponse:
    return heartbeat_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, result)


async def handle_consumer_group_heartbeat(
    ctx: BrokerContext, rctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    """Handle a ConsumerGroupHeartbeatRequest (see the module docstring)."""
    version = rctx.api_version
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return consumer_group_heartbeat_error_response(request, version, ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names
    if names:
        readable = authorized_names(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, list(names))
        if len(readable) != len(set(names)):
            return _response(
                version,
                HeartbeatResult(
                    int(ErrorCode.topic_authorization_failed),
                    f"Topic authorization failed for {sorted(set(names) - set(readable))}",
                ),
            )
    image = ctx.image
    configs = group_config(image, request.group_id, ctx.config.values)
    member_id = request.member_id or (str(uuid.uuid4()) if version == 0 and request.member_epoch == 0 else "")
    owned = (
        None
        if request.topic_partitions is None
        else [
            (tp.topic_id, [int(p) for p in tp.partitions])
            for tp in request.topic_partitions
            if tp.topic_id is not None
        ]
    )
    result = await coordinator_of(ctx).consumer.heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=member_id,
            member_epoch=int(request.member_epoch),
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=to_ms(request.rebalance_timeout),
            subscribed_topic_names=None if names is None else tuple(names),
            subscribed_topic_regex=request.subscribed_topic_regex if isinstance(request, RequestV1) else None,
            server_assignor=request.server_assignor,
            owned=owned,
            client_id=rctx.header.client_id or "",
            client_host="/" + rctx.client_host,
            session_timeout_ms=configs.consumer_session_timeout_ms,
            heartbeat_interval_ms=configs.consumer_heartbeat_interval_ms,
        ),
        image.topics,
    )
    return _response(version, result)


def consumer_group_heartbeat_error_response(
    request: ConsumerGroupHeartbeatRequest, version: int, code: ErrorCode
) -> ConsumerGroupHeartbeatResponse:
    return _response(version, HeartbeatResult(int(code)))
