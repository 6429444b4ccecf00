"""LeaveGroup (key 13), v0-5 (Kafka's ``KafkaApis.handleLeaveGroupRequest``).

v0-2: one ``member_id``, its error is the response's error. v3+: a batch of
``{member_id, group_instance_id}`` (KIP-345; an empty member id with an instance id removes that
static member), per-member errors plus the top-level (group) error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.leave_group.v3.request import LeaveGroupRequest as LeaveGroupRequestV3
from kio.schema.leave_group.v4.request import LeaveGroupRequest as LeaveGroupRequestV4
from kio.schema.leave_group.v5.request import LeaveGroupRequest as LeaveGroupRequestV5

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import LeaveGroupRequest, LeaveGroupResponse

_BATCHED_VERSIONS = (LeaveGroupRequestV3, LeaveGroupRequestV4, LeaveGroupRequestV5)

__all__ = ["handle_leave_group", "leave_group_error_response"]


async def handle_leave_group(
    ctx: BrokerContext, rctx: RequestContext, request: LeaveGroupRequest
) -> LeaveGroupResponse:
    """Handle a LeaveGroupRequest; needs READ on the group (else GROUP_AUTHORIZATION_FAILED)."""
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return leave_group_error_response(request, rctx.api_version, ErrorCode.group_authorization_failed)
    version = rctx.api_version
    cls = response_class(ApiKey.LEAVE_GROUP, version)
    if isinstance(request, _BATCHED_VERSIONS):  # v3+: many members, static ones by instance id (KIP-345)
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        members = [(request.member_id, None)]
    error, results = coordinator_of(ctx).handle_leave_group(request.group_id, members)
    if version < 3:
        if not error and results:
            error = results[0][2]
        return build(cls, throttle_time=ZERO_DURATION, error_code=ErrorCode(error))
    member_cls = nested(cls, "MemberResponse")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode(error),
        members=tuple(
            member_cls(member_id=m, group_instance_id=i, error_code=ErrorCode(e)) for m, i, e in results
        ),
    )


def leave_group_error_response(
    request: LeaveGroupRequest, version: int, code: ErrorCode
) -> LeaveGroupResponse:
    return build(
        response_class(ApiKey.LEAVE_GROUP, version), throttle_time=ZERO_DURATION, error_code=code, members=()
    )
