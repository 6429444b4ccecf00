"""Heartbeat (key 12), v0-4 (Kafka's ``KafkaApis.handleHeartbeatRequest``): resets the
member's session timer; REBALANCE_IN_PROGRESS tells it to rejoin; ILLEGAL_GENERATION /
UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID for stale members."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.heartbeat.v3.request import HeartbeatRequest as HeartbeatRequestV3
from kio.schema.heartbeat.v4.request import HeartbeatRequest as HeartbeatRequestV4

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import HeartbeatRequest, HeartbeatResponse

__all__ = ["handle_heartbeat", "heartbeat_error_response"]


async def handle_heartbeat(
    ctx: BrokerContext, rctx: RequestContext, request: HeartbeatRequest
) -> HeartbeatResponse:
    """Handle a HeartbeatRequest; needs READ on the group (else GROUP_AUTHORIZATION_FAILED)."""
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return heartbeat_error_response(request, rctx.api_version, ErrorCode.group_authorization_failed)
    error = coordinator_of(ctx).handle_heartbeat(
        request.group_id,
        request.member_id,
        # v3+ carries group_instance_id (KIP-345)
        request.group_instance_id if isinstance(request, HeartbeatRequestV3 | HeartbeatRequestV4) else None,
        request.generation_id,
    )
    return heartbeat_error_response(request, rctx.api_version, ErrorCode(error))


def heartbeat_error_response(request: HeartbeatRequest, version: int, code: ErrorCode) -> HeartbeatResponse:
    return build(response_class(ApiKey.HEARTBEAT, version), throttle_time=ZERO_DURATION, error_code=code)
