"""Retention (retention.ms / retention.bytes), the log start offset (DeleteRecords, its
checkpoint), driven by an injected clock instead of sleeps."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from broker.log.checkpoints import LOG_START_OFFSET_CHECKPOINT_FILE, read_offset_checkpoint
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.errors import OffsetOutOfRangeError
from spark_kafkalite.protocol.record_batch import decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(30)

HOUR_MS = 3_600_000


class Clock:
    """A settable wall clock in ms."""

    def __init__(self, now_ms: int = 100 * HOUR_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def batch(ts: int, n: int = 4, value_size: int = 60) -> bytearray:
    return bytearray(encode_batch([(b"k%d" % i, bytes(value_size), ts, []) for i in range(n)]))


def fill(log: UnifiedLog, timestamps: list[int]) -> None:
    for ts in timestamps:
        log.append_as_leader(batch(ts), 0)
    log.update_high_watermark(log.log_end_offset)


def first_offset(log: UnifiedLog) -> int:
    return next(iter(decode_batches(log.read(log.log_start_offset, 10**6).records))).offsets[0]


def test_retention_ms_deletes_old_segments_only(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=1000, retention_ms=HOUR_MS)
    log = UnifiedLog(tmp_path / "t-0", config, time_ms=clock)
    now = clock.now_ms
    fill(log, [now - 3 * HOUR_MS] * 10 + [now - 30 * 60_000] * 10)
    assert len(log.segments) >= 4
    old_segments = [s for s in log.segments if s.max_timestamp_ms < now - HOUR_MS]
    assert old_segments
    assert log.delete_old_segments() == len(old_segments)
    assert log.segments[0].max_timestamp_ms == now - 30 * 60_000
    assert log.log_start_offset == log.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 1000)
    assert first_offset(log) == log.log_start_offset
    assert log.delete_old_segments() == 0
    # an hour later everything is expired: the active segment goes too, after a roll
    clock.now_ms += HOUR_MS
    end = log.log_end_offset
    assert log.delete_old_segments() > 0
    assert len(log.segments) == 1 and log.segments[0].size_bytes == 0
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == end
    log.append_as_leader(batch(clock.now_ms), 0)
    assert log.log_end_offset == end + 4
    log.close()


def test_retention_never_deletes_above_the_high_watermark(tmp_path: Path) -> None:
    clock = Clock()
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=500, retention_ms=HOUR_MS), time_ms=clock)
    for _ in range(10):
        log.append_as_leader(batch(clock.now_ms - 2 * HOUR_MS), 0)
    log.update_high_watermark(log.segments[2].base_offset)  # only 2 segments are committed
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == log.segments[0].base_offset
    log.close()


def test_retention_bytes(tmp_path: Path) -> None:
    clock = Clock()
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=1000, retention_bytes=2500), time_ms=clock)
    fill(log, [clock.now_ms] * 40)
    before = log.size_bytes
    assert before > 2500
    deleted = log.delete_old_segments()
    assert deleted > 0
    # Kafka's rule: delete the oldest segments while what remains is still >= retention.bytes
    assert log.size_bytes >= 2500 > log.size_bytes - log.segments[0].size_bytes
    log.close()


def test_compact_only_policy_ignores_time_and_size(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(segment_bytes=500, retention_ms=1, retention_bytes=1, cleanup_policy=("compact",))
    log = UnifiedLog(tmp_path / "t-0", config, time_ms=clock)
    fill(log, [1000] * 10)
    assert log.delete_old_segments() == 0
    log.config = LogConfig(segment_bytes=500, retention_ms=1, cleanup_policy=("compact", "delete"))
    assert log.delete_old_segments() > 0
    log.close()


def test_segments_without_timestamps_expire_by_file_mtime(tmp_path: Path) -> None:
    clock = Clock(now_ms=0)
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=500, retention_ms=HOUR_MS), time_ms=clock)
    fill(log, [-1] * 10)
    import time

    clock.now_ms = int(time.time() * 1000)
    assert log.delete_old_segments() == 0
    clock.now_ms += 2 * HOUR_MS
    count = len(log.segments)
    assert log.delete_old_segments() == count  # all of them, after rolling an empty active one
    assert len(log.segments) == 1 and log.segments[0].size_bytes == 0
    log.close()


def test_delete_records_moves_log_start_offset_and_deletes_segments(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=600))
    fill(log, [1000 + i for i in range(30)])
    n_segments = len(log.segments)
    target = log.segments[3].base_offset + 2  # inside segment 3
    assert log.delete_records(target) == target
    assert log.log_start_offset == target
    assert log.segments[0].base_offset == target - 2 and len(log.segments) == n_segments - 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 1000)
    # the batch containing the start offset is served whole; consumers skip the lower offsets
    got = [o for b in decode_batches(log.read(target, 10**6).records) for o in b.offsets]
    assert got[0] == target - 2 and got[-1] == log.log_end_offset - 1
    assert log.fetch_offset_by_timestamp(0) == (target, 1000 + target // 4)
    # never backwards; above the high watermark is out of range
    assert log.delete_records(1) == target
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.high_watermark + 1)
    assert log.delete_records(log.high_watermark) == log.log_end_offset
    assert log.read(log.log_end_offset, 100).records == b""
    log.close()


def test_log_start_offset_checkpoint_survives_restarts(tmp_path: Path) -> None:
    clock = Clock()
    tid = uuid.uuid4()
    mgr = LogManager([tmp_path], LogConfig(segment_bytes=600), time_ms=clock)
    mgr.startup()
    log = mgr.get_or_create_log("orders", 0, tid)
    fill(log, [1000] * 20)
    log.delete_records(13)
    mgr.checkpoint_log_start_offsets()
    mgr.flush_file_writes()  # the checkpoint file is written on the file-writer thread
    assert read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT_FILE) == {("orders", 0): 13}
    # an unclean stop (no shutdown): the checkpoint alone restores it
    for lg in mgr.all_logs().values():
        lg.close()
    again = LogManager([tmp_path], LogConfig(segment_bytes=600), time_ms=clock)
    again.startup()
    assert not again.had_clean_shutdown
    restored = again.get_log("orders", 0)
    assert restored is not None and restored.log_start_offset == 13
    with pytest.raises(OffsetOutOfRangeError):
        restored.read(12, 100)
    again.shutdown()
    third = LogManager([tmp_path], LogConfig(segment_bytes=600), time_ms=clock)
    third.startup()
    log3 = third.get_log("orders", 0)
    assert log3 is not None and log3.log_start_offset == 13
    third.shutdown()


def test_cleanup_logs_uses_per_topic_config_and_checkpoints(tmp_path: Path) -> None:
    clock = Clock()
    mgr = LogManager([tmp_path], LogConfig(segment_bytes=600), time_ms=clock)
    mgr.startup()
    short = LogConfig(segment_bytes=600, retention_ms=HOUR_MS)
    mgr.update_topic_config("short", short)
    a = mgr.get_or_create_log("short", 0, uuid.uuid4())
    b = mgr.get_or_create_log("long", 0, uuid.uuid4())
    assert a.config is short and b.config is mgr.config
    for log in (a, b):
        fill(log, [clock.now_ms - 2 * HOUR_MS] * 10 + [clock.now_ms] * 3)
    deleted = mgr.cleanup_logs()
    assert deleted > 0 and a.log_start_offset > 0 and b.log_start_offset == 0
    mgr.flush_file_writes()
    assert (
        read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT_FILE)[("short", 0)]
        == a.log_start_offset
    )
    mgr.remove_topic_config("short")
    assert a.config is mgr.config
    mgr.shutdown()


def test_deleted_segments_are_renamed_then_unlinked_after_the_delay(tmp_path: Path) -> None:
    """Kafka's ``UnifiedLog.deleteSegmentFiles``: retention renames a segment's files to
    ``.deleted`` at once and unlinks them ``file.delete.delay.ms`` later on the file-writer
    thread; ``.deleted`` files a stop left behind are removed by the next load."""
    clock = Clock()
    config = LogConfig(segment_bytes=1000, retention_ms=HOUR_MS, file_delete_delay_ms=300)
    part = tmp_path / "t-0"

    async def scenario() -> tuple[set[str], set[str], set[str]]:
        mgr = LogManager([tmp_path], config, time_ms=clock)
        mgr.startup()
        log = mgr.get_or_create_log("t", 0, uuid.uuid4())
        fill(log, [clock.now_ms - 3 * HOUR_MS] * 10 + [clock.now_ms] * 10)
        deleted = log.delete_old_segments()
        assert deleted > 0
        renamed = {p.name for p in part.glob("*.deleted")}
        assert first_offset(log) == log.log_start_offset  # the remaining segments still read
        deadline = time.monotonic() + 10
        while any(part.glob("*.deleted")) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        gone = {p.name for p in part.glob("*.deleted")}
        # a second pass whose delay has not passed at shutdown leaves its files to the next load
        clock.now_ms += 2 * HOUR_MS
        fill(log, [clock.now_ms])
        assert log.delete_old_segments() > 0
        left = {p.name for p in part.glob("*.deleted")}
        mgr.shutdown()
        return renamed, gone, left

    renamed, gone, left = asyncio.run(scenario())
    assert any(name.endswith(".log.deleted") for name in renamed)
    assert any(name.endswith(".index.deleted") for name in renamed)
    assert gone == set()
    assert left and all((part / name).exists() for name in left)
    again = LogManager([tmp_path], config, time_ms=clock)
    again.startup()
    assert not any(part.glob("*.deleted"))
    restored = again.get_log("t", 0)
    assert restored is not None and first_offset(restored) == restored.log_start_offset
    again.shutdown()
