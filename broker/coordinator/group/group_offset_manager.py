"""``GroupOffsetManager``: the offset and admin operations of the group coordinator, an object the
:class:`~broker.coordinator.group.group_coordinator.GroupCoordinator` owns (``coordinator.offsets``):
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete and offset
expiration (Kafka's ``GroupCoordinator.handleCommitOffsets`` / ``handleFetchOffsets`` /
``handleListGroups`` / ``handleDescribeGroup`` / ``handleDeleteGroups`` / ``handleDeleteOffsets``
and ``GroupMetadataManager.cleanupGroupMetadata``). It reaches the membership side only through
the :class:`GroupMembership` interface (group validation, member validation, heartbeats).

Standalone commits (generation -1, empty member id, no instance id; Kafka's admin and
``assign()`` consumers) are accepted only while the group is Empty or doesn't exist.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from broker.coordinator.group.classic_group import GroupMetadata, GroupState
from broker.coordinator.group.consumer_group_coordinator import ConsumerGroupCoordinator
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.group_records import OffsetAndMetadata
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from broker.coordinator.group.group_coordinator import GroupConfig
    from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
    from broker.coordinator.group.scheduler import Scheduler

__all__ = ["GroupOffsetManager", "GroupMembership", "GroupSummary", "MemberSummary"]

logger = logging.getLogger(__name__)

validate_consumer_offset_commit = ConsumerGroupCoordinator.validate_offset_commit
validate_consumer_offset_fetch = ConsumerGroupCoordinator.validate_offset_fetch

E = ErrorCode


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """DescribeGroups data: metadata/assignments only for a Stable group (as Kafka)."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]


