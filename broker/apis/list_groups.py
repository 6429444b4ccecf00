"""ListGroups (key 16), v0-5 (``KafkaApis.handleListGroupsRequest``): the groups this broker
coordinates. v4+ ``states_filter`` (KIP-518, case-insensitive), v5+ ``types_filter`` (KIP-848:
``classic``, ``consumer`` or KIP-932's ``share``, case-insensitive). Share groups are listed
with protocol type and group type ``share``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.list_groups.v4.request import ListGroupsRequest as ListGroupsRequestV4
from kio.schema.list_groups.v5.request import ListGroupsRequest as ListGroupsRequestV5

from broker.apis.auth_helper import authorize_cluster, authorized_names
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ListGroupsRequest, ListGroupsResponse

_STATES_VERSIONS = (ListGroupsRequestV4, ListGroupsRequestV5)

__all__ = ["handle_list_groups", "list_groups_error_response"]


async def handle_list_groups(
    ctx: BrokerContext, rctx: RequestContext, request: ListGroupsRequest
) -> ListGroupsResponse:
    """Handle a ListGroupsRequest: DESCRIBE on the cluster lists every group, else only the
    groups the principal may DESCRIBE (never an authorization error)."""
    cls = response_class(ApiKey.LIST_GROUPS, rctx.api_version)
    listed_cls = nested(cls, "ListedGroup")
    # v4+ filters by state (KIP-518), v5+ by group type (KIP-848)
    states = set(request.states_filter) or None if isinstance(request, _STATES_VERSIONS) else None
    types = {t.lower() for t in request.types_filter} if isinstance(request, ListGroupsRequestV5) else set()
    coordinator = coordinator_of(ctx)
    error, groups = coordinator.offsets.handle_list_groups(states)
    groups = list(groups) + _share_groups(ctx, coordinator, states)
    if types:
        groups = [entry for entry in groups if entry[3] in types]
    if not authorize_cluster(ctx, rctx, AclOperation.DESCRIBE):
        visible = authorized_names(
            ctx, rctx, AclOperation.DESCRIBE, ResourceType.GROUP, [entry[0] for entry in groups]
        )
        groups = [entry for entry in groups if entry[0] in visible]
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode(error),
        groups=tuple(
            build(listed_cls, group_id=g, protocol_type=pt, group_state=state, group_type=group_type)
            for g, pt, state, group_type in groups
        ),
    )


def _share_groups(
    ctx: BrokerContext, coordinator: Any, states: set[str] | None
) -> list[tuple[str, str, str, str]]:
    """The share groups this broker coordinates as ListGroups entries (KIP-932)."""
    service = ctx.share_service
    if service is None:
        return []
    wanted = None if states is None else {s.lower() for s in states}
    return [
        (group_id, "share", group.state, "share")
        for group_id, group in service.groups.groups.items()
        if coordinator.validate_group_status(group_id) == 0
        and (wanted is None or group.state.lower() in wanted)
    ]


def list_groups_error_response(
    request: ListGroupsRequest, version: int, code: ErrorCode
) -> ListGroupsResponse:
    return build(
        response_class(ApiKey.LIST_GROUPS, version), throttle_time=ZERO_DURATION, error_code=code, groups=()
    )
