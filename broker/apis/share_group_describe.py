"""ShareGroupDescribe (key 77), v1 (KIP-932; Kafka's ``KafkaApis.handleShareGroupDescribe``):
each share group's state, epochs, assignor and members with their subscriptions and assigned
partitions. A group this coordinator does not hold as a share group answers GROUP_ID_NOT_FOUND;
DESCRIBE on the group is needed (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.coordinator.share.service import share_service_for
from broker.coordinator.share.share_group_coordinator import ShareGroup
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ShareGroupDescribeRequest as ShareGroupDescribeRequestAlias
    from broker.apis.kio_types import ShareGroupDescribeResponse

__all__ = ["handle_share_group_describe", "share_group_describe_error_response"]

#: ``authorized_operations`` when not asked for (Kafka's Integer.MIN_VALUE)
_NOT_ASKED = -(2**31)


def _group_entry(cls: type[Any], group_id: str, code: int, group: ShareGroup | None, names: Any) -> Any:
    group_cls = nested(cls, "DescribedGroup")
    if group is None:
        return build(
            group_cls,
            error_code=ErrorCode(code),
            error_message=None if code == 0 else f"Group {group_id} not found.",
            group_id=group_id,
            group_state="Dead",
            group_epoch=-1,
            assignment_epoch=-1,
            assignor_name="",
            members=(),
            authorized_operations=_NOT_ASKED,
        )
    member_cls = nested(cls, "Member")
    assignment_cls = nested(cls, "Assignment")
    tp_cls = nested(cls, "TopicPartitions")
    members = tuple(
        build(
            member_cls,
            member_id=m.member_id,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names,
            assignment=assignment_cls(
                topic_partitions=tuple(
                    tp_cls(topic_id=tid, topic_name=names.get(tid, ""), partitions=tuple(sorted(parts)))
                    for tid, parts in sorted(m.assignment.items(), key=lambda kv: str(kv[0]))
                    if parts
                )
            ),
        )
        for m in group.members.values()
    )
    return build(
        group_cls,
        error_code=ErrorCode.none,
        error_message=None,
        group_id=group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name="simple",
        members=members,
        authorized_operations=_NOT_ASKED,
    )


async def handle_share_group_describe(
    ctx: BrokerContext, rctx: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    """Handle a ShareGroupDescribeRequest (see the module docstring)."""
    cls = response_class(ApiKey.SHARE_GROUP_DESCRIBE, rctx.api_version)
    coordinator = coordinator_of(ctx)
    groups = share_service_for(ctx).groups
    names = ctx.image.topic_ids
    out = []
    for group_id in request.group_ids:
        if not authorize(ctx, rctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            out.append(_group_entry(cls, group_id, int(ErrorCode.group_authorization_failed), None, names))
            continue
        error = coordinator.validate_group_status(group_id)
        group = None if error else groups.describe(group_id)
        code = error or (0 if group is not None else int(ErrorCode.group_id_not_found))
        out.append(_group_entry(cls, group_id, code, group, names))
    return build(cls, throttle_time=ZERO_DURATION, groups=tuple(out))


def share_group_describe_error_response(
    request: ShareGroupDescribeRequestAlias, version: int, code: ErrorCode
) -> ShareGroupDescribeResponse:
    cls = response_class(ApiKey.SHARE_GROUP_DESCRIBE, version)
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        groups=tuple(_group_entry(cls, g, int(code), None, {}) for g in request.group_ids),
    )
