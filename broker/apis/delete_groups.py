"""DeleteGroups (key 42), v0-2 (``KafkaApis.handleDeleteGroupsRequest``): only Empty groups
(NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND if unknown); tombstones for the group and its
offsets are written to ``__consumer_offsets`` before answering."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorized_names
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
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
    errors = await coordinator_of(ctx).offsets.handle_delete_groups([g for g in names if g in allowed])
    errors.update((g, int(ErrorCode.group_authorization_failed)) for g in names if g not in allowed)
    return _response(rctx.api_version, [(g, errors[g]) for g in names])


def delete_groups_error_response(
    request: DeleteGroupsRequest, version: int, code: ErrorCode
) -> DeleteGroupsResponse:
    return _response(version, [(g, int(code)) for g in request.groups_names])
