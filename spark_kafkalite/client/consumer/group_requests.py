"""Request builders and response parsers of the classic group protocol (client side).

FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14),
OffsetCommit (8), OffsetFetch (9), DescribeGroups (15), ListGroups (16), DeleteGroups (42), each
as a version-independent ``RequestBuilder`` (see ``spark_kafkalite.client.requests``). Version
ranges: FindCoordinator 0-3 (v4 batches keys, KIP-699), OffsetCommit 2-8 (v9 is KIP-848's
member epoch), OffsetFetch 1-7 (v8 batches groups), the rest up to the schema's newest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.group_records import OffsetAndMetadata
from spark_kafkalite.protocol.internal_topics import CoordinatorType

__all__ = [
    "OffsetAndMetadata",
    "find_coordinator_request",
    "join_group_request",
    "sync_group_request",
    "heartbeat_request",
    "leave_group_request",
    "offset_commit_request",
    "offset_fetch_request",
    "describe_groups_request",
    "list_groups_request",
    "delete_groups_request",
    "parse_offset_commit_response",
    "parse_offset_fetch_response",
    "rebalance_request_timeout_ms",
]


def rebalance_request_timeout_ms(rebalance_timeout_ms: int, request_timeout_ms: int) -> int:
    """JoinGroup may be held for the whole rebalance: Java waits ``max(request.timeout.ms,
    rebalance timeout + 5 s)``."""
    return max(int(request_timeout_ms), int(rebalance_timeout_ms) + 5000)


def find_coordinator_request(key: str, key_type: int = CoordinatorType.GROUP) -> RequestBuilder:
    """FindCoordinator for one group id or transactional id (v1+ carries the key type, so a
    transactional id needs v1; v4+ batches keys, not used)."""

    def build(version: int) -> Any:
        return make(request_class(ApiKey.FIND_COORDINATOR, version), key=key, key_type=key_type)

    return RequestBuilder(ApiKey.FIND_COORDINATOR, build, min_version=1 if key_type else None)


def join_group_request(
    group_id: str,
    session_timeout_ms: int,
    rebalance_timeout_ms: int,
    member_id: str,
    group_instance_id: str | None,
    protocol_type: str,
    protocols: Sequence[tuple[str, bytes]],
    reason: str | None = None,
) -> RequestBuilder:
    """JoinGroup; ``group_instance_id`` (static membership, KIP-345) needs v5+."""

    def build(version: int) -> Any:
        cls = request_class(ApiKey.JOIN_GROUP, version)
        proto_cls = nested(cls, "JoinGroupRequestProtocol")
        return make(
            cls,
            group_id=group_id,
            session_timeout=int(session_timeout_ms),
            rebalance_timeout=int(rebalance_timeout_ms),
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocols=tuple(proto_cls(name=name, metadata=bytes(meta)) for name, meta in protocols),
            reason=reason,
        )

    # KIP-394: v4+ lets the coordinator hand out member ids (MEMBER_ID_REQUIRED)
    return RequestBuilder(ApiKey.JOIN_GROUP, build, min_version=5 if group_instance_id else None)


def sync_group_request(
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    protocol_type: str,
    protocol_name: str,
    assignments: Mapping[str, bytes],
) -> RequestBuilder:
    def build(version: int) -> Any:
        cls = request_class(ApiKey.SYNC_GROUP, version)
        assign_cls = nested(cls, "SyncGroupRequestAssignment")
        return make(
            cls,
            group_id=group_id,
            generation_id=int(generation_id),
            member_id=member_id,
            group_instance_id=group_instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=tuple(assign_cls(member_id=m, assignment=bytes(a)) for m, a in assignments.items()),
        )

    return RequestBuilder(ApiKey.SYNC_GROUP, build)


def heartbeat_request(
    group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
) -> RequestBuilder:
    def build(version: int) -> Any:
        return make(
            request_class(ApiKey.HEARTBEAT, version),
            group_id=group_id,
            generation_id=int(generation_id),
            member_id=member_id,
            group_instance_id=group_instance_id,
        )

    return RequestBuilder(ApiKey.HEARTBEAT, build)


def leave_group_request(
    group_id: str, members: Sequence[tuple[str, str | None]], reason: str | None = None
) -> RequestBuilder:
    """LeaveGroup for ``[(member_id, group_instance_id)]``; v0-2 carry one member id only, so
    several members (or a static member) need v3+."""

    def build(version: int) -> Any:
        cls = request_class(ApiKey.LEAVE_GROUP, version)
        if version < 3:
            return make(cls, group_id=group_id, member_id=members[0][0])
        ident = nested(cls, "MemberIdentity")
        return make(
            cls,
            group_id=group_id,
            members=tuple(make(ident, member_id=m, group_instance_id=i, reason=reason) for m, i in members),
        )

    needs_v3 = len(members) > 1 or any(i is not None for _, i in members)
    return RequestBuilder(ApiKey.LEAVE_GROUP, build, min_version=3 if needs_v3 else None)


def offset_commit_request(
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
) -> RequestBuilder:
    """OffsetCommit; generation -1 with member id "" is the standalone commit Kafka's admin and
    manually assigned consumers use (accepted only while the group has no members)."""
    by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
    for tp, om in offsets.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, om))

    def build(version: int) -> Any:
        cls = request_class(ApiKey.OFFSET_COMMIT, version)
        topic_cls = nested(cls, "OffsetCommitRequestTopic")
        part_cls = nested(cls, "OffsetCommitRequestPartition")
        return make(
            cls,
            group_id=group_id,
            generation_id_or_member_epoch=int(generation_id),
            generation_id=int(generation_id),
            member_id=member_id,
            group_instance_id=group_instance_id,
            retention_time=-1,
            topics=tuple(
                topic_cls(
                    name=topic,
                    partitions=tuple(
                        make(
                            part_cls,
                            partition_index=p,
                            committed_offset=int(om.offset),
                            committed_leader_epoch=int(om.leader_epoch),
                            committed_metadata=om.metadata,
                        )
                        for p, om in sorted(parts, key=lambda x: x[0])
                    ),
                )
                for topic, parts in by_topic.items()
            ),
        )

    return RequestBuilder(ApiKey.OFFSET_COMMIT, build, min_version=7 if group_instance_id else None)


def offset_fetch_request(
    group_id: str,
    partitions: Iterable[TopicPartition] | None,
    require_stable: bool = False,
    member: tuple[str, int] | None = None,
) -> RequestBuilder:
    """OffsetFetch for ``partitions`` (None = every partition the group committed, v2+);
    ``require_stable`` (v7+, KIP-447) asks for UNSTABLE_OFFSET_COMMIT instead of offsets that a
    pending transaction may still change. ``member`` = ``(member id, member epoch)`` of a KIP-848
    member: v9, one group in the ``groups`` array, so the coordinator checks the epoch
    (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); without it v1-7."""
    by_topic: dict[str, list[int]] | None = None
    if partitions is not None:
        by_topic = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(int(tp.partition))

    if member is not None:

        def build_v9(version: int) -> Any:
            cls = request_class(ApiKey.OFFSET_FETCH, version)
            topic_cls = nested(cls, "OffsetFetchRequestTopics")
            topics = None
            if by_topic is not None:
                topics = tuple(
                    topic_cls(name=t, partition_indexes=tuple(sorted(ps))) for t, ps in by_topic.items()
                )
            group = nested(cls, "OffsetFetchRequestGroup")(
                group_id=group_id, member_id=member[0], member_epoch=member[1], topics=topics
            )
            return make(cls, groups=(group,), require_stable=require_stable)

        return RequestBuilder(ApiKey.OFFSET_FETCH, build_v9, min_version=9)

    def build(version: int) -> Any:
        cls = request_class(ApiKey.OFFSET_FETCH, version)
        topic_cls = nested(cls, "OffsetFetchRequestTopic")
        topics = None
        if by_topic is not None:
            topics = tuple(
                topic_cls(name=t, partition_indexes=tuple(sorted(ps))) for t, ps in by_topic.items()
            )
        return make(cls, group_id=group_id, topics=topics, require_stable=require_stable)

    min_version = 7 if require_stable else (2 if partitions is None else None)
    return RequestBuilder(ApiKey.OFFSET_FETCH, build, min_version=min_version, max_version=7)


def describe_groups_request(group_ids: Sequence[str]) -> RequestBuilder:
    def build(version: int) -> Any:
        return make(
            request_class(ApiKey.DESCRIBE_GROUPS, version),
            groups=tuple(group_ids),
            include_authorized_operations=False,
        )

    return RequestBuilder(ApiKey.DESCRIBE_GROUPS, build)


def consumer_group_describe_request(group_ids: Sequence[str]) -> RequestBuilder:
    """ConsumerGroupDescribe (KIP-848) of ``group_ids``."""

    def build(version: int) -> Any:
        return make(
            request_class(ApiKey.CONSUMER_GROUP_DESCRIBE, version),
            group_ids=tuple(group_ids),
            include_authorized_operations=False,
        )

    return RequestBuilder(ApiKey.CONSUMER_GROUP_DESCRIBE, build)


def list_groups_request(states: Sequence[str] = ()) -> RequestBuilder:
    def build(version: int) -> Any:
        return make(request_class(ApiKey.LIST_GROUPS, version), states_filter=tuple(states))

    return RequestBuilder(ApiKey.LIST_GROUPS, build, min_version=4 if states else None)


def delete_groups_request(group_ids: Sequence[str]) -> RequestBuilder:
    def build(version: int) -> Any:
        return make(request_class(ApiKey.DELETE_GROUPS, version), groups_names=tuple(group_ids))

    return RequestBuilder(ApiKey.DELETE_GROUPS, build)


def parse_offset_commit_response(response: Any) -> dict[TopicPartition, int]:
    """``{tp: error_code}`` of an OffsetCommitResponse."""
    return {
        TopicPartition(str(t.name), int(p.partition_index)): int(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def parse_offset_fetch_response(
    response: Any,
) -> tuple[int, dict[TopicPartition, tuple[OffsetAndMetadata | None, int]]]:
    """``(top-level error_code, {tp: (OffsetAndMetadata or None when nothing is committed,
    partition error_code)})`` of an OffsetFetchResponse (v1-7, or v8+ with one group)."""
    groups = getattr(response, "groups", None)
    source = groups[0] if groups else response
    top = int(getattr(source, "error_code", 0) or 0)
    out: dict[TopicPartition, tuple[OffsetAndMetadata | None, int]] = {}
    for t in source.topics or ():
        for p in t.partitions:
            tp = TopicPartition(str(t.name), int(p.partition_index))
            offset = int(p.committed_offset)
            om = None
            if offset >= 0:
                om = OffsetAndMetadata(
                    offset,
                    leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                    metadata=str(p.metadata or ""),
                )
            out[tp] = (om, int(p.error_code))
    return top, out
