"""OffsetFetch (key 9), v1-9 served (v0 advertised only) (``KafkaApis.handleOffsetFetchRequest``).

Partitions without a commit answer offset -1, metadata "" and no error. v2+: ``topics`` null =
every committed partition, and a top-level error; v5+ the committed leader epoch; v7+
``require_stable`` (KIP-447): a partition with a transactional commit awaiting its marker
answers UNSTABLE_OFFSET_COMMIT (offset -1; clients retry); v8+ batches groups (KIP-709). v1 reports a group error in every partition.
Authorization: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), then DESCRIBE on each
topic: requested partitions of other topics answer TOPIC_AUTHORIZATION_FAILED; an all-partitions
fetch leaves those topics out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as OffsetFetchRequestV7
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as OffsetFetchRequestV8
from kio.schema.offset_fetch.v9.request import OffsetFetchRequest as OffsetFetchRequestV9
from kio.schema.offset_fetch.v9.request import OffsetFetchRequestGroup as GroupV9

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.coordinator.group.api_support import coordinator_of
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import OffsetFetchRequest, OffsetFetchResponse
    from broker.coordinator.group.group_coordinator import GroupCoordinator

__all__ = ["handle_offset_fetch", "offset_fetch_error_response"]


def _group_entry(
    ctx: BrokerContext,
    rctx: RequestContext,
    coordinator: GroupCoordinator,
    version: int,
    group_id: str,
    topics: Any,
    topic_cls: type[Any],
    partition_cls: type[Any],
    require_stable: bool = False,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> tuple[int, tuple[Any, ...]]:
    """(group error, response topics) for one group; v9+ ``member_id`` / ``member_epoch`` are
    checked against a consumer group (KIP-848)."""
    requested = None if topics is None else [(t.name, int(p)) for t in topics for p in t.partition_indexes]
    offsets: dict[tuple[str, int], Any]
    unstable: set[tuple[str, int]] = set()
    if not authorize(ctx, rctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error, offsets = int(ErrorCode.group_authorization_failed), {}
    else:
        error, offsets = coordinator.offsets.handle_fetch_offsets(
            group_id, requested, member_id, member_epoch
        )
        if require_stable and not error:
            unstable = coordinator.offsets.unstable_partitions(group_id, requested)
    if error:
        if version >= 2 or requested is None:
            return error, ()
        offsets = {tp: None for tp in requested}  # v1: the error goes into every partition
    entries = list(offsets.items() if requested is None else ((tp, offsets.get(tp)) for tp in requested))
    visible = authorized_names(
        ctx, rctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {t for (t, _), _ in entries}
    )
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), value in entries:
        if topic not in visible:
            if requested is not None:
                by_topic.setdefault(topic, []).append(
                    build(
                        partition_cls,
                        partition_index=partition,
                        committed_offset=-1,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=ErrorCode.topic_authorization_failed,
                    )
                )
            continue
        if (topic, partition) in unstable:
            value, partition_error = None, int(ErrorCode.unstable_offset_commit)
        else:
            partition_error = error if version < 2 else 0
        by_topic.setdefault(topic, []).append(
            build(
                partition_cls,
                partition_index=partition,
                committed_offset=-1 if value is None else value.offset,
                committed_leader_epoch=-1 if value is None else value.leader_epoch,
                metadata="" if value is None else value.metadata,
                error_code=ErrorCode(partition_error),
            )
        )
    return 0 if version < 2 else error, tuple(
        topic_cls(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()
    )


async def handle_offset_fetch(
    ctx: BrokerContext, rctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    """Handle an OffsetFetchRequest."""
    version = rctx.api_version
    coordinator = coordinator_of(ctx)
    cls = response_class(ApiKey.OFFSET_FETCH, version)
    if isinstance(request, OffsetFetchRequestV8 | OffsetFetchRequestV9):  # v8+: many groups (KIP-709)
        group_cls = nested(cls, "OffsetFetchResponseGroup")
        topic_cls = nested(cls, "OffsetFetchResponseTopics")
        partition_cls = nested(cls, "OffsetFetchResponsePartitions")
        groups = []
        stable = bool(request.require_stable)
        for g in request.groups:
            member_id, member_epoch = (g.member_id, g.member_epoch) if isinstance(g, GroupV9) else (None, -1)
            error, topics = _group_entry(
                ctx,
                rctx,
                coordinator,
                version,
                g.group_id,
                g.topics,
                topic_cls,
                partition_cls,
                stable,
                member_id,
                member_epoch,
            )
            groups.append(group_cls(group_id=g.group_id, topics=topics, error_code=ErrorCode(error)))
        return build(cls, throttle_time=ZERO_DURATION, groups=tuple(groups))
    topic_cls = nested(cls, "OffsetFetchResponseTopic")
    partition_cls = nested(cls, "OffsetFetchResponsePartition")
    error, topics = _group_entry(
        ctx,
        rctx,
        coordinator,
        version,
        request.group_id,
        request.topics,
        topic_cls,
        partition_cls,
        isinstance(request, OffsetFetchRequestV7) and request.require_stable,  # v7+ (KIP-447)
    )
    return build(cls, throttle_time=ZERO_DURATION, topics=topics, error_code=ErrorCode(error))


def offset_fetch_error_response(
    request: OffsetFetchRequest, version: int, code: ErrorCode
) -> OffsetFetchResponse:
    cls = response_class(ApiKey.OFFSET_FETCH, version)
    if isinstance(request, OffsetFetchRequestV8 | OffsetFetchRequestV9):
        group_cls = nested(cls, "OffsetFetchResponseGroup")
        return build(
            cls,
            throttle_time=ZERO_DURATION,
            groups=tuple(group_cls(group_id=g.group_id, topics=(), error_code=code) for g in request.groups),
        )
    return build(cls, throttle_time=ZERO_DURATION, topics=(), error_code=code)
