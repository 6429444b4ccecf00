"""The two append paths to ``__consumer_offsets`` (local-log adapter and ReplicaManager) and
replaying a real partition log into groups and offsets."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker.coordinator.group.offsets_log import (
    LocalLogAppender,
    ReplicaManagerAppender,
    appender_for,
    read_partition,
)
from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from broker.replication.delayed_fetch import FetchPurgatory
from spark_kafkalite.protocol.errors import ErrorCode, NotLeaderOrFollowerError
from spark_kafkalite.protocol.group_records import OffsetAndMetadata

TOPIC = "__consumer_offsets"


@dataclass
class _Registration:
    leader_epoch: int = 4


class _Ctx:
    def __init__(self, log: UnifiedLog | None) -> None:
        self.log = log
        self.fetch_purgatory = FetchPurgatory()
        self.replica_manager = None

    def leader_log(self, topic: str, partition: int) -> tuple[_Registration, UnifiedLog]:
        if self.log is None:
            raise NotLeaderOrFollowerError(f"not the leader of {topic}-{partition}")
        return _Registration(), self.log


@dataclass
class _Result:
    error_code: int


class _ReplicaManager:
    def __init__(self, code: int) -> None:
        self.code = code
        self.calls: list[tuple[Any, int, int, bool]] = []

    async def append_records(
        self, entries: Any, required_acks: int, timeout_ms: int, *, internal: bool = False
    ) -> Any:
        self.calls.append((list(entries), required_acks, timeout_ms, internal))
        return {key: _Result(self.code) for key in entries}


def test_local_adapter_appends_and_advances_the_high_watermark(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / f"{TOPIC}-0", LogConfig(cleanup_policy=("compact",)))
    ctx = _Ctx(log)
    appender = LocalLogAppender(ctx)
    assert appender_for(ctx).__class__ is LocalLogAppender
    code = asyncio.run(appender.append(TOPIC, 0, [(b"k1", b"v1"), (b"k2", None)], 5000))
    assert code == 0
    assert log.log_end_offset == 2 and log.high_watermark == 2

    async def collect() -> list[tuple[bytes, bytes | None]]:
        return [kv async for kv in read_partition(log)]

    assert asyncio.run(collect()) == [(b"k1", b"v1"), (b"k2", None)]
    assert (
        asyncio.run(LocalLogAppender(_Ctx(None)).append(TOPIC, 0, [(b"k", b"v")], 5000))
        == ErrorCode.not_leader_or_follower
    )


def test_replica_manager_path_uses_acks_all_and_internal() -> None:
    ctx = _Ctx(None)
    ctx.replica_manager = _ReplicaManager(0)  # type: ignore[assignment]
    appender = appender_for(ctx)
    assert isinstance(appender, ReplicaManagerAppender)
    assert asyncio.run(appender.append(TOPIC, 2, [(b"k", b"v")], 1234)) == 0
    assert ctx.replica_manager.calls == [([(TOPIC, 2)], -1, 1234, True)]  # type: ignore[attr-defined]


def test_append_errors_become_coordinator_errors() -> None:
    async def scenario(code: int) -> int:
        ctx = _Ctx(None)
        ctx.replica_manager = _ReplicaManager(code)  # type: ignore[assignment]
        manager = GroupMetadataManager(1, appender_for(ctx), lambda: 0)
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
    path = tmp_path / f"{TOPIC}-0"
    log = UnifiedLog(path, LogConfig(cleanup_policy=("compact",)))
    ctx = _Ctx(log)

    async def write() -> None:
        manager = GroupMetadataManager(1, LocalLogAppender(ctx), lambda: 1000)
        manager.owned_partitions.add(0)
        group = manager.get_or_create_group("g", create=True)
        assert group is not None
        await manager.store_offsets(
            group, {("t", 0): OffsetAndMetadata(5, 2, "a", 1000), ("t", 1): OffsetAndMetadata(6)}
        )
        await manager.store_offsets(group, {("t", 0): OffsetAndMetadata(8, 3, "b", 1001)})
        await manager.delete_offsets(group, [("t", 1)])

    asyncio.run(write())
    log.close()
    reopened = UnifiedLog(path, LogConfig(cleanup_policy=("compact",)))

    async def load() -> GroupMetadataManager:
        manager = GroupMetadataManager(1, LocalLogAppender(_Ctx(reopened)), lambda: 2000)
        manager.begin_loading(0, 1)
        await manager.load_partition(0, 1, reopened, lambda g: None)
        return manager

    manager = asyncio.run(load())
    group = manager.get_group("g")
    assert group is not None and group.offsets == {("t", 0): OffsetAndMetadata(8, 3, "b", 1001)}
    assert manager.owned_partitions == {0} and not manager.loading_partitions
