"""fsync policy and recovery points: background flushes after rolls and at ``flush.ms`` (injected
clock), the recovery-point checkpoint, what a restart rescans after a crash vs a clean
shutdown, and rebuilding corrupt or missing indexes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from broker.log import log_file_writer
from broker.log import log_manager as log_manager_module
from broker.log.checkpoints import (
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    read_offset_checkpoint,
)
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.log_segment import SEGMENT_READ_STATS, LogSegment
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.record_batch import decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=256)


class Clock:
    def __init__(self, now_ms: int = 1_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def batch(i: int) -> bytearray:
    return bytearray(encode_batch([(b"k%d" % i, bytes(60), 1000 + i, []) for _ in range(3)]))


def offsets_of(log: UnifiedLog) -> list[int]:
    return [o for b in decode_batches(log.read(log.log_start_offset, 10**7).records) for o in b.offsets]


def count_recover_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = LogSegment.recover

    def counting(self: LogSegment) -> int:
        calls.append(self.base_offset)
        return original(self)

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls


def crash(mgr: LogManager) -> None:
    """What a kill -9 leaves: files as written (they are in the page cache), no shutdown, no
    clean-shutdown marker, no final index entries. The old manager is simply abandoned."""
    del mgr


def test_roll_schedules_a_background_flush_that_advances_the_recovery_point(tmp_path: Path) -> None:
    clock = Clock()
    mgr = LogManager([tmp_path], CONFIG, time_ms=clock)
    mgr.startup()
    log = mgr.get_or_create_log("t", 0, uuid.uuid4())
    for i in range(40):
        log.append_as_leader(batch(i), 0)
    assert len(log.segments) >= 4 and log.recovery_point == 0
    assert log.flush_target() == log.active_segment.base_offset
    assert asyncio.run(mgr.flush_logs_due()) == 1
    assert log.recovery_point == log.active_segment.base_offset
    mgr.flush_file_writes()  # the checkpoint file is written on the file-writer thread
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT_FILE) == {("t", 0): log.recovery_point}
    assert log.flush_target() is None and asyncio.run(mgr.flush_logs_due()) == 0
    mgr.shutdown()


def test_flush_ms_by_the_clock(tmp_path: Path) -> None:
    clock = Clock()
    mgr = LogManager([tmp_path], LogConfig(flush_ms=5000), time_ms=clock)
    mgr.startup()
    log = mgr.get_or_create_log("f", 0, uuid.uuid4())
    log.append_as_leader(batch(0), 0)
    clock.now_ms += 4999
    assert asyncio.run(mgr.flush_logs_due()) == 0 and log.recovery_point == 0
    clock.now_ms += 1
    assert asyncio.run(mgr.flush_logs_due()) == 1 and log.recovery_point == log.log_end_offset == 3
    log.append_as_leader(batch(1), 0)
    clock.now_ms += 4000
    assert asyncio.run(mgr.flush_logs_due()) == 0  # 4 s since the last flush
    clock.now_ms += 1000
    assert asyncio.run(mgr.flush_logs_due()) == 1 and log.recovery_point == 6
    # nothing new: nothing to flush, however long it has been
    clock.now_ms += 60_000
    assert asyncio.run(mgr.flush_logs_due()) == 0
    mgr.shutdown()


def test_idle_periodic_passes_cost_nothing_however_many_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Periodic log work follows what changed, not the logs held (issue #19): with 10 or 300
    logs the flush pass visits only the log that rolled, then none; a checkpoint whose offsets
    did not change is not rewritten (the high-watermark one not even snapshotted), one that did
    is; the log cleaner's candidates are the compacted logs only."""
    visits: list[str] = []
    flush_target = UnifiedLog.flush_target

    def counting_flush_target(self: UnifiedLog) -> int | None:
        visits.append(self.dir.name)
        return flush_target(self)

    writes: list[str] = []
    write = log_manager_module.write_offset_checkpoint

    def counting_write(path: Path, offsets: Any, *, sync: bool = False) -> None:
        writes.append(Path(path).name)
        write(path, offsets, sync=sync)

    monkeypatch.setattr(UnifiedLog, "flush_target", counting_flush_target)
    monkeypatch.setattr(log_manager_module, "write_offset_checkpoint", counting_write)
    for count in (10, 300):
        mgr = LogManager([tmp_path / str(count)], CONFIG, time_ms=Clock())
        mgr.startup()
        topic_id = uuid.uuid4()
        logs = [mgr.get_or_create_log("t", p, topic_id) for p in range(count)]
        for i in range(40):
            logs[0].append_as_leader(batch(i), 0)  # rolls: a background flush is due
        logs[1].append_as_leader(batch(0), 0)  # no roll, no flush.ms: nothing due
        visits.clear()
        assert asyncio.run(mgr.flush_logs_due()) == 1 and visits == ["t-0"]
        visits.clear()
        assert asyncio.run(mgr.flush_logs_due()) == 0 and visits == []
        for checkpoint in (mgr.checkpoint_high_watermarks, mgr.checkpoint_log_start_offsets):
            checkpoint()
        mgr.flush_file_writes()
        writes.clear()
        for _ in range(3):
            mgr.checkpoint_high_watermarks()
            mgr.checkpoint_recovery_points()
            mgr.checkpoint_log_start_offsets()
        mgr.flush_file_writes()
        assert writes == []
        snapshots: list[str] = []
        offsets_in = mgr._offsets_in
        mgr._offsets_in = lambda log_dir, field, seen=snapshots, read=offsets_in: (  # type: ignore[method-assign]
            seen.append(field) or read(log_dir, field)
        )
        mgr.checkpoint_high_watermarks()
        assert snapshots == []  # no high watermark moved: not even a snapshot
        logs[1].update_high_watermark(3)
        mgr.checkpoint_high_watermarks()
        assert snapshots == ["high_watermark"]
        mgr.checkpoint_recovery_points()
        mgr.flush_file_writes()
        assert writes == [REPLICATION_OFFSET_CHECKPOINT_FILE]
        assert (
            read_offset_checkpoint(tmp_path / str(count) / REPLICATION_OFFSET_CHECKPOINT_FILE)[("t", 1)] == 3
        )
        # the log cleaner's candidates: compacted logs only
        assert mgr.compacted_logs() == {}
        compacted = mgr.get_or_create_log("c", 0, uuid.uuid4())
        mgr.update_topic_config("c", LogConfig(cleanup_policy=("compact",)))
        assert mgr.compacted_logs() == {("c", 0): compacted}
        mgr.remove_topic_config("c")
        assert mgr.compacted_logs() == {}
        mgr.shutdown()