class GroupMembership(Protocol):
    """What the offset manager needs from the membership side of the coordinator."""

    @property
    def active(self) -> bool:
        """The coordinator is started (COORDINATOR_NOT_AVAILABLE otherwise)."""
        ...

    def validate_group_status(self, group_id: str | None, allow_empty_id: bool = False) -> int:
        """Kafka's ``validateGroupStatus``: 0 or the error code."""
        ...

    def validate_current_member(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> int:
        """0, FENCED_INSTANCE_ID or UNKNOWN_MEMBER_ID."""
        ...

    def complete_and_schedule_heartbeat(
        self, group: GroupMetadata, member: Any, timeout_ms: int | None = None
    ) -> None:
        """Count a commit from ``member`` as its heartbeat."""
        ...


class GroupOffsetManager:
    """Offset and admin operations (see the module docstring).

    Args:
        membership: the coordinator's membership side.
        manager: the group cache and ``__consumer_offsets`` persistence.
        scheduler: clock (offset expiration).
        config: ``offsets.retention.*``.
    """

    def __init__(
        self,
        membership: GroupMembership,
        manager: GroupMetadataManager,
        scheduler: Scheduler,
        config: GroupConfig,
    ) -> None:
        self.membership = membership
        self.manager = manager
        self.scheduler = scheduler
        self.config = config

    # -- OffsetCommit -----------------------------------------------------------------------------
    async def handle_commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartitionKey, OffsetAndMetadata],
        api_version: int = 9,
    ) -> dict[TopicPartitionKey, int]:
        """Per-partition error codes, after the commit record was appended (acks=-1).
        ``generation_id`` is the member epoch for a consumer group (KIP-848:
        STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION below OffsetCommit v9)."""
        group, error = self._group_for_commit(
            group_id, member_id, group_instance_id, generation_id, api_version
        )
        if group is None:
            return {tp: error for tp in offsets}
        if group.has(member_id):
            self.membership.complete_and_schedule_heartbeat(group, group.get(member_id))
        return await self.manager.store_offsets(group, offsets)

    async def handle_txn_commit_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartitionKey, OffsetAndMetadata],
    ) -> dict[TopicPartitionKey, int]:
        """TxnOffsetCommit: per-partition error codes once the transactional batch is appended
        (acks=-1); the offsets stay pending until the transaction's marker. An unknown group with
        generation < 0 becomes a simple group, with generation >= 0 ILLEGAL_GENERATION; a member
        and generation given are validated; the group's state is not (Kafka's
        ``OffsetMetadataManager.validateTransactionalOffsetCommit``)."""
        group, error = self._group_for_commit(
            group_id, member_id, group_instance_id, generation_id, None, transactional=True
        )
        if group is None:
            return {tp: error for tp in offsets}
        return await self.manager.store_txn_offsets(group, producer_id, producer_epoch, offsets)

    def _group_for_commit(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        api_version: int | None,
        transactional: bool = False,
    ) -> tuple[GroupMetadata | None, int]:
        """The group an offset commit (``transactional``: TxnOffsetCommit, ``api_version`` None)
        writes to -> (group, 0), or (None, error code). An unknown group becomes a simple group
        when ``generation_id`` < 0 (ILLEGAL_GENERATION otherwise); a consumer group without
        classic members checks the member epoch (``validate_consumer_offset_commit``), any other
        group the member and generation (:meth:`_validate_offset_commit`)."""
        error = self.membership.validate_group_status(group_id, allow_empty_id=True)
        if error:
            return None, error
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                return None, int(E.illegal_generation)
            group = self.manager.get_or_create_group(group_id, create=True)
        if group.consumer is not None and not group.members:
            error = validate_consumer_offset_commit(group.consumer, member_id, generation_id, api_version)
        else:
            error = self._validate_offset_commit(group, member_id, instance_id, generation_id, transactional)
        return (None, error) if error else (group, 0)

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        transactional: bool = False,
    ) -> int:
        if group.is_state(GroupState.DEAD):
            return int(E.coordinator_not_available)
        if transactional and generation_id < 0 and member_id == "" and instance_id is None:
            return 0  # older TxnOffsetCommit versions carry no member: the group state is not enforced
        if generation_id < 0 and member_id == "" and instance_id is None:
            # the group only stores offsets: allowed unless it has members
            return 0 if group.is_state(GroupState.EMPTY) else int(E.unknown_member_id)
        error = self.membership.validate_current_member(group, member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return int(E.illegal_generation)
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            return int(E.rebalance_in_progress)
        return 0

    # -- OffsetFetch -------------------------------------------------------------------------------
    def handle_fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartitionKey] | None,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, dict[TopicPartitionKey, OffsetAndMetadata | None]]:
        """(group error, committed offsets); ``partitions`` None = every committed partition.
        OffsetFetch v9+ ``member_id`` / ``member_epoch`` are checked against a consumer group
        (KIP-848: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH)."""
        error = self.membership.validate_group_status(group_id, allow_empty_id=True)
        if error:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is not None and group.consumer is not None and not group.members:
            error = validate_consumer_offset_fetch(group.consumer, member_id, member_epoch)
            if error:
                return error, {}
        return 0, self.manager.get_offsets(group_id, partitions)

    def unstable_partitions(
        self, group_id: str, partitions: list[TopicPartitionKey] | None
    ) -> set[TopicPartitionKey]:
        """Partitions (of ``partitions``, None = the committed ones) with a TxnOffsetCommit
        awaiting its marker: OffsetFetch with ``require_stable`` answers UNSTABLE_OFFSET_COMMIT
        for them (KIP-447)."""
        group = self.manager.get_group(group_id)
        if group is None or not group.pending_txn_offsets:
            return set()
        candidates = group.offsets if partitions is None else partitions
        return {tp for tp in candidates if group.has_pending_txn_offsets(tp)}

    # -- ListGroups / DescribeGroups -------------------------------------------------------------
    def handle_list_groups(
        self, states: set[str] | None = None
    ) -> tuple[int, list[tuple[str, str, str, str]]]:
        """(error, [(group id, protocol type, state, group type)]) of local groups; ``states``
        filters case-insensitively (KIP-518). A consumer group (KIP-848) is listed with protocol
        type ``consumer``, its own state (Empty / Assigning / Reconciling / Stable) and type
        ``consumer``. COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if not self.membership.active:
            return int(E.coordinator_not_available), []
        if self.manager.is_loading():
            return int(E.coordinator_load_in_progress), []
        wanted = {s.lower() for s in states} if states else None
        out = []
        for group in self.manager.current_groups():
            if group.is_state(GroupState.DEAD):
                continue
            if group.consumer is not None and not group.members:
                entry = (group.group_id, "consumer", group.consumer.state.value, "consumer")
            else:
                entry = (group.group_id, group.protocol_type or "", group.state.value, "classic")
            if wanted is not None and entry[2].lower() not in wanted:
                continue
            out.append(entry)
        return 0, out

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupSummary]:
        dead = GroupSummary(GroupState.DEAD.value, "", "", ())
        error = self.membership.validate_group_status(group_id, allow_empty_id=True)
        if error:
            return error, dead
        group = self.manager.get_group(group_id)
        if group is None or (group.consumer is not None and not group.members):
            return 0, dead  # a consumer group is not described by DescribeGroups v0-5 (Kafka 4.0)
        stable = group.is_state(GroupState.STABLE) and group.protocol_name is not None
        members = tuple(
            MemberSummary(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        return 0, GroupSummary(
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    # -- DeleteGroups / OffsetDelete --------------------------------------------------------------
    async def handle_delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        """Per group: 0, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or a coordinator error."""
        results: dict[str, int] = {}
        for group_id in group_ids:
            error = self.membership.validate_group_status(group_id, allow_empty_id=True)
            if error:
                results[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_state(GroupState.DEAD):
                results[group_id] = int(E.group_id_not_found)
            elif not group.is_state(GroupState.EMPTY) or (
                group.consumer is not None and group.consumer.members
            ):
                results[group_id] = int(E.non_empty_group)
            else:
                results[group_id] = await self._delete_empty_group(group)
                if results[group_id] == 0:
                    logger.info("deleted group %s", group_id)
        return results

    async def _delete_empty_group(self, group: GroupMetadata) -> int:
        """Delete an Empty group: it turns Dead *before* the tombstones are written, as Kafka's
        ``handleDeleteGroups`` / ``cleanupGroupMetadata`` do under the group lock, so a JoinGroup
        or OffsetCommit arriving during the write is refused (retriable) instead of reviving a
        group that is being removed. If the write fails the group is Empty again."""
        group.state = GroupState.DEAD
        code = await self.manager.delete_group(group)
        if code != 0 and group.is_state(GroupState.DEAD) and self.manager.get_group(group.group_id) is group:
            group.state = GroupState.EMPTY
        return code

    async def handle_delete_offsets(
        self, group_id: str, partitions: list[TopicPartitionKey]
    ) -> tuple[int, dict[TopicPartitionKey, int]]:
        """(group error, per-partition errors): GROUP_SUBSCRIBED_TO_TOPIC for partitions of
        topics a non-empty consumer group subscribes to; NON_EMPTY_GROUP for a non-empty
        group of another protocol type."""
        error = self.membership.validate_group_status(group_id)
        if error:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return int(E.group_id_not_found), {}
        subscribed: set[str] = set()
        if group.consumer is not None and group.consumer.members:
            subscribed = set(group.consumer.subscription_metadata)
        elif not group.is_state(GroupState.EMPTY):
            topics = group.subscribed_topics()
            if topics is None:
                return int(E.non_empty_group), {}
            subscribed = topics
        results = {tp: int(E.group_subscribed_to_topic) for tp in partitions if tp[0] in subscribed}
        deletable = [tp for tp in partitions if tp[0] not in subscribed]
        code = await self.manager.delete_offsets(group, deletable)
        results.update({tp: code for tp in deletable})
        return 0, results

    # -- deleted topics ------------------------------------------------------------------------------
    async def delete_offsets_of_topics(self, topics: set[str]) -> int:
        """Tombstone the committed offsets of deleted ``topics`` in every local group (Kafka's
        ``GroupCoordinator.onPartitionsDeleted``); returns how many were removed."""
        removed = 0
        for group in self.manager.current_groups():
            gone = [tp for tp in group.offsets if tp[0] in topics]
            if gone and await self.manager.delete_offsets(group, gone) == 0:
                removed += len(gone)
        if removed:
            logger.info("removed %d committed offset(s) of deleted topics %s", removed, sorted(topics))
        return removed

    # -- expiration --------------------------------------------------------------------------------
    async def expire_offsets(self) -> int:
        """Kafka's ``cleanupGroupMetadata`` for Empty groups (KIP-211): offsets older than
        ``offsets.retention.minutes`` after the group became empty (or after their commit /
        explicit expire time) are tombstoned; an Empty group left with no offsets is deleted.
        Returns how many offsets expired."""
        now = self.scheduler.now_ms()
        retention = self.config.offsets_retention_ms
        expired_total = 0
        for group in self.manager.current_groups():
            if not group.is_state(GroupState.EMPTY) or (
                group.consumer is not None and group.consumer.members
            ):
                continue
            expired = []
            for tp, value in group.offsets.items():
                if value.expire_timestamp_ms >= 0:
                    due = value.expire_timestamp_ms
                else:
                    base = (
                        max(group.current_state_timestamp_ms, value.commit_timestamp_ms)
                        if group.protocol_type
                        else value.commit_timestamp_ms
                    )
                    due = base + retention
                if due <= now and not group.has_pending_txn_offsets(tp):
                    expired.append(tp)
            if expired and await self.manager.delete_offsets(group, expired) == 0:
                expired_total += len(expired)
                logger.info("group %s: expired %d offset(s)", group.group_id, len(expired))
            if (
                group.is_state(GroupState.EMPTY)
                and not group.offsets
                and not group.pending_txn_offsets
                and not group.pending_members  # a KIP-394 rejoin is on its way
                and self.manager.get_group(group.group_id) is group
            ):
                await self._delete_empty_group(group)
        return expired_total
