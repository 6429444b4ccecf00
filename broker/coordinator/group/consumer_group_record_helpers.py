"""The records a consumer group change writes to ``__consumer_offsets`` (Kafka's
``GroupCoordinatorRecordHelpers``): (key, value) pairs, a None value being a tombstone."""

from __future__ import annotations

import uuid

from broker.coordinator.group.consumer_group_member import Assignment, ConsumerGroupMember
from broker.coordinator.group.offsets_log import KeyValue
from spark_kafkalite.protocol import consumer_group_records as rec
from spark_kafkalite.protocol.consumer_group_records import ConsumerGroupRecordType as T

__all__ = [
    "member_metadata_record",
    "current_assignment_record",
    "group_epoch_record",
    "member_tombstones",
    "group_tombstones",
    "target_assignment_record",
    "partition_metadata_record",
    "target_assignment_epoch_record",
]


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> KeyValue:
    value = rec.MemberMetadataValue(
        member.instance_id,
        member.rack_id,
        member.client_id,
        member.client_host,
        member.subscribed_topic_names,
        member.subscribed_topic_regex,
        member.rebalance_timeout_ms,
        member.server_assignor,
        None
        if member.classic_protocols is None or member.classic_session_timeout_ms is None
        else (member.classic_session_timeout_ms, member.classic_protocols),
    )
    return rec.encode_key(T.MEMBER_METADATA, group_id, member.member_id), rec.encode_member_metadata_value(
        value
    )


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> KeyValue:
    value = rec.CurrentMemberAssignmentValue(
        member.member_epoch,
        member.previous_member_epoch,
        int(member.state),
        member.assigned_partitions,
        member.partitions_pending_revocation,
    )
    return (
        rec.encode_key(T.CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id),
        rec.encode_current_member_assignment_value(value),
    )


def group_epoch_record(group_id: str, epoch: int) -> KeyValue:
    return rec.encode_key(T.GROUP_METADATA, group_id), rec.encode_group_epoch_value(epoch)


def member_tombstones(group_id: str, member_id: str) -> list[KeyValue]:
    """Kafka's removal order: current assignment, target assignment, member metadata."""
    return [
        (rec.encode_key(T.CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
        (rec.encode_key(T.TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
        (rec.encode_key(T.MEMBER_METADATA, group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[KeyValue]:
    """The records deleting an empty consumer group's own state (DeleteGroups / expiry)."""
    return [
        (rec.encode_key(T.TARGET_ASSIGNMENT_METADATA, group_id), None),
        (rec.encode_key(T.PARTITION_METADATA, group_id), None),
        (rec.encode_key(T.GROUP_METADATA, group_id), None),
    ]


def target_assignment_record(group_id: str, member_id: str, assignment: Assignment) -> KeyValue:
    return (
        rec.encode_key(T.TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
        rec.encode_target_assignment_member_value(assignment),
    )


def partition_metadata_record(group_id: str, metadata: dict[str, tuple[uuid.UUID, int]]) -> KeyValue:
    return rec.encode_key(T.PARTITION_METADATA, group_id), rec.encode_partition_metadata_value(metadata)


def target_assignment_epoch_record(group_id: str, epoch: int) -> KeyValue:
    return (
        rec.encode_key(T.TARGET_ASSIGNMENT_METADATA, group_id),
        rec.encode_target_assignment_epoch_value(epoch),
    )
