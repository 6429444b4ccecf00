"""ShareFetch (key 78), v1-2 (KIP-932; Kafka's ``KafkaApis.handleShareFetchRequest`` and
``SharePartitionManager.fetchMessages``): a share-group member reads records of the partitions
of its share session, each acquired for it under a lock, and piggybacks acknowledgements of
records it acquired before.

* Session (``broker.coordinator.share.share_partition_manager``): epoch 0 opens it, -1 closes it
  (acknowledgements only, no fetch: the member's remaining acquired records are released), any
  other must be the session's next epoch (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND:
  top-level errors with no partitions). ``Topics`` add partitions to the session,
  ``ForgottenTopicsData`` remove them.
* Acknowledgements are applied before the read; a partition's answer carries
  ``AcknowledgeErrorCode``. Then every partition of the session is read from its share
  partition's next fetch offset and acquired for the member (at most ``MaxRecords`` in all,
  ``MaxBytes`` in all but one whole batch at least), answering ``Records`` with the whole
  batches read and ``AcquiredRecords`` with the ranges the member holds (it must ignore the
  rest). Partitions named in the request are always answered, others only with records.
* Long poll: with nothing acquired the request parks in the fetch purgatory until an append to
  one of the session's partitions or ``MaxWaitMs``, then reads once more (records whose lock
  expired meanwhile are redelivered then).
* Needs READ on the group (GROUP_AUTHORIZATION_FAILED, top level) and READ on each topic
  (TOPIC_AUTHORIZATION_FAILED per partition); an unknown topic id answers UNKNOWN_TOPIC_ID.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from kio.schema.share_fetch.v2.request import ShareFetchRequest

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.apis.share_support import (
    PartitionOutcome,
    acquire_partition,
    apply_acknowledgements,
    lock_timeout,
)
from broker.controller.group_configs import group_config
from broker.coordinator.share.service import share_service_for
from broker.coordinator.share.share_partition_manager import FINAL_SHARE_SESSION_EPOCH
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import ShareFetchRequest as ShareFetchRequestAlias
    from broker.apis.kio_types import ShareFetchResponse

__all__ = ["handle_share_fetch", "share_fetch_error_response", "share_response_topics"]


def share_response_topics(
    cls: type[Any], outcomes: dict[tuple[uuid.UUID, int], PartitionOutcome], with_records: bool
) -> tuple[Any, ...]:
    """ShareFetch / ShareAcknowledge response topics from (topic id, partition) -> outcome."""
    topic_cls = nested(
        cls, "ShareFetchableTopicResponse" if with_records else "ShareAcknowledgeTopicResponse"
    )
    partition_cls = nested(cls, "PartitionData")
    leader_cls = nested(cls, "LeaderIdAndEpoch")
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, index), o in sorted(outcomes.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        leader = leader_cls(leader_id=o.leader_id, leader_epoch=o.leader_epoch)
        if with_records:
            acquired_cls = nested(cls, "AcquiredRecords")
            entry = build(
                partition_cls,
                partition_index=index,
                error_code=o.error_code,
                error_message=o.error_message,
                acknowledge_error_code=o.acknowledge_error_code,
                acknowledge_error_message=None,
                current_leader=leader,
                records=o.records,
                acquired_records=tuple(
                    acquired_cls(
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in o.acquired
                ),
            )
        else:
            entry = build(
                partition_cls,
                partition_index=index,
                error_code=o.acknowledge_error_code if o.error_code == ErrorCode.none else o.error_code,
                error_message=o.error_message,
                current_leader=leader,
            )
        by_topic.setdefault(topic_id, []).append(entry)
    return tuple(topic_cls(topic_id=tid, partitions=tuple(parts)) for tid, parts in by_topic.items())


def _denied(ctx: BrokerContext, rctx: RequestContext, names: set[str]) -> set[str]:
    if ctx.authorizer is None or not names:
        return set()
    return names - authorized_names(ctx, rctx, AclOperation.READ, ResourceType.TOPIC, names)


async def handle_share_fetch(
    ctx: BrokerContext, rctx: RequestContext, request: ShareFetchRequest
) -> ShareFetchResponse:
    """Handle a ShareFetchRequest (see the module docstring)."""
    version = rctx.api_version
    cls = response_class(ApiKey.SHARE_FETCH, version)
    group_id, member_id = request.group_id or "", request.member_id or ""
    if not group_id or not member_id:
        return share_fetch_error_response(request, version, ErrorCode.invalid_request)
    if not authorize(ctx, rctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return share_fetch_error_response(request, version, ErrorCode.group_authorization_failed)
    service = share_service_for(ctx)
    epoch = int(request.share_session_epoch)
    error, session = service.partitions.session_for(group_id, member_id, epoch)
    if session is None:
        return share_fetch_error_response(request, version, error)
    topic_names = ctx.image.topic_ids
    named = {
        topic_names[t.topic_id]
        for t in request.topics
        if t.topic_id is not None and t.topic_id in topic_names
    }
    denied = _denied(ctx, rctx, named)
    outcomes: dict[tuple[uuid.UUID, int], PartitionOutcome] = {}
    for t in request.topics:
        assert t.topic_id is not None
        name = topic_names.get(t.topic_id)
        for p in t.partitions:
            tp = (t.topic_id, int(p.partition_index))
            o = outcomes[tp] = PartitionOutcome()
            if name is None:
                o.error_code = ErrorCode.unknown_topic_id
                continue
            if name in denied:
                o.error_code = ErrorCode.topic_authorization_failed
                continue
            if p.acknowledgement_batches:
                o.acknowledge_error_code = apply_acknowledgements(
                    service, group_id, member_id, (group_id, *tp), p.acknowledgement_batches
                )
            if epoch != FINAL_SHARE_SESSION_EPOCH:
                session.partitions.add(tp)
    for f in request.forgotten_topics_data:
        for index in f.partitions:
            if f.topic_id is not None:
                session.partitions.discard((f.topic_id, int(index)))
    configs = group_config(ctx.image, group_id, ctx.config.values)
    if epoch == FINAL_SHARE_SESSION_EPOCH:
        service.partitions.release_session(session)
    else:
        await _fetch(ctx, rctx, request, session.partitions, outcomes, configs, group_id, member_id)
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode.none,
        error_message=None,
        acquisition_lock_timeout=lock_timeout(configs),
        responses=share_response_topics(cls, outcomes, with_records=True),
        node_endpoints=(),
    )


async def _fetch(
    ctx: BrokerContext,
    rctx: RequestContext,
    request: ShareFetchRequest,
    partitions: set[tuple[uuid.UUID, int]],
    outcomes: dict[tuple[uuid.UUID, int], PartitionOutcome],
    configs: Any,
    group_id: str,
    member_id: str,
) -> None:
    service = share_service_for(ctx)
    topic_names = ctx.image.topic_ids
    deadline = time.monotonic() + max(0.0, request.max_wait.total_seconds())
    readable = [
        (tp, topic_names[tp[0]])
        for tp in sorted(partitions, key=lambda tp: (str(tp[0]), tp[1]))
        if tp[0] in topic_names and outcomes.get(tp, PartitionOutcome()).error_code == ErrorCode.none
    ]
    while True:
        budget_bytes = max(int(request.max_bytes), 0)
        budget_records = int(request.max_records) if int(request.max_records) > 0 else 500
        got = False
        for tp, name in readable:
            if budget_records <= 0:
                break
            out, _sp = acquire_partition(
                ctx, service, configs, (group_id, *tp), name, member_id, budget_bytes, budget_records
            )
            if out.error_code == ErrorCode.none and not out.acquired and tp not in outcomes:
                continue
            previous = outcomes.get(tp)
            if previous is not None:
                out.acknowledge_error_code = previous.acknowledge_error_code
            outcomes[tp] = out
            if out.acquired:
                got = True
                budget_bytes = max(0, budget_bytes - len(out.records))
                budget_records -= sum(a.last_offset - a.first_offset + 1 for a in out.acquired)
            elif out.error_code != ErrorCode.none:
                got = True
        remaining = deadline - time.monotonic()
        if got or remaining <= 0 or not readable:
            return
        rctx.release_slot()  # parked: no longer counts against queued.max.requests
        await ctx.fetch_purgatory.wait([(name, tp[1]) for tp, name in readable], remaining)


def share_fetch_error_response(
    request: ShareFetchRequestAlias, version: int, code: ErrorCode
) -> ShareFetchResponse:
    """A top-level error with no partitions (``ShareFetchRequest.getErrorResponse``)."""
    return build(
        response_class(ApiKey.SHARE_FETCH, version),
        throttle_time=ZERO_DURATION,
        error_code=code,
        error_message=None,
        acquisition_lock_timeout=ZERO_DURATION,
        responses=(),
        node_endpoints=(),
    )
