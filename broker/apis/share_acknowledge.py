"""ShareAcknowledge (key 79), v1-2 (KIP-932; Kafka's ``KafkaApis.handleShareAcknowledgeRequest``):
a share-group member acknowledges records it acquired (ACCEPT, RELEASE, REJECT, and RENEW of
the lock with v2, KIP-1222) without fetching. The share session epoch must be the session's next
(0 is INVALID_SHARE_SESSION_EPOCH: a session is opened by ShareFetch only); -1 closes the session
after the acknowledgements, releasing the member's other acquired records. Needs READ on the
group and on each topic."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kio.schema.share_acknowledge.v2.request import ShareAcknowledgeRequest

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.apis.share_fetch import share_response_topics
from broker.apis.share_support import PartitionOutcome, apply_acknowledgements, lock_timeout
from broker.controller.group_configs import group_config
from broker.coordinator.share.service import share_service_for
from broker.coordinator.share.share_partition_manager import FINAL_SHARE_SESSION_EPOCH
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ShareAcknowledgeRequest as ShareAcknowledgeRequestAlias
    from broker.apis.kio_types import ShareAcknowledgeResponse

__all__ = ["handle_share_acknowledge", "share_acknowledge_error_response"]


async def handle_share_acknowledge(
    ctx: BrokerContext, rctx: RequestContext, request: ShareAcknowledgeRequest
) -> ShareAcknowledgeResponse:
    """Handle a ShareAcknowledgeRequest (see the module docstring)."""
    version = rctx.api_version
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not group_id or not member_id:
        return share_acknowledge_error_response(request, version, ErrorCode.invalid_request)
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return share_acknowledge_error_response(request, version, ErrorCode.group_authorization_failed)
    epoch = int(request.share_session_epoch)
    if epoch == 0:
        return share_acknowledge_error_response(request, version, ErrorCode.invalid_share_session_epoch)
    service = share_service_for(ctx)
    error, session = service.partitions.session_for(group_id, member_id, epoch)
    if session is None:
        return share_acknowledge_error_response(request, version, error)
    topic_names = ctx.image.topic_ids
    named = {
        topic_names[t.topic_id]
        for t in request.topics
        if t.topic_id is not None and t.topic_id in topic_names
    }
    denied = set()
    if ctx.authorizer is not None and named:
        denied = named - authorized_names(ctx, rctx, AclOperation.READ, ResourceType.TOPIC, named)
    outcomes: dict[tuple[uuid.UUID, int], PartitionOutcome] = {}
    for t in request.topics:
        assert t.topic_id is not None
        name = topic_names.get(t.topic_id)
        for p in t.partitions:
            tp = (t.topic_id, int(p.partition_index))
            o = outcomes[tp] = PartitionOutcome(leader_id=ctx.node_id)
            if name is None:
                o.error_code = ErrorCode.unknown_topic_id
            elif name in denied:
                o.error_code = ErrorCode.topic_authorization_failed
            else:
                o.acknowledge_error_code = apply_acknowledgements(
                    service, group_id, member_id, (group_id, *tp), p.acknowledgement_batches
                )
    if epoch == FINAL_SHARE_SESSION_EPOCH:
        service.partitions.release_session(session)
    cls = response_class(ApiKey.SHARE_ACKNOWLEDGE, version)
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=lock_timeout(group_config(ctx.image, group_id, ctx.config.values)),
        responses=share_response_topics(cls, outcomes, with_records=False),
        node_endpoints=(),
    )


def share_acknowledge_error_response(
    request: ShareAcknowledgeRequestAlias, version: int, code: ErrorCode
) -> ShareAcknowledgeResponse:
    return build(
        response_class(ApiKey.SHARE_ACKNOWLEDGE, version),
        throttle_time=ZERO_DURATION,
        error_code=code,
        error_message=None,
        acquisition_lock_timeout=ZERO_DURATION,
        responses=(),
        node_endpoints=(),
    )
