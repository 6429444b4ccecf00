"""DeleteGroups (key 42), v0-2 (``KafkaApis.handleDeleteGroupsRequest``): only Empty groups
(NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND if unknown); tombstones for the group and its
offsets are written to ``__consumer_offsets`` before answering. A KIP-932 share group this broker
coordinates is deleted from the share group coordinator (and its share-partition state on this
broker)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.apis.auth_helper import authorized_names
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.coordinator.share.share_group_coordinator import TopicTable
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import DeleteGroupsRequest, DeleteGroupsResponse

__all__ = ["handle_delete_groups", "delete_groups_error_response"]


def _response(version: int, results: list[tuple[str, int]]) -> DeleteGroupsResponse:
    cls = response_class(ApiKey.DELETE_GROUPS, version)
    result_cls = nested(cls, "DeletableGroupResult")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        results=tuple(result_cls(group_id=g, error_code=ErrorCode(e)) for g, e in results),
    )


async def handle_delete_groups(
    ctx: BrokerContext, rctx: RequestContext, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    """Handle a DeleteGroupsRequest; each group needs DELETE (else GROUP_AUTHORIZATION_FAILED)."""
    names = list(dict.fromkeys(request.groups_names))
    allowed = authorized_names(ctx, rctx, AclOperation.DELETE, ResourceType.GROUP, names)
    coordinator = coordinator_of(ctx)
    shared = _delete_share_groups(ctx, coordinator, [g for g in names if g in allowed])
    errors = await coordinator.offsets.handle_delete_groups(
        [g for g in names if g in allowed and g not in shared]
    )
    errors.update(shared)
    errors.update((g, int(ErrorCode.group_authorization_failed)) for g in names if g not in allowed)
    return _response(rctx.api_version, [(g, errors[g]) for g in names])


def _delete_share_groups(ctx: BrokerContext, coordinator: Any, names: list[str]) -> dict[str, int]:
    """Share groups among ``names`` that this broker coordinates -> their DeleteGroups error."""
    service = ctx.share_service
    if service is None:
        return {}
    out: dict[str, int] = {}
    topics = TopicTable(ctx.image.topics)
    for group_id in names:
        if group_id not in service.groups.groups or coordinator.validate_group_status(group_id):
            continue
        code = service.groups.delete_group(group_id, topics)
        if code is not None:
            out[group_id] = code
            if code == 0:
                service.partitions.forget_group(group_id)
    return out


def delete_groups_error_response(
    request: DeleteGroupsRequest, version: int, code: ErrorCode
) -> DeleteGroupsResponse:
    return _response(version, [(g, int(code)) for g in request.groups_names])