def test_crash_rescans_only_segments_from_the_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    log = mgr.get_or_create_log("t", 0, uuid.uuid4())
    for i in range(60):
        log.append_as_leader(batch(i), 0)
    asyncio.run(mgr.flush_logs_due())
    mgr.flush_file_writes()  # the kill comes after the checkpoint reached its file (writer thread)
    flushed_to = log.recovery_point
    for i in range(60, 64):  # unflushed appends in the active segment
        log.append_as_leader(batch(i), 0)
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    crash(mgr)
    calls = count_recover_calls(monkeypatch)
    again = LogManager([tmp_path], CONFIG)
    again.startup()
    assert not again.had_clean_shutdown
    assert calls == [b for b in bases if b >= flushed_to] and len(calls) < len(bases) // 2
    reloaded = again.get_log("t", 0)
    assert reloaded is not None and reloaded.log_end_offset == end
    assert offsets_of(reloaded) == list(range(end))
    again.shutdown()
    # clean shutdown: no rescan at all, and only index sanity reads of the .log files
    calls.clear()
    SEGMENT_READ_STATS.reset()
    third = LogManager([tmp_path], CONFIG)
    third.startup()
    assert calls == [] and third.had_clean_shutdown
    total = sum(s.size_bytes for s in third.get_log("t", 0).segments)  # type: ignore[union-attr]
    assert SEGMENT_READ_STATS.bytes_read < total / 3
    third.shutdown()


