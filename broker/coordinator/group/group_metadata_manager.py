"""Groups and committed offsets cached per ``__consumer_offsets`` partition, and their
persistence (Kafka's ``GroupMetadataManager``).

A group lives in partition ``abs(java_hashcode(group_id)) % offsets.topic.num.partitions``. The
coordinator owns the groups of the partitions this broker leads: on becoming leader it *loads*
the partition (replays its records: latest record per key wins, null value = tombstone) and the
groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile; on losing leadership it *unloads* them
(NOT_COORDINATOR afterwards). Writes (group metadata after a rebalance, offset commits,
tombstones) are appended with acks=-1 before the caller answers.

Transactional offset commits (TxnOffsetCommit, KIP-98) are appended as a transactional batch of
the producer and held per producer id in the group (``pending_txn_offsets``) until the
transaction's marker reaches this partition (:meth:`complete_transaction`): COMMIT makes them
visible unless a commit written later in the log set the partition already, ABORT drops them.
Loading replays the same rules from the log (records of a transaction wait for its marker; a
transaction without a marker yet stays pending).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Any, Literal, overload

from broker.coordinator.group.classic_group import GroupMetadata, GroupState, MemberMetadata
from broker.coordinator.group.consumer_group_record_helpers import (
    group_tombstones as consumer_group_tombstones,
)
from broker.coordinator.group.consumer_group_replay import ConsumerGroupReplay
from broker.coordinator.group.offsets_log import (
    KeyValue,
    LoadedMarker,
    OffsetsAppender,
    TransactionalAppender,
    read_partition_with_markers,
    storage_error_to_coordinator_error,
)
from spark_kafkalite.protocol.consumer_group_records import decode_key as decode_consumer_group_key
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from spark_kafkalite.protocol.internal_topics import GROUP_METADATA_TOPIC_NAME
from spark_kafkalite.protocol.types import TopicPartitionKey

__all__ = ["GroupMetadataManager", "java_string_hashcode", "partition_for_group"]

logger = logging.getLogger(__name__)


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit wrap-around)."""
    raw = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount``
    (``Utils.abs(Integer.MIN_VALUE) == 0``)."""
    h = java_string_hashcode(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


_Loaded = dict[TopicPartitionKey, tuple[OffsetAndMetadata, int]]


class _Replay:
    """What a load has read so far: offsets per group (with their log order), group records,
    and per producer id the transactional offsets awaiting a marker."""

    def __init__(self) -> None:
        self.offsets: dict[str, _Loaded] = {}
        self.groups: dict[str, GroupMetadataRecord | None] = {}
        self.pending: dict[int, dict[str, _Loaded]] = {}
        #: KIP-848 consumer groups: group id -> their records so far
        self.consumer: dict[str, ConsumerGroupReplay] = {}

    def marker(self, producer_id: int, committed: bool) -> None:
        pending = self.pending.pop(producer_id, {})
        if not committed:
            return
        for group_id, entries in pending.items():
            visible = self.offsets.setdefault(group_id, {})
            for tp, (value, order) in entries.items():
                current = visible.get(tp)
                if current is None or current[1] < order:
                    visible[tp] = (value, order)


class GroupMetadataManager:
    """Cache + persistence of groups and offsets.

    Args:
        num_partitions: ``offsets.topic.num.partitions``.
        appender: how records reach ``__consumer_offsets`` (see :mod:`offsets_log`).
        now_ms: wall clock in ms (commit timestamps, state timestamps).
        commit_timeout_ms: ``offsets.commit.timeout.ms`` for acks=-1 appends.
        max_metadata_bytes: ``offset.metadata.max.bytes``.
        load_buffer_bytes: ``offsets.load.buffer.size`` (read size while loading a partition).
    """

    def __init__(
        self,
        num_partitions: int,
        appender: OffsetsAppender,
        now_ms: Callable[[], int],
        *,
        commit_timeout_ms: int = 5000,
        max_metadata_bytes: int = 4096,
        load_buffer_bytes: int = 5 * 1024 * 1024,
    ) -> None:
        self.num_partitions = num_partitions
        self.appender = appender
        self.now_ms = now_ms
        self.commit_timeout_ms = commit_timeout_ms
        self.max_metadata_bytes = max_metadata_bytes
        self.load_buffer_bytes = load_buffer_bytes
        self.groups: dict[str, GroupMetadata] = {}
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self.partition_epochs: dict[int, int] = {}
        #: log order of offset commit records (appends to one partition reach the log in call order)
        self._commit_order = itertools.count()

    # -- ownership ------------------------------------------------------------------------------
    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.num_partitions)

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    # -- cache ----------------------------------------------------------------------------------
    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    @overload
    def get_or_create_group(self, group_id: str, create: Literal[True]) -> GroupMetadata: ...

    @overload
    def get_or_create_group(self, group_id: str, create: bool) -> GroupMetadata | None: ...

    def get_or_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = GroupMetadata(group_id, self.now_ms())
            self.groups[group_id] = group
        return group

    def remove_group(self, group: GroupMetadata) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # -- writes ---------------------------------------------------------------------------------
    async def _append(self, group_id: str, records: list[KeyValue]) -> int:
        partition = self.partition_for(group_id)
        if partition not in self.owned_partitions:
            return int(ErrorCode.not_coordinator)
        code = await self.appender.append(
            GROUP_METADATA_TOPIC_NAME, partition, records, self.commit_timeout_ms
        )
        if code:
            logger.warning(
                "append of %d record(s) of group %s to %s-%d failed with error %d",
                len(records),
                group_id,
                GROUP_METADATA_TOPIC_NAME,
                partition,
                code,
            )
        return storage_error_to_coordinator_error(code)

    def group_metadata_record(self, group: GroupMetadata, assignment: dict[str, bytes]) -> KeyValue:
        members = tuple(
            MemberRecord(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(group.protocol_name) if group.protocol_name else b"",
                assignment.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        value = GroupMetadataRecord(
            group.protocol_type or "",
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            group.current_state_timestamp_ms,
            members,
        )
        return encode_group_metadata_key(group.group_id), encode_group_metadata_value(value)

    async def append_records(self, group_id: str, records: list[KeyValue]) -> int:
        """Append ``records`` of ``group_id`` (acks=-1); error code (coordinator errors)."""
        return await self._append(group_id, records)

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        """Persist the group's metadata with ``assignment`` (member id -> bytes); error code."""
        return await self._append(group.group_id, [self.group_metadata_record(group, assignment)])

    async def store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartitionKey, OffsetAndMetadata]
    ) -> dict[TopicPartitionKey, int]:
        """Persist and cache commits; per-partition error codes (OFFSET_METADATA_TOO_LARGE for
        oversized metadata, the append's mapped error for the rest)."""
        results: dict[TopicPartitionKey, int] = {}
        valid: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode("utf-8")) > self.max_metadata_bytes:
                results[tp] = int(ErrorCode.offset_metadata_too_large)
            else:
                valid[tp] = value
        if valid:
            records: list[KeyValue] = [
                (encode_offset_commit_key(group.group_id, tp[0], tp[1]), encode_offset_commit_value(v))
                for tp, v in valid.items()
            ]
            order = next(self._commit_order)
            code = await self._append(group.group_id, records)
            if code == 0 and self.groups.get(group.group_id) is group and not group.is_state(GroupState.DEAD):
                group.offsets.update(valid)
                group.offset_commit_order.update(dict.fromkeys(valid, order))
            for tp in valid:
                results[tp] = code
        return results

    async def store_txn_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartitionKey, OffsetAndMetadata],
    ) -> dict[TopicPartitionKey, int]:
        """Persist a TxnOffsetCommit as a transactional batch of ``producer_id`` and hold the
        offsets as pending until the transaction's marker (Kafka's ``storeOffsets`` with a
        producer id: ``prepareTxnOffsetCommit`` before the append, ``failPendingTxnOffsetCommit``
        if it fails); per-partition error codes."""
        results: dict[TopicPartitionKey, int] = {}
        valid: dict[TopicPartitionKey, OffsetAndMetadata] = {}
        for tp, value in offsets.items():
            if len(value.metadata.encode("utf-8")) > self.max_metadata_bytes:
                results[tp] = int(ErrorCode.offset_metadata_too_large)
            else:
                valid[tp] = value
        if not valid:
            return results
        partition = self.partition_for(group.group_id)
        if partition not in self.owned_partitions:
            return {**results, **dict.fromkeys(valid, int(ErrorCode.not_coordinator))}
        # hasattr: a capability of the appender (not every offsets appender writes transactions)
        if not hasattr(self.appender, "append_transactional"):
            raise TypeError(f"{type(self.appender).__name__} cannot append transactional batches")
        appender: TransactionalAppender = self.appender  # type: ignore[assignment]
        records: list[KeyValue] = [
            (encode_offset_commit_key(group.group_id, tp[0], tp[1]), encode_offset_commit_value(v))
            for tp, v in valid.items()
        ]
        order = next(self._commit_order)
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        entries = {tp: (value, order) for tp, value in valid.items()}
        pending.update(entries)
        code = await appender.append_transactional(
            GROUP_METADATA_TOPIC_NAME, partition, records, producer_id, producer_epoch, self.commit_timeout_ms
        )
        code = storage_error_to_coordinator_error(code)
        if code:
            logger.warning(
                "transactional offset commit of group %s (producer id %d) to %s-%d failed with error %d",
                group.group_id,
                producer_id,
                GROUP_METADATA_TOPIC_NAME,
                partition,
                code,
            )
            still = group.pending_txn_offsets.get(producer_id)
            if still is not None:
                for tp, entry in entries.items():
                    if still.get(tp) == entry:
                        del still[tp]
                if not still:
                    del group.pending_txn_offsets[producer_id]
        return {**results, **dict.fromkeys(valid, code)}

    def complete_transaction(self, partition: int, producer_id: int, committed: bool) -> int:
        """The marker of ``producer_id``'s transaction was written to
        ``__consumer_offsets-partition``: complete its pending offsets in the groups of that
        partition (Kafka's ``GroupMetadataManager.handleTxnCompletion``); returns how many."""
        completed = 0
        for group in list(self.groups.values()):
            if producer_id in group.pending_txn_offsets and self.partition_for(group.group_id) == partition:
                completed += group.complete_pending_txn_offsets(producer_id, committed)
        return completed

    async def delete_offsets(self, group: GroupMetadata, partitions: Iterable[TopicPartitionKey]) -> int:
        """Tombstone and forget committed offsets of ``partitions``; error code."""
        present = [tp for tp in partitions if tp in group.offsets]
        if not present:
            return 0
        code = await self._append(
            group.group_id, [(encode_offset_commit_key(group.group_id, t, p), None) for t, p in present]
        )
        if code == 0:
            # Appends to one partition complete in log order: a commit appended before these
            # tombstones is in the cache already and goes, one appended after lands after this.
            for tp in present:
                group.offsets.pop(tp, None)
                group.offset_commit_order.pop(tp, None)
        return code

    async def delete_group(self, group: GroupMetadata) -> int:
        """Tombstones for the group metadata and every offset, then drop it from the cache."""
        records: list[KeyValue] = [
            (encode_offset_commit_key(group.group_id, t, p), None) for t, p in group.offsets
        ]
        records.append((encode_group_metadata_key(group.group_id), None))
        if group.consumer is not None:
            records.extend(consumer_group_tombstones(group.group_id))
        code = await self._append(group.group_id, records)
        if code == 0:
            group.offsets.clear()
            group.offset_commit_order.clear()
            if group.consumer is not None:
                group.consumer.dead = True
            self.remove_group(group)
        return code

    def get_offsets(
        self, group_id: str, partitions: list[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, OffsetAndMetadata | None]:
        """Committed offsets of ``partitions`` (None = all the group has); None = no commit."""
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return {} if partitions is None else {tp: None for tp in partitions}
        if partitions is None:
            return dict(group.offsets)
        return {tp: group.offsets.get(tp) for tp in partitions}

    # -- load / unload --------------------------------------------------------------------------
    def begin_loading(self, partition: int, epoch: int) -> None:
        self.loading_partitions.add(partition)
        self.partition_epochs[partition] = epoch

    async def load_partition(
        self, partition: int, epoch: int, log: Any, on_group_loaded: Callable[[GroupMetadata], None]
    ) -> None:
        """Replay ``log`` (partition ``partition`` of ``__consumer_offsets``) into the cache.
        Abandoned (nothing loaded) if leadership moved on meanwhile (epoch changed)."""
        replay = _Replay()
        records = 0
        try:
            if log is not None:
                async for item in read_partition_with_markers(log, self.load_buffer_bytes):
                    if isinstance(item, LoadedMarker):
                        replay.marker(item.producer_id, item.committed)
                        continue
                    records += 1
                    self._replay(partition, item.key, item.value, item.producer_id, replay)
        except Exception:
            logger.exception("failed loading %s-%d", GROUP_METADATA_TOPIC_NAME, partition)
            if self.partition_epochs.get(partition) == epoch:
                self.loading_partitions.discard(partition)
            raise
        # No await from here to the end: the reader stopped right after finding itself caught up
        # with the log end, so a marker appended later is completed by ``complete_transaction``
        # on the groups installed below, and one appended earlier was replayed above.
        if self.partition_epochs.get(partition) != epoch or partition not in self.loading_partitions:
            logger.info("abandoned loading %s-%d (epoch %d)", GROUP_METADATA_TOPIC_NAME, partition, epoch)
            return
        loaded = 0
        offsets, groups = replay.offsets, replay.groups
        pending_groups = {g for per_producer in replay.pending.values() for g in per_producer}
        for group_id in set(offsets) | set(groups) | pending_groups | set(replay.consumer):
            if self.partition_for(group_id) != partition:
                continue
            record = groups.get(group_id)
            group_offsets = offsets.get(group_id, {})
            group_pending = {
                pid: per_group[group_id]
                for pid, per_group in replay.pending.items()
                if per_group.get(group_id)
            }
            consumer_replay = replay.consumer.get(group_id)
            consumer = None if consumer_replay is None else consumer_replay.build(group_id)
            if record is None and not group_offsets and not group_pending and consumer is None:
                continue  # deleted group
            group = self._group_from_record(group_id, record)
            if consumer is not None and not group.members:
                group.consumer = consumer
                group.protocol_type = "consumer"
            group.offsets = {tp: value for tp, (value, _order) in group_offsets.items()}
            group.offset_commit_order = {tp: order for tp, (_value, order) in group_offsets.items()}
            group.pending_txn_offsets = group_pending
            existing = self.groups.get(group_id)
            if existing is not None and existing is not group:
                logger.warning("replacing cached group %s while loading partition %d", group_id, partition)
            self.groups[group_id] = group
            loaded += 1
            on_group_loaded(group)
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        logger.info(
            "loaded %d group(s) from %d record(s) of %s-%d (leader epoch %d)",
            loaded,
            records,
            GROUP_METADATA_TOPIC_NAME,
            partition,
            epoch,
        )

    def _replay(
        self, partition: int, key: bytes, value: bytes | None, producer_id: int, replay: _Replay
    ) -> None:
        try:
            parsed = decode_key(key)
            if isinstance(parsed, OffsetCommitKey):
                if producer_id >= 0:  # a TxnOffsetCommit: waits for its transaction's marker
                    per_group = replay.pending.setdefault(producer_id, {}).setdefault(parsed.group, {})
                else:
                    per_group = replay.offsets.setdefault(parsed.group, {})
                tp = (parsed.topic, parsed.partition)
                if value is None:
                    per_group.pop(tp, None)
                else:
                    per_group[tp] = (decode_offset_commit_value(value), next(self._commit_order))
            elif isinstance(parsed, GroupMetadataKey):
                replay.groups[parsed.group] = None if value is None else decode_group_metadata_value(value)
            elif parsed is None and (consumer_key := decode_consumer_group_key(key)) is not None:
                replay.consumer.setdefault(consumer_key.group, ConsumerGroupReplay()).apply(
                    consumer_key, value
                )
        except RecordFormatError as exc:
            logger.warning(
                "skipping an unreadable record in %s-%d: %s", GROUP_METADATA_TOPIC_NAME, partition, exc
            )

    def _group_from_record(self, group_id: str, record: GroupMetadataRecord | None) -> GroupMetadata:
        now = self.now_ms()
        group = GroupMetadata(group_id, now)
        if record is None:
            return group
        group.generation_id = record.generation
        group.protocol_type = record.protocol_type or None
        group.protocol_name = record.protocol
        group.leader_id = record.leader
        if record.current_state_timestamp_ms >= 0:
            group.current_state_timestamp_ms = record.current_state_timestamp_ms
        for m in record.members:
            member = MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                group.protocol_type or "",
                [(record.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member)
        if group.members:
            group.state = GroupState.STABLE
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        return group

    def unload_partition(self, partition: int, on_group_unloaded: Callable[[GroupMetadata], None]) -> int:
        """Drop the groups of ``partition`` from the cache (each passed to ``on_group_unloaded``
        first); returns how many."""
        self.loading_partitions.discard(partition)
        self.owned_partitions.discard(partition)
        self.partition_epochs.pop(partition, None)
        removed = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) == partition:
                on_group_unloaded(group)
                del self.groups[group.group_id]
                removed += 1
        return removed
