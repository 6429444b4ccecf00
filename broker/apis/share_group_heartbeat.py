"""ShareGroupHeartbeat (key 76), v1 (KIP-932; Kafka's ``KafkaApis.handleShareGroupHeartbeat`` and
``GroupMetadataManager.shareGroupHeartbeat``): join (member epoch 0), heartbeat and leave (-1)
a share group; the broker assigns the partitions (``broker.coordinator.share.share_group_coordinator``).

Served by the group's coordinator (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS otherwise,
as for every group). A group id held by a classic or consumer group answers
GROUP_ID_NOT_FOUND. Needs READ on the group and DESCRIBE on the subscribed topics. The session
timeout and heartbeat interval are the group's ``share.session.timeout.ms`` /
``share.heartbeat.interval.ms`` (else the broker's ``group.share.*``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.apis.group_heartbeat_helper import heartbeat_response
from broker.controller.group_configs import group_config
from broker.coordinator.group.api_support import coordinator_of
from broker.coordinator.share.service import share_service_for
from broker.coordinator.share.share_group_coordinator import ShareHeartbeatResult, TopicTable
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ShareGroupHeartbeatRequest as ShareGroupHeartbeatRequestAlias
    from broker.apis.kio_types import ShareGroupHeartbeatResponse

__all__ = ["handle_share_group_heartbeat", "share_group_heartbeat_error_response"]


def _response(version: int, result: ShareHeartbeatResult) -> Any:
    return heartbeat_response(ApiKey.SHARE_GROUP_HEARTBEAT, version, result)


async def handle_share_group_heartbeat(
    ctx: BrokerContext, rctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    """Handle a ShareGroupHeartbeatRequest (see the module docstring)."""
    version = rctx.api_version
    group_id = request.group_id
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return share_group_heartbeat_error_response(request, version, ErrorCode.group_authorization_failed)
    names = request.subscribed_topic_names
    if names:
        readable = authorized_names(ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, list(names))
        if len(readable) != len(set(names)):
            return share_group_heartbeat_error_response(
                request, version, ErrorCode.topic_authorization_failed
            )
    coordinator = coordinator_of(ctx)
    error = coordinator.validate_group_status(group_id)
    if error:
        return _response(version, ShareHeartbeatResult(error))
    holder = coordinator.manager.get_or_create_group(group_id, create=False)
    if holder is not None and (holder.members or holder.consumer is not None):
        return _response(
            version,
            ShareHeartbeatResult(
                int(ErrorCode.group_id_not_found), f"Group {group_id} is not a share group."
            ),
        )
    image = ctx.image
    configs = group_config(image, group_id, ctx.config.values)
    groups = share_service_for(ctx).groups
    groups.session_timeout_ms = configs.share_session_timeout_ms
    groups.heartbeat_interval_ms = configs.share_heartbeat_interval_ms
    result = groups.heartbeat(
        group_id,
        request.member_id,
        int(request.member_epoch),
        None if names is None else tuple(names),
        TopicTable(image.topics),
        rack_id=request.rack_id,
        client_id=rctx.header.client_id or "",
        client_host="/" + rctx.client_host,
    )
    return _response(version, result)


def share_group_heartbeat_error_response(
    request: ShareGroupHeartbeatRequestAlias, version: int, code: ErrorCode
) -> ShareGroupHeartbeatResponse:
    return _response(version, ShareHeartbeatResult(int(code)))
