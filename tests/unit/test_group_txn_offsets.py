"""Transactional offset commits in the group coordinator (TxnOffsetCommit, KIP-98 / KIP-447):
pending per producer until the marker, visible on COMMIT, dropped on ABORT, UNSTABLE for
require_stable readers, and the same outcome when ``__consumer_offsets`` is loaded from the log
(pure logic: an in-memory log, no sockets)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator
from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker.coordinator.group.scheduler import ManualScheduler
from broker.log.log_results import FetchDataInfo
from spark_kafkalite.protocol.control_records import end_txn_marker_batch
from spark_kafkalite.protocol.errors import ErrorCode as E
from spark_kafkalite.protocol.group_records import OffsetAndMetadata
from spark_kafkalite.protocol.record_batch_writer import encode_batch

G = "g"
TP = ("t", 0)


class MemoryLog:
    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start_offset = 0
        self.log_end_offset = 0

    def add(self, batch: bytes, count: int) -> None:
        self.batches.append(batch)
        self.log_end_offset += count

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FetchDataInfo:
        data = b"".join(self.batches)
        return FetchDataInfo(data, offset if data else -1)


class TxnAppender:
    def __init__(self) -> None:
        self.log = MemoryLog()
        self.fail_next = 0

    async def append(
        self, topic: str, partition: int, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int
    ) -> int:
        return await self.append_transactional(topic, partition, records, -1, -1, timeout_ms)

    async def append_transactional(
        self,
        topic: str,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        producer_id: int,
        producer_epoch: int,
        timeout_ms: int,
    ) -> int:
        self.log.add(
            encode_batch(
                [(k, v, 0, []) for k, v in records],
                base_offset=self.log.log_end_offset,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=0 if producer_id >= 0 else -1,
                is_transactional=producer_id >= 0,
            ),
            len(records),
        )
        await asyncio.sleep(0)
        if self.fail_next:
            code, self.fail_next = self.fail_next, 0
            return code
        return 0

    def marker(self, producer_id: int, commit: bool) -> None:
        self.log.add(
            end_txn_marker_batch(producer_id, 0, commit, 0, 0, base_offset=self.log.log_end_offset), 1
        )


def coordinator(appender: TxnAppender) -> GroupCoordinator:
    scheduler = ManualScheduler()
    c = GroupCoordinator(GroupMetadataManager(1, appender, scheduler.now_ms), scheduler, GroupConfig())
    c.startup()
    return c


async def load(c: GroupCoordinator, log: MemoryLog, epoch: int = 0) -> None:
    task = c.on_elected(0, epoch, log)
    assert task is not None
    await task


def fetch(c: GroupCoordinator) -> tuple[int | None, bool]:
    _error, offsets = c.offsets.handle_fetch_offsets(G, [TP])
    value = offsets[TP]
    return (None if value is None else value.offset), TP in c.offsets.unstable_partitions(G, [TP])


def test_commit_abort_and_replay() -> None:
    async def scenario() -> None:
        appender = TxnAppender()
        c = coordinator(appender)
        await load(c, appender.log)
        commit = c.offsets.handle_txn_commit_offsets
        assert await commit(G, 7, 0, "", None, 3, {TP: OffsetAndMetadata(5)}) == {TP: E.illegal_generation}
        assert await commit(G, 7, 0, "", None, -1, {TP: OffsetAndMetadata(5, metadata="m")}) == {TP: 0}
        assert fetch(c) == (None, True)  # pending: invisible, unstable
        assert c.complete_transaction(0, 7, 0, True) == 1
        appender.marker(7, True)
        assert fetch(c) == (5, False)
        assert await commit(G, 8, 0, "", None, -1, {TP: OffsetAndMetadata(9)}) == {TP: 0}
        assert c.complete_transaction(1, 8, 0, False) == 0  # another offsets partition: not ours
        assert c.complete_transaction(0, 8, 0, False) == 1
        appender.marker(8, False)
        assert fetch(c) == (5, False)
        # a plain commit written after a transactional one wins when the later COMMIT arrives
        assert await commit(G, 9, 0, "", None, -1, {TP: OffsetAndMetadata(11)}) == {TP: 0}
        assert await c.offsets.handle_commit_offsets(G, "", None, -1, {TP: OffsetAndMetadata(12)}) == {TP: 0}
        assert fetch(c) == (12, True)
        c.complete_transaction(0, 9, 0, True)
        appender.marker(9, True)
        assert fetch(c) == (12, False)
        # a transaction still open at failover stays pending after the load, then commits
        assert await commit(G, 10, 0, "", None, -1, {TP: OffsetAndMetadata(20)}) == {TP: 0}
        fresh = coordinator(appender)
        await load(fresh, appender.log)
        assert fetch(fresh) == (12, True)
        appender.marker(10, True)
        assert fresh.complete_transaction(0, 10, 0, True) == 1
        assert fetch(fresh) == (20, False)
        again = coordinator(appender)  # the full log replays to the same result
        await load(again, appender.log)
        assert fetch(again) == (20, False)
        group = again.manager.get_group(G)
        assert group is not None and group.pending_txn_offsets == {}
        assert group.offsets[TP].metadata == ""

    asyncio.run(scenario())


def test_failed_append_and_metadata_too_large() -> None:
    async def scenario() -> None:
        appender = TxnAppender()
        c = coordinator(appender)
        await load(c, appender.log)
        appender.fail_next = int(E.not_enough_replicas)
        result = await c.offsets.handle_txn_commit_offsets(G, 7, 0, "", None, -1, {TP: OffsetAndMetadata(5)})
        assert result == {TP: E.coordinator_not_available}
        assert fetch(c) == (None, False)
        big = OffsetAndMetadata(5, metadata="x" * 5000)
        result = await c.offsets.handle_txn_commit_offsets(G, 7, 0, "", None, -1, {TP: big})
        assert result == {TP: E.offset_metadata_too_large}

    asyncio.run(scenario())


def test_marker_written_while_the_new_leader_loads() -> None:
    """A COMMIT marker appended to ``__consumer_offsets`` while the new leader's load is paused
    between chunks (past the log end the load first read) commits the pending offsets: the load
    reads the log end again until it is caught up (issue #12 review: they stayed pending
    forever, RequireStable fetches UNSTABLE_OFFSET_COMMIT)."""

    async def scenario() -> None:
        appender = TxnAppender()
        old = coordinator(appender)
        await load(old, appender.log)
        result = await old.offsets.handle_txn_commit_offsets(
            G, 7, 0, "", None, -1, {TP: OffsetAndMetadata(5)}
        )
        assert result == {TP: 0}
        new = coordinator(appender)  # leadership moves: the new leader loads the same log
        task = new.on_elected(0, 1, appender.log)
        assert task is not None
        await asyncio.sleep(0)  # the load has read up to the log end and yields
        assert new.manager.is_group_loading(G)
        appender.marker(7, True)  # WriteTxnMarkers reaches the new leader now
        assert new.complete_transaction(0, 7, 0, True) == 0  # no group cached yet
        await task
        assert fetch(new) == (5, False)
        group = new.manager.get_group(G)
        assert group is not None and group.pending_txn_offsets == {}

    asyncio.run(scenario())
