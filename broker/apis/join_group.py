"""JoinGroup (key 11), v0-9 (Kafka's ``KafkaApis.handleJoinGroupRequest``).

The request is parked until the rebalance's join phase completes (see
:mod:`broker.coordinator.group.group_coordinator`). v0 has no rebalance timeout (the session
timeout is used); v4+ requires a known member id (KIP-394: MEMBER_ID_REQUIRED); v5+ carries
``group_instance_id`` (KIP-345); v7+ answers the protocol type; v9 ``skip_assignment`` is
is set for a static leader that rejoined a Stable group without a rebalance (KIP-814).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.join_group.v0.request import JoinGroupRequest as JoinGroupRequestV0
from kio.schema.join_group.v5.request import JoinGroupRequest as JoinGroupRequestV5
from kio.schema.join_group.v6.request import JoinGroupRequest as JoinGroupRequestV6
from kio.schema.join_group.v7.request import JoinGroupRequest as JoinGroupRequestV7
from kio.schema.join_group.v8.request import JoinGroupRequest as JoinGroupRequestV8
from kio.schema.join_group.v9.request import JoinGroupRequest as JoinGroupRequestV9

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import await_callback, coordinator_of, to_ms
from broker.coordinator.group.classic_group import JoinResult
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import JoinGroupRequest, JoinGroupResponse

_INSTANCE_ID_VERSIONS = (
    JoinGroupRequestV5,
    JoinGroupRequestV6,
    JoinGroupRequestV7,
    JoinGroupRequestV8,
    JoinGroupRequestV9,
)

__all__ = ["handle_join_group", "join_group_error_response"]


def _response(version: int, result: JoinResult) -> JoinGroupResponse:
    cls = response_class(ApiKey.JOIN_GROUP, version)
    member_cls = nested(cls, "JoinGroupResponseMember")
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    members = result.members
    if result.skip_assignment and version < 9:
        members = []  # KIP-814: before v9 a rejoining static leader just gets no members to assign
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode(result.error),
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            build(member_cls, member_id=m, group_instance_id=i, metadata=data) for m, i, data in members
        ),
    )


async def handle_join_group(
    ctx: BrokerContext, rctx: RequestContext, request: JoinGroupRequest
) -> JoinGroupResponse:
    """Handle a JoinGroupRequest; needs READ on the group (else GROUP_AUTHORIZATION_FAILED)."""
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return join_group_error_response(request, rctx.api_version, ErrorCode.group_authorization_failed)
    version = rctx.api_version
    coordinator = coordinator_of(ctx)
    session_ms = to_ms(request.session_timeout)
    # v0 has no rebalance timeout (the session timeout serves); v5+ carries group_instance_id (KIP-345)
    rebalance_ms = session_ms if isinstance(request, JoinGroupRequestV0) else to_ms(request.rebalance_timeout)
    instance_id = request.group_instance_id if isinstance(request, _INSTANCE_ID_VERSIONS) else None
    protocols = [(p.name, bytes(p.metadata)) for p in request.protocols]
    result: JoinResult = await await_callback(
        lambda cb: coordinator.join.handle_join_group(
            request.group_id,
            request.member_id,
            instance_id,
            version >= 4,
            rctx.header.client_id or "",
            "/" + rctx.client_host,  # Java's InetAddress.toString(), as Kafka reports it
            rebalance_ms,
            session_ms,
            request.protocol_type,
            protocols,
            cb,
        )
    )
    return _response(version, result)


def join_group_error_response(request: JoinGroupRequest, version: int, code: ErrorCode) -> JoinGroupResponse:
    return _response(version, JoinResult(request.member_id, int(code)))
