"""Replica fetcher liveness (issue #14): a follower with an empty trailing leader epoch rejoins
its leader, the same diverging-epoch answer twice is not looped on silently, idle fetchers are
shut down safely by interleaved runs, and a fetcher task that dies is restarted.

Real UnifiedLogs and Partitions on tmp_path; the leader's answers come from its real
``Partition.read_records`` (no network: the fetcher's response handling is driven directly)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from broker.cluster.partition import Partition
from broker.controller.metadata_image import PartitionRegistration
from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from broker.replication.replica_fetcher import FetcherSettings, PartitionFetchState, ReplicaFetcher
from broker.replication.replica_fetcher_manager import ReplicaFetcherManager
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_response_encode import NO_DIVERGING_EPOCH, EpochEndOffset
from spark_kafkalite.protocol.fetch_session import PartitionFetchData
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(30)

KEY = ("t", 0)


def _batch(n: int = 1) -> bytearray:
    return bytearray(encode_batch([(None, b"v%d" % i, 1000, []) for i in range(n)]))


def _reg(leader: int, epoch: int) -> PartitionRegistration:
    return PartitionRegistration(0, (1, 2), (1, 2), leader, epoch, epoch)


def _partition(path: Path, broker_id: int) -> Partition:
    log = UnifiedLog(path / f"b{broker_id}" / "t-0", LogConfig())
    return Partition(
        "t", 0, None, broker_id, log, replica_lag_time_max_ms=10_000, isr_eligible=lambda b: True
    )


def _fetcher(follower: Partition, backoff_ms: int = 1000) -> ReplicaFetcher:
    return ReplicaFetcher(
        follower.local_broker_id,
        1,
        0,
        lambda broker_id: None,
        {KEY: follower}.get,
        FetcherSettings(backoff_ms=backoff_ms),
    )


async def _fetch_round(fetcher: ReplicaFetcher, leader: Partition, follower: Partition) -> Any:
    """One follower fetch answered by the leader's real read path, handled by the fetcher."""
    log = follower.log
    last_epoch = log.leader_epoch_cache.latest_epoch
    sent = PartitionFetchData(
        fetch_offset=log.log_end_offset,
        max_bytes=1 << 20,
        current_leader_epoch=follower.leader_epoch,
        log_start_offset=log.log_start_offset,
        last_fetched_epoch=-1 if last_epoch is None else last_epoch,
    )
    result = leader.read_records(
        sent.fetch_offset, sent.max_bytes, is_follower=True, last_fetched_epoch=sent.last_fetched_epoch
    )
    if result.diverging_epoch is None:
        leader.update_follower_fetch_state(follower.local_broker_id, sent.fetch_offset, 0)
    diverging = (
        NO_DIVERGING_EPOCH if result.diverging_epoch is None else EpochEndOffset(*result.diverging_epoch)
    )
    pd = SimpleNamespace(
        error_code=ErrorCode.none,
        diverging_epoch=diverging,
        records=result.info.records,
        high_watermark=leader.high_watermark,
        log_start_offset=result.log_start_offset,
    )
    await fetcher._process_partition(KEY, pd, sent)
    return result


async def _test_follower_with_an_empty_trailing_epoch_catches_up(tmp_path: Path) -> None:
    """Broker 2 led epoch 3 and appended nothing, then followed broker 1 (epoch 4): its cache
    ends ``2 s 3 LEO`` where the leader's ends ``2 s 4 LEO``. It must drop the stale entry and
    fetch on, not get the same diverging epoch forever (the chaos run's ~376k fetches)."""
    leader, follower = _partition(tmp_path, 1), _partition(tmp_path, 2)
    for epoch in (1, 2):
        for _ in range(3):
            batch = _batch(2)
            leader.log.append_as_leader(batch, epoch)
            follower.log.append_as_follower(bytes(batch))
    leo = leader.log.log_end_offset
    follower.make_leader(_reg(2, 3))  # assigns (3, LEO) and appends nothing
    follower.make_follower(_reg(1, 4))
    leader.make_leader(_reg(1, 4))
    leader.append_records_to_leader(_batch(3), 1)
    assert follower.log.leader_epoch_cache.entries()[-1] == (3, leo)
    fetcher = _fetcher(follower)
    fetcher.partitions[KEY] = state = PartitionFetchState("t", 0, 4)

    first = await _fetch_round(fetcher, leader, follower)
    assert first.diverging_epoch == (2, leo)
    assert follower.log.leader_epoch_cache.latest_epoch == 2  # the empty epoch 3 is gone
    second = await _fetch_round(fetcher, leader, follower)
    assert second.diverging_epoch is None
    assert follower.log.log_end_offset == leader.log.log_end_offset
    assert follower.log.leader_epoch_cache.entries() == leader.log.leader_epoch_cache.entries()
    assert state.diverging_repeats == 0 and state.delayed_until == 0.0


