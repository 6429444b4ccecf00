"""Rebuilding consumer groups from their ``__consumer_offsets`` records while a partition loads
(Kafka's ``GroupMetadataManager.replay`` for the ConsumerGroup* records): the latest value per
key wins, a null value deletes. The members' current assignments carry their epochs and
pending revocations, so a new coordinator resumes reconciliation where the old one stopped.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from broker.coordinator.group.consumer_group import ConsumerGroup
from broker.coordinator.group.consumer_group_member import Assignment, ConsumerGroupMember, MemberState
from spark_kafkalite.protocol import consumer_group_records as rec
from spark_kafkalite.protocol.consumer_group_records import ConsumerGroupRecordType as T

__all__ = ["ConsumerGroupReplay"]


@dataclass(slots=True)
class ConsumerGroupReplay:
    """The records of one group read so far."""

    group_epoch: int | None = None
    assignment_epoch: int = 0
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    members: dict[str, rec.MemberMetadataValue] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    current: dict[str, rec.CurrentMemberAssignmentValue] = field(default_factory=dict)

    def apply(self, key: rec.ConsumerGroupRecordKey, value: bytes | None) -> None:
        """Replay one record.

        Raises:
            RecordFormatError: an unreadable value.
        """
        kind, member_id = key.type, key.member_id or ""
        if kind is T.GROUP_METADATA:
            self.group_epoch = None if value is None else rec.decode_group_epoch_value(value)
        elif kind is T.PARTITION_METADATA:
            self.subscription_metadata = {} if value is None else rec.decode_partition_metadata_value(value)
        elif kind is T.TARGET_ASSIGNMENT_METADATA:
            self.assignment_epoch = 0 if value is None else rec.decode_group_epoch_value(value)
        elif kind is T.MEMBER_METADATA:
            if value is None:
                self.members.pop(member_id, None)
            else:
                self.members[member_id] = rec.decode_member_metadata_value(value)
        elif kind is T.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.targets.pop(member_id, None)
            else:
                self.targets[member_id] = rec.decode_target_assignment_member_value(value)
        elif kind is T.CURRENT_MEMBER_ASSIGNMENT:
            if value is None:
                self.current.pop(member_id, None)
            else:
                self.current[member_id] = rec.decode_current_member_assignment_value(value)

    def build(self, group_id: str) -> ConsumerGroup | None:
        """The group, or None when it was deleted (no group epoch record)."""
        if self.group_epoch is None:
            return None
        group = ConsumerGroup(group_id)
        group.group_epoch = self.group_epoch
        group.assignment_epoch = self.assignment_epoch
        group.subscription_metadata = dict(self.subscription_metadata)
        for member_id, meta in self.members.items():
            current = self.current.get(member_id)
            try:
                state = MemberState(current.state) if current is not None else MemberState.STABLE
            except ValueError:
                state = MemberState.UNKNOWN
            group.update_member(
                ConsumerGroupMember(
                    member_id,
                    instance_id=meta.instance_id,
                    rack_id=meta.rack_id,
                    client_id=meta.client_id,
                    client_host=meta.client_host,
                    subscribed_topic_names=meta.subscribed_topic_names,
                    subscribed_topic_regex=meta.subscribed_topic_regex,
                    server_assignor=meta.server_assignor,
                    rebalance_timeout_ms=meta.rebalance_timeout_ms,
                    classic_session_timeout_ms=None if meta.classic is None else meta.classic[0],
                    classic_protocols=None if meta.classic is None else meta.classic[1],
                    member_epoch=current.member_epoch if current is not None else 0,
                    previous_member_epoch=current.previous_member_epoch if current is not None else 0,
                    state=state,
                    assigned_partitions=dict(current.assigned_partitions) if current is not None else {},
                    partitions_pending_revocation=dict(current.partitions_pending_revocation)
                    if current is not None
                    else {},
                )
            )
        group.target_assignment = {m: a for m, a in self.targets.items() if m in group.members}
        return group
