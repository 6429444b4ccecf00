"""DescribeGroups (key 15), v0-5 (``KafkaApis.handleDescribeGroupsRequest``).

A group unknown here is described as state ``Dead`` with no error (as Kafka's classic
coordinator); member metadata and assignments are filled only for a Stable group. v3+: when the
request sets ``include_authorized_operations`` (KIP-430), each group described without error
carries the bitfield of the operations the principal may perform on it; otherwise INT32_MIN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.describe_groups.v3.request import DescribeGroupsRequest as DescribeGroupsRequestV3
from kio.schema.describe_groups.v4.request import DescribeGroupsRequest as DescribeGroupsRequestV4
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsRequestV5

from broker.apis.auth_helper import authorize, authorized_operations
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import INT32_MIN, coordinator_of
from broker.coordinator.group.group_offset_manager import GroupSummary
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import DescribeGroupsRequest, DescribeGroupsResponse

_OPERATIONS_VERSIONS = (DescribeGroupsRequestV3, DescribeGroupsRequestV4, DescribeGroupsRequestV5)

__all__ = ["handle_describe_groups", "describe_groups_error_response"]

_NOTHING = GroupSummary("", "", "", ())


async def handle_describe_groups(
    ctx: BrokerContext, rctx: RequestContext, request: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    """Handle a DescribeGroupsRequest; each group needs DESCRIBE (else GROUP_AUTHORIZATION_FAILED)."""
    cls = response_class(ApiKey.DESCRIBE_GROUPS, rctx.api_version)
    group_cls = nested(cls, "DescribedGroup")
    member_cls = nested(cls, "DescribedGroupMember")
    coordinator = coordinator_of(ctx)
    # v3+ may ask for the principal's authorized operations (KIP-430)
    with_operations = isinstance(request, _OPERATIONS_VERSIONS) and bool(
        request.include_authorized_operations
    )
    described = []
    for group_id in request.groups:
        if authorize(ctx, rctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error, summary = coordinator.offsets.handle_describe_group(group_id)
        else:
            error, summary = int(ErrorCode.group_authorization_failed), _NOTHING
        described.append(
            build(
                group_cls,
                error_code=ErrorCode(error),
                group_id=group_id,
                group_state=summary.state if not error else "",
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=tuple(
                    build(
                        member_cls,
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in summary.members
                ),
                authorized_operations=(
                    authorized_operations(ctx, rctx, ResourceType.GROUP, group_id)
                    if with_operations and not error
                    else INT32_MIN
                ),
            )
        )
    return build(cls, throttle_time=ZERO_DURATION, groups=tuple(described))


def describe_groups_error_response(
    request: DescribeGroupsRequest, version: int, code: ErrorCode
) -> DescribeGroupsResponse:
    cls = response_class(ApiKey.DESCRIBE_GROUPS, version)
    group_cls = nested(cls, "DescribedGroup")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        groups=tuple(
            build(
                group_cls,
                error_code=code,
                group_id=g,
                group_state="",
                protocol_type="",
                protocol_data="",
                members=(),
                authorized_operations=INT32_MIN,
            )
            for g in request.groups
        ),
    )