def test_follower_with_an_empty_trailing_epoch_catches_up(tmp_path: Path) -> None:
    asyncio.run(_test_follower_with_an_empty_trailing_epoch_catches_up(tmp_path))


async def _test_same_diverging_answer_twice_falls_back_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    follower = _partition(tmp_path, 2)
    for epoch in (1, 2):
        follower.log.append_as_leader(_batch(5), epoch)
    follower.make_follower(_reg(1, 4))
    follower.log.update_high_watermark(7)
    fetcher = _fetcher(follower)
    fetcher.partitions[KEY] = state = PartitionFetchState("t", 0, 4)
    sent = PartitionFetchData(10, 1 << 20, 4, 0, 2)
    # A leader that keeps answering (2, 10) although our epoch 2 already ends at 10.
    pd = SimpleNamespace(
        error_code=ErrorCode.none,
        diverging_epoch=SimpleNamespace(epoch=2, end_offset=10),
        records=b"",
        high_watermark=7,
        log_start_offset=0,
    )
    await fetcher._process_partition(KEY, pd, sent)
    assert follower.log.log_end_offset == 10 and state.diverging_repeats == 0
    with caplog.at_level(logging.ERROR, logger="broker.replication.fetcher_truncation"):
        await fetcher._process_partition(KEY, pd, sent)
    assert state.diverging_repeats == 1
    assert any("twice" in r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert follower.log.log_end_offset == 5  # fell back to HW 7: its batch 5-9 goes whole
    assert state.delayed_until > 0  # backed off


def test_same_diverging_answer_twice_falls_back_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    asyncio.run(_test_same_diverging_answer_twice_falls_back_loudly(tmp_path, caplog))


async def _test_interleaved_idle_fetcher_shutdowns_do_not_race(tmp_path: Path) -> None:
    """Two runs of shutdown_idle_fetchers interleaving at their awaits once raised
    ``KeyError((1, 0))``."""
    manager = ReplicaFetcherManager(3, 1, FetcherSettings(backoff_ms=50), lambda b: None, lambda k: None)
    manager.add_fetcher_for_partitions({("a", 0): (1, 0), ("b", 0): (2, 0)})
    assert set(manager.fetchers) == {(1, 0), (2, 0)}
    fetchers = list(manager.fetchers.values())
    manager.remove_fetcher_for_partitions([("a", 0), ("b", 0)])
    await asyncio.gather(manager.shutdown_idle_fetchers(), manager.shutdown_idle_fetchers())
    assert manager.fetchers == {}
    assert all(f._task is None for f in fetchers)
    # A partition moved back to a leader whose fetcher was just shut down gets a new fetcher.
    manager.add_fetcher_for_partitions({("a", 0): (1, 1)})
    assert manager.fetchers[(1, 0)] not in fetchers
    await manager.shutdown()


def test_interleaved_idle_fetcher_shutdowns_do_not_race(tmp_path: Path) -> None:
    asyncio.run(_test_interleaved_idle_fetcher_shutdowns_do_not_race(tmp_path))


async def _test_a_fetcher_task_that_dies_is_restarted(tmp_path: Path) -> None:
    manager = ReplicaFetcherManager(3, 1, FetcherSettings(backoff_ms=50), lambda b: None, lambda k: None)
    manager.add_fetcher_for_partitions({("a", 0): (1, 0)})
    fetcher = manager.fetchers[(1, 0)]
    dead = fetcher._task
    assert dead is not None
    dead.cancel()  # not by shutdown(): the task "dies"
    for _ in range(100):
        await asyncio.sleep(0.01)
        if fetcher._task is not None and fetcher._task is not dead:
            break
    assert fetcher.restarts == 1
    assert fetcher._task is not None and not fetcher._task.done()
    await manager.shutdown()
    await asyncio.sleep(0.1)
    assert fetcher._task is None and fetcher.restarts == 1  # a shut-down fetcher stays down


def test_a_fetcher_task_that_dies_is_restarted(tmp_path: Path) -> None:
    asyncio.run(_test_a_fetcher_task_that_dies_is_restarted(tmp_path))


def test_an_under_replicated_partition_that_does_not_heal_is_logged_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from broker.config import KafkaConfig
    from broker.replication.replica_manager import ReplicaManager

    now = [1_000_000]
    config = KafkaConfig(
        {
            "node.id": "1",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(tmp_path),
            "replica.lag.time.max.ms": "2000",
        }
    )
    manager = ReplicaManager(
        config, 1, None, None, image=lambda: None, controller=lambda: None, time_ms=lambda: now[0]
    )  # type: ignore[arg-type]
    leader = _partition(tmp_path, 1)
    manager._register(leader)
    leader.make_leader(PartitionRegistration(0, (1, 2, 3), (1, 2), 1, 5, 5))
    assert manager.isr_changes.urp_warn_after_ms == 10_000
    with caplog.at_level(logging.WARNING, logger="broker.replication.isr_change_manager"):
        assert manager.isr_changes.check_under_replicated() == []  # just became under-replicated
        now[0] += 9_000
        assert manager.isr_changes.check_under_replicated() == []
        now[0] += 1_000
        assert manager.isr_changes.check_under_replicated() == [KEY]
        assert "UNDER-REPLICATED for 10.0 s" in caplog.text and "replicas [1, 2, 3]" in caplog.text
        now[0] += 5_000
        assert manager.isr_changes.check_under_replicated() == []  # not again before another 10 s
        now[0] += 5_000
        assert manager.isr_changes.check_under_replicated() == [KEY]
        leader.make_leader(PartitionRegistration(0, (1, 2, 3), (1, 2, 3), 1, 5, 6))
        assert manager.isr_changes.check_under_replicated() == []
        assert "healed" in caplog.text


def _isr_expiration_rounds(path: Path, count: int, visits: list[tuple[str, int]]) -> None:
    from broker.config import KafkaConfig
    from broker.replication.replica_manager import ReplicaManager

    now = [1_000_000]
    config = KafkaConfig(
        {
            "node.id": "1",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(path),
            "replica.lag.time.max.ms": "2000",
        }
    )
    manager = ReplicaManager(
        config, 1, None, None, image=lambda: None, controller=lambda: None, time_ms=lambda: now[0]
    )  # type: ignore[arg-type]
    shrunk: list[tuple[tuple[str, int], tuple[int, ...]]] = []
    manager.isr_changes.alter_isr = lambda p, isr, reason: shrunk.append((p.key, isr))  # type: ignore[method-assign]
    leaders = []
    for i in range(count):
        log = UnifiedLog(path / f"t-{i}", LogConfig())
        p = Partition("t", i, None, 1, log, replica_lag_time_max_ms=2000, time_ms=lambda: now[0])
        manager._register(p)
        p.make_leader(PartitionRegistration(i, (1, 2, 3), (1, 2, 3), 1, 1, 1))
        for follower in (2, 3):
            p.update_follower_fetch_state(follower, 0, 0)
        leaders.append(p)

    def round_() -> None:
        visits.clear()
        manager.isr_changes.maybe_shrink_isr()
        manager.isr_changes.check_under_replicated()
        manager.isr_changes.forget_settled()

    round_()
    assert len(visits) == count  # the new leaderships: each looked at once
    round_()
    assert visits == []
    leaders[3].append_records_to_leader(_batch(), required_acks=1)
    round_()
    assert visits == [("t", 3)] and shrunk == []
    leaders[3].update_follower_fetch_state(2, 1, 0)  # broker 2 catches up, 3 does not
    now[0] += 2_001
    round_()
    assert visits == [("t", 3)] and shrunk == [(("t", 3), (1, 2))]
    leaders[3].update_follower_fetch_state(3, 1, 0)
    round_()
    round_()
    assert visits == []


def test_isr_expiration_visits_only_partitions_whose_log_or_isr_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ISR expiration costs in proportion to what changed, not to the partitions led here
    (issue #19): with 10 or 200 partitions, once every follower fetched to the log end a round
    visits none; an append visits that partition until its followers catch up; a follower that
    stays behind past replica.lag.time.max.ms still leaves the ISR."""
    visits: list[tuple[str, int]] = []
    out_of_sync = Partition.out_of_sync_replicas

    def counting(self: Partition, now_ms: int | None = None) -> list[int]:
        visits.append(self.key)
        return out_of_sync(self, now_ms)

    monkeypatch.setattr(Partition, "out_of_sync_replicas", counting)
    for count in (10, 200):
        _isr_expiration_rounds(tmp_path / str(count), count, visits)