@pytest.mark.parametrize(
    "damage", ["missing-index", "missing-timeindex", "garbage-index", "wrong-last-entry"]
)
def test_corrupt_or_missing_indexes_are_rebuilt(tmp_path: Path, damage: str) -> None:
    config = LogConfig(segment_bytes=4000, index_interval_bytes=100)
    log = UnifiedLog(tmp_path / "t-0", config)
    for i in range(60):
        log.append_as_leader(batch(i), 0)
    expected = offsets_of(log)
    lookups = {ts: log.fetch_offset_by_timestamp(ts) for ts in (0, 1010, 1030, 1059)}
    log.close()
    part = tmp_path / "t-0"
    first = sorted(part.glob("*.index"))[0]
    if damage == "missing-index":
        first.unlink()
    elif damage == "missing-timeindex":
        first.with_suffix(".timeindex").unlink()
    elif damage == "garbage-index":
        first.write_bytes(b"\xff" * 24)  # positions far past the end of the log
    else:
        raw = bytearray(first.read_bytes())
        raw[-8:-4] = (int.from_bytes(raw[-8:-4], "big") + 1).to_bytes(4, "big")  # off by one
        first.write_bytes(bytes(raw))
    again = UnifiedLog(part, config)
    assert again.segments[0].rebuilt_indexes
    assert not any(s.rebuilt_indexes for s in again.segments[1:])
    assert offsets_of(again) == expected
    for offset in range(0, 180, 7):
        assert offsets_of_read(again, offset)[0] <= offset
    assert {ts: again.fetch_offset_by_timestamp(ts) for ts in lookups} == lookups
    again.close()


def offsets_of_read(log: UnifiedLog, offset: int) -> list[int]:
    return [o for b in decode_batches(log.read(offset, 300).records) for o in b.offsets]


def test_new_logs_fsync_each_partition_directory_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new log's partition.metadata and leader-epoch-checkpoint are fsynced on the file-writer
    thread with their directory fsynced once per batch, not once per file (issue #19)."""
    from spark_kafkalite import atomic_file

    fsynced: list[str] = []
    fsync_file, fsync_dir = atomic_file.fsync_file, atomic_file.fsync_dir

    def counting_file(path: Path) -> bool:
        fsynced.append(Path(path).name)
        return fsync_file(path)

    def counting_dir(path: Path) -> None:
        fsynced.append(Path(path).name + "/")
        fsync_dir(path)

    monkeypatch.setattr(log_file_writer, "fsync_file", counting_file)
    monkeypatch.setattr(log_file_writer, "fsync_dir", counting_dir)
    mgr = LogManager([tmp_path], CONFIG, time_ms=Clock())
    mgr.startup()
    topic_id = uuid.uuid4()
    mgr.file_writer.draining = True  # as while the writer is busy: the jobs queue up as one batch
    for p in range(3):
        mgr.get_or_create_log("t", p, topic_id).leader_epoch_cache.assign(0, 0)
    mgr.file_writer.draining = False
    mgr.file_writer.write_later(lambda: None)
    mgr.flush_file_writes()
    dirs = [name for name in fsynced if name.endswith("/")]
    assert sorted(dirs) == ["t-0/", "t-1/", "t-2/"]
    assert sorted(n for n in fsynced if not n.endswith("/")) == sorted(
        ["partition.metadata", "leader-epoch-checkpoint"] * 3
    )


def test_many_new_logs_are_made_durable_by_one_syncfs_before_the_next_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From SYNCFS_MIN_FILES files waiting together on, one syncfs of their file system replaces
    their fsyncs (a CreateTopics of thousands of partitions costs a few journal commits, not two
    per log), and it runs before the write queued after them (issue #19)."""
    from spark_kafkalite import atomic_file

    events: list[str] = []
    sync_file_system = atomic_file.sync_file_system

    def counting_syncfs(directory: Path) -> bool:
        events.append("syncfs")
        return sync_file_system(directory)

    monkeypatch.setattr(log_file_writer, "sync_file_system", counting_syncfs)
    monkeypatch.setattr(log_file_writer, "fsync_file", lambda path: events.append("fsync") or True)
    monkeypatch.setattr(log_file_writer, "fsync_dir", lambda path: events.append("fsync dir"))
    mgr = LogManager([tmp_path], CONFIG, time_ms=Clock())
    mgr.startup()
    topic_id = uuid.uuid4()
    partitions = log_file_writer.SYNCFS_MIN_FILES
    mgr.file_writer.draining = True  # as while the writer is busy: the jobs queue up as one batch
    for p in range(partitions):
        mgr.get_or_create_log("t", p, topic_id).leader_epoch_cache.assign(0, 0)
    mgr.file_writer.write_later(lambda: events.append("next write"))
    mgr.file_writer.draining = False
    mgr.file_writer.write_later(lambda: None)
    mgr.flush_file_writes()
    assert events == ["syncfs", "next write"]
    assert atomic_file.sync_file_system(tmp_path) is True  # the real call succeeds here
    assert atomic_file.sync_file_system(tmp_path / "missing") is False
