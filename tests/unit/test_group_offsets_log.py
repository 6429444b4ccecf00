"""The append path to ``__consumer_offsets`` (``ReplicaManager.append_records``, acks=all,
internal) and replaying a real partition log into groups and offsets.

A real :class:`ReplicaManager` over a real :class:`LogManager` on tmp_path leads an ISR-of-one
``__consumer_offsets-0`` (the single-node case of the one production path); the error mapping
uses a ReplicaManager stand-in answering fixed error codes (pure logic of the mapping)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.config import KafkaConfig
from broker.controller.metadata_image import MetadataDelta, MetadataImage, PartitionRegistration, TopicImage
from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker.coordinator.group.offsets_log import ReplicaManagerAppender, read_partition
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.replication.delayed_fetch import FetchPurgatory
from broker.replication.replica_manager import ReplicaManager
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.group_records import OffsetAndMetadata

TOPIC = "__consumer_offsets"


def _replica_manager(log_dir: Path, leader: int = 1) -> ReplicaManager:
    """Node 1 hosting ``__consumer_offsets-0`` (replicas (1,), led by ``leader``, epoch 4)."""
    config = KafkaConfig(
        {
            "node.id": "1",
            "process.roles": "broker,controller",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
        }
    )
    log_manager = LogManager([log_dir], LogConfig(cleanup_policy=("compact",)))
    log_manager.startup()
    registration = PartitionRegistration(0, (1,), (1,), leader, 4, 4)
    topic = TopicImage(TOPIC, uuid.UUID(int=7), {0: registration})
    image = MetadataImage("cluster", 1, topics={TOPIC: topic})
    replica_manager = ReplicaManager(
        config, 1, log_manager, FetchPurgatory(), image=lambda: image, controller=lambda: None
    )
    replica_manager.apply_delta(
        image, MetadataDelta(created_topics=(topic,), changed_partitions=((TOPIC, registration),))
    )
    return replica_manager


@dataclass
class _Result:
    error_code: int


class _FixedAnswers:
    """Answers every ``append_records`` with one error code and records the call."""

    def __init__(self, code: int) -> None:
        self.code = code
        self.calls: list[tuple[Any, int, int, bool]] = []

    async def append_records(
        self, entries: Any, required_acks: int, timeout_ms: int, *, internal: bool = False
    ) -> Any:
        self.calls.append((list(entries), required_acks, timeout_ms, internal))
        return {key: _Result(self.code) for key in entries}


def test_appends_through_the_replica_manager_and_reads_back(tmp_path: Path) -> None:
    replica_manager = _replica_manager(tmp_path)
    partition = replica_manager.partition(TOPIC, 0)
    assert partition is not None
    log = partition.log

    async def scenario() -> tuple[int, list[tuple[bytes, bytes | None]]]:
        code = await ReplicaManagerAppender(replica_manager).append(
            TOPIC, 0, [(b"k1", b"v1"), (b"k2", None)], 5000
        )
        return code, [kv async for kv in read_partition(log)]

    code, records = asyncio.run(scenario())
    assert code == 0
    assert log.log_end_offset == 2 and log.high_watermark == 2
    assert records == [(b"k1", b"v1"), (b"k2", None)]


def test_append_where_not_leader_is_an_error_code(tmp_path: Path) -> None:
    replica_manager = _replica_manager(tmp_path, leader=-1)  # leaderless: no fetcher
    code = asyncio.run(ReplicaManagerAppender(replica_manager).append(TOPIC, 0, [(b"k", b"v")], 5000))
    assert code == ErrorCode.not_leader_or_follower


def test_appends_use_acks_all_and_internal() -> None:
    replica_manager = _FixedAnswers(0)
    assert asyncio.run(ReplicaManagerAppender(replica_manager).append(TOPIC, 2, [(b"k", b"v")], 1234)) == 0
    assert replica_manager.calls == [([(TOPIC, 2)], -1, 1234, True)]


def test_append_errors_become_coordinator_errors() -> None:
    async def scenario(code: int) -> int:
        manager = GroupMetadataManager(1, ReplicaManagerAppender(_FixedAnswers(code)), lambda: 0)
        manager.owned_partitions.add(0)
        group = manager.get_or_create_group("g", create=True)
        assert group is not None
        result = await manager.store_offsets(group, {("t", 0): OffsetAndMetadata(1)})
        return result[("t", 0)]

    assert asyncio.run(scenario(ErrorCode.not_enough_replicas)) == ErrorCode.coordinator_not_available
    assert asyncio.run(scenario(ErrorCode.request_timed_out)) == ErrorCode.coordinator_not_available
    assert asyncio.run(scenario(ErrorCode.not_leader_or_follower)) == ErrorCode.not_coordinator
    assert asyncio.run(scenario(ErrorCode.message_too_large)) == ErrorCode.unknown_server_error


def test_reload_from_a_real_log_after_reopen(tmp_path: Path) -> None:
    replica_manager = _replica_manager(tmp_path)

    async def write() -> None:
        manager = GroupMetadataManager(1, ReplicaManagerAppender(replica_manager), lambda: 1000)
        manager.owned_partitions.add(0)
        group = manager.get_or_create_group("g", create=True)
        assert group is not None
        await manager.store_offsets(
            group, {("t", 0): OffsetAndMetadata(5, 2, "a", 1000), ("t", 1): OffsetAndMetadata(6)}
        )
        await manager.store_offsets(group, {("t", 0): OffsetAndMetadata(8, 3, "b", 1001)})
        await manager.delete_offsets(group, [("t", 1)])

    asyncio.run(write())
    replica_manager.log_manager.shutdown()
    reopened = _replica_manager(tmp_path)
    partition = reopened.partition(TOPIC, 0)
    assert partition is not None and partition.log.log_end_offset > 0

    async def load() -> GroupMetadataManager:
        manager = GroupMetadataManager(1, ReplicaManagerAppender(reopened), lambda: 2000)
        manager.begin_loading(0, 1)
        await manager.load_partition(0, 1, partition.log, lambda g: None)
        return manager

    manager = asyncio.run(load())
    group = manager.get_group("g")
    assert group is not None and group.offsets == {("t", 0): OffsetAndMetadata(8, 3, "b", 1001)}
    assert manager.owned_partitions == {0} and not manager.loading_partitions
