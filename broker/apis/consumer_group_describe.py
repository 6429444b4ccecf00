"""ConsumerGroupDescribe (key 69), v0-1 (KIP-848; Kafka's ``GroupMetadataManager.consumerGroupDescribe``):
group epoch, assignment epoch, state, the assignor in use and every member with its
subscription, current assignment and target assignment (topic ids and names).

Needs DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group); an unknown group or
one that is not a consumer group answers GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.apis.auth_helper import authorize
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import INT32_MIN, coordinator_of
from broker.coordinator.group.consumer_group_member import Assignment
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

__all__ = ["handle_consumer_group_describe", "consumer_group_describe_error_response"]

#: ConsumerGroupDescribe v1 ``member_type``: 0 = a classic member (JoinGroup), 1 = a consumer-protocol one
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1


async def handle_consumer_group_describe(
    ctx: BrokerContext, rctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    """Handle a ConsumerGroupDescribeRequest (see the module docstring)."""
    version = rctx.api_version
    cls = response_class(ApiKey.CONSUMER_GROUP_DESCRIBE, version)
    group_cls = nested(cls, "DescribedGroup")
    member_cls = nested(cls, "Member")
    assignment_cls = nested(cls, "Assignment")
    tp_cls = nested(cls, "TopicPartitions")
    coordinator = coordinator_of(ctx)
    image = ctx.image
    default_assignor = coordinator.consumer.config.assignors[0]

    def assignment(parts: Assignment) -> Any:
        entries = []
        for topic_id, partitions in sorted(parts.items(), key=lambda kv: str(kv[0])):
            topic = image.topic_by_id(topic_id)
            if topic is not None and partitions:
                entries.append(
                    tp_cls(topic_id=topic_id, topic_name=topic.name, partitions=tuple(sorted(partitions)))
                )
        return assignment_cls(topic_partitions=tuple(entries))

    groups = []
    for group_id in request.group_ids:
        if not authorize(ctx, rctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error, message, group = int(ErrorCode.group_authorization_failed), None, None
        else:
            error, message, group = coordinator.consumer.describe(group_id)
        if group is None:
            groups.append(
                build(
                    group_cls,
                    error_code=ErrorCode(error),
                    error_message=message,
                    group_id=group_id,
                    group_state="Dead" if error == ErrorCode.group_id_not_found else "",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=(),
                    authorized_operations=INT32_MIN,
                )
            )
            continue
        members = tuple(
            build(
                member_cls,
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=assignment(m.assigned_partitions),
                target_assignment=assignment(group.target_assignment.get(m.member_id, {})),
                member_type=CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
            )
            for m in group.members.values()
        )
        groups.append(
            build(
                group_cls,
                error_code=ErrorCode.none,
                error_message=None,
                group_id=group_id,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.preferred_assignor(default_assignor),
                members=members,
                authorized_operations=INT32_MIN,
            )
        )
    return build(cls, throttle_time=ZERO_DURATION, groups=tuple(groups))


def consumer_group_describe_error_response(
    request: ConsumerGroupDescribeRequest, version: int, code: ErrorCode
) -> ConsumerGroupDescribeResponse:
    cls = response_class(ApiKey.CONSUMER_GROUP_DESCRIBE, version)
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
                group_epoch=-1,
                assignment_epoch=-1,
                assignor_name="",
                members=(),
            )
            for g in request.group_ids
        ),
    )
