"""SyncGroup (key 14), v0-5 (Kafka's ``KafkaApis.handleSyncGroupRequest``).

The leader's assignments are stored in ``__consumer_offsets`` before every member's parked
SyncGroup is answered with its own assignment. v5 checks ProtocolType / ProtocolName
(INCONSISTENT_GROUP_PROTOCOL) and echoes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.sync_group.v3.request import SyncGroupRequest as SyncGroupRequestV3
from kio.schema.sync_group.v4.request import SyncGroupRequest as SyncGroupRequestV4
from kio.schema.sync_group.v5.request import SyncGroupRequest as SyncGroupRequestV5

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import await_callback, coordinator_of
from broker.coordinator.group.classic_group import SyncResult
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build
from spark_kafkalite.protocol.errors import ErrorCode

_INSTANCE_ID_VERSIONS = (SyncGroupRequestV3, SyncGroupRequestV4, SyncGroupRequestV5)
"""SyncGroup v3+ carries ``group_instance_id`` (KIP-345); v5+ the protocol type and name (KIP-559)."""

if TYPE_CHECKING:
    from broker.apis.kio_types import SyncGroupRequest, SyncGroupResponse

__all__ = ["handle_sync_group", "sync_group_error_response"]


def _response(version: int, result: SyncResult) -> SyncGroupResponse:
    return build(
        response_class(ApiKey.SYNC_GROUP, version),
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode(result.error),
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle_sync_group(
    ctx: BrokerContext, rctx: RequestContext, request: SyncGroupRequest
) -> SyncGroupResponse:
    """Handle a SyncGroupRequest; needs READ on the group (else GROUP_AUTHORIZATION_FAILED)."""
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return sync_group_error_response(request, rctx.api_version, ErrorCode.group_authorization_failed)
    coordinator = coordinator_of(ctx)
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    result: SyncResult = await await_callback(
        lambda cb: coordinator.handle_sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.protocol_type if isinstance(request, SyncGroupRequestV5) else None,
            request.protocol_name if isinstance(request, SyncGroupRequestV5) else None,
            request.group_instance_id if isinstance(request, _INSTANCE_ID_VERSIONS) else None,
            assignments,
            cb,
        )
    )
    return _response(rctx.api_version, result)


def sync_group_error_response(request: SyncGroupRequest, version: int, code: ErrorCode) -> SyncGroupResponse:
    return _response(version, SyncResult(int(code)))
