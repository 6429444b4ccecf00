"""UnifiedLog: appends across segment rolls, reads and their limits, timestamps, truncation."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.log.log_config import LogConfig
from broker.log.unified_log import (
    UnifiedLog,
    format_topic_id,
    parse_topic_id,
    parse_topic_partition_dir,
)
from spark_kafkalite.protocol.errors import (
    InconsistentTopicIdError,
    InvalidRecordError,
    OffsetOutOfRangeError,
)
from spark_kafkalite.protocol.record_batch import decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(30)


def make_batch(n: int, value_size: int = 20, ts: int = 1000, tag: int = 0) -> bytearray:
    return bytearray(
        encode_batch([(None, tag.to_bytes(4, "big") + bytes(value_size), ts + i, []) for i in range(n)])
    )


def offsets_of(records: bytes) -> list[int]:
    return [o for b in decode_batches(records) for o in b.offsets]


def test_dir_name_parsing() -> None:
    assert parse_topic_partition_dir("my-topic.v2_x-12") == ("my-topic.v2_x", 12)
    assert parse_topic_partition_dir("a-0") == ("a", 0)
    for bad in ("nodash", "-3", "topic-", "topic-x", "topic-01", "t-1.abc-delete"):
        assert parse_topic_partition_dir(bad) is None, bad


def test_topic_id_formats() -> None:
    tid = uuid.uuid4()
    text = format_topic_id(tid)
    assert len(text) == 22 and "=" not in text
    assert parse_topic_id(text) == tid == parse_topic_id(str(tid))


def test_append_read_across_rolls(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "orders-0", LogConfig(segment_bytes=1000, index_interval_bytes=128))
    assert (log.topic, log.partition) == ("orders", 0)
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 0
    expected = []
    for i in range(40):
        batch = make_batch(1 + i % 4, tag=i)
        info = log.append_as_leader(batch, leader_epoch=7)
        assert info.first_offset == log.log_end_offset - (1 + i % 4)
        assert info.last_offset == log.log_end_offset - 1
        assert info.valid_bytes == len(batch) and info.log_append_time_ms == -1
        expected.extend(range(info.first_offset, info.last_offset + 1))
    assert len(log.segments) > 5
    assert all(seg.size_bytes <= 1000 for seg in log.segments)
    assert [s.base_offset for s in log.segments] == sorted(s.base_offset for s in log.segments)
    assert log.size_bytes == sum(seg.size_bytes for seg in log.segments)
    # one big read spans every segment and returns every offset once, in order
    data = log.read(0, 10**7)
    assert data.first_batch_offset == 0
    assert offsets_of(data.records) == expected
    for batch in decode_batches(data.records):
        assert batch.header.partition_leader_epoch == 7
    # consuming in small steps sees the same thing
    seen: list[int] = []
    offset = 0
    while offset < log.log_end_offset:
        got = log.read(offset, 300)
        assert got.records
        new = [o for o in offsets_of(got.records) if o >= offset]
        seen.extend(new)
        offset = new[-1] + 1
    assert seen == expected
    log.close()


def test_read_limits(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=10_000))
    sizes = []
    for _ in range(10):
        batch = make_batch(5, value_size=100)
        sizes.append(len(batch))
        log.append_as_leader(batch, 0)
    assert log.log_end_offset == 50
    # fetch from the middle of a batch: the whole batch comes back (client skips records)
    got = log.read(12, 10**6)
    assert got.first_batch_offset == 10 and offsets_of(got.records)[0] == 10
    # max_offset (the high watermark) excludes batches at or after it
    log.update_high_watermark(25)
    assert log.high_watermark == 25
    got = log.read(0, 10**6, max_offset=log.high_watermark)
    assert offsets_of(got.records)[-1] == 24 and len(got.records) == sum(sizes[:5])
    assert log.read(25, 10**6, max_offset=25).records == b""
    assert log.read(30, 10**6, max_offset=25).records == b""  # above HW but <= LEO: empty, no error
    # max_bytes keeps whole batches; KIP-74 returns the first batch even if it is bigger
    got = log.read(0, sizes[0] * 2 + 10)
    assert offsets_of(got.records) == list(range(10))
    got = log.read(0, 10, min_one_message=True)
    assert offsets_of(got.records) == list(range(5))
    assert log.read(0, 10, min_one_message=False).records == b""
    # at the log end offset: empty; out of range: error
    assert log.read(50, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(51, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)
    # high watermark is clamped
    assert log.update_high_watermark(10**9) == 50
    assert log.update_high_watermark(-5) == 0
    log.close()


def test_offset_out_of_range_below_log_start(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(), log_start_offset=100)
    assert log.log_start_offset == log.log_end_offset == 100
    info = log.append_as_leader(make_batch(3), 0)
    assert info.first_offset == 100
    assert log.segments[0].base_offset == 100
    with pytest.raises(OffsetOutOfRangeError):
        log.read(99, 1000)
    assert offsets_of(log.read(100, 1000).records) == [100, 101, 102]
    log.close()


def test_fetch_offset_by_timestamp(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=500))
    # batch i holds timestamps 1000*i + [0, 10, 20, 30]; offsets 4*i .. 4*i+3
    for i in range(20):
        batch = bytearray(encode_batch([(None, b"v", 1000 * i + 10 * j, []) for j in range(4)]))
        log.append_as_leader(batch, 0)
    assert len(log.segments) > 2
    assert log.fetch_offset_by_timestamp(0) == (0, 0)
    assert log.fetch_offset_by_timestamp(5015) == (22, 5020)
    assert log.fetch_offset_by_timestamp(5030) == (23, 5030)
    assert log.fetch_offset_by_timestamp(5031) == (24, 6000)
    assert log.fetch_offset_by_timestamp(19030) == (79, 19030)
    assert log.fetch_offset_by_timestamp(19031) is None
    assert log.latest_timestamp() == (79, 19030)
    log.close()


def test_fetch_offset_by_timestamp_out_of_order(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig())
    log.append_as_leader(bytearray(encode_batch([(None, b"a", 500, []), (None, b"b", 100, [])])), 0)
    log.append_as_leader(bytearray(encode_batch([(None, b"c", 300, []), (None, b"d", 900, [])])), 0)
    assert log.fetch_offset_by_timestamp(200) == (0, 500)
    assert log.fetch_offset_by_timestamp(600) == (3, 900)
    assert log.latest_timestamp() == (3, 900)
    assert UnifiedLog(tmp_path / "empty-0", LogConfig()).fetch_offset_by_timestamp(0) is None
    log.close()


def test_log_append_time_batch(tmp_path: Path) -> None:
    # a CreateTime topic keeps a batch's own timestamps, whatever its flag, and reports no append
    # time (Kafka's LogValidator: logAppendTime is NO_TIMESTAMP unless the topic is LogAppendTime)
    log = UnifiedLog(tmp_path / "t-0", LogConfig())
    batch = bytearray(encode_batch([(None, b"x", 1234, [])], timestamp_type=1))
    info = log.append_as_leader(batch, 0)
    assert (info.log_append_time_ms, info.max_timestamp_ms) == (-1, 1234)
    log.close()
    # a LogAppendTime topic stamps it with the broker's clock (tests/unit/test_log_append_time.py)
    stamped = UnifiedLog(tmp_path / "s-0", LogConfig(message_timestamp_type="LogAppendTime"))
    info = stamped.append_as_leader(bytearray(encode_batch([(None, b"x", 1234, [])])), 0)
    assert info.log_append_time_ms == info.max_timestamp_ms > 1234
    stamped.close()


def test_append_as_follower(tmp_path: Path) -> None:
    leader = UnifiedLog(tmp_path / "t-0", LogConfig())
    for i in range(12):
        leader.append_as_leader(make_batch(3, tag=i), 4)
    fetched = leader.read(0, 10**6).records
    follower = UnifiedLog(tmp_path / "f" / "t-0", LogConfig(segment_bytes=400, index_interval_bytes=64))
    # a fetch response may end with a partial batch: it is ignored
    info = follower.append_as_follower(fetched[:-7])
    assert info is not None
    assert (info.first_offset, info.last_offset) == (0, 32)
    assert follower.log_end_offset == 33
    assert len(follower.segments) > 1
    assert follower.append_as_follower(b"") is None
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(fetched)  # offsets below the follower's log end offset
    rest = leader.read(33, 10**6).records
    follower.append_as_follower(rest)
    assert follower.log_end_offset == 36
    assert follower.read(0, 10**7).records == fetched
    leader.close()
    follower.close()


def test_truncate_to(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=400))
    for i in range(20):
        log.append_as_leader(make_batch(5, tag=i), 0)
    log.update_high_watermark(100)
    n_segments = len(log.segments)
    assert log.truncate_to(200) is False
    assert log.truncate_to(37) is True  # inside batch [35, 39]: removed whole
    assert log.log_end_offset == 35 and log.high_watermark == 35
    assert len(log.segments) < n_segments
    assert offsets_of(log.read(0, 10**7).records) == list(range(35))
    log.append_as_leader(make_batch(2), 1)
    assert offsets_of(log.read(30, 10**7).records) == list(range(30, 37))
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.size_bytes == 0
    log.truncate_fully_and_start_at(500)
    assert log.log_start_offset == log.log_end_offset == 500
    assert log.append_as_leader(make_batch(1), 1).first_offset == 500
    log.close()


def test_flush_interval_messages(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(flush_interval_messages=10))
    log.append_as_leader(make_batch(4), 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(6), 0)
    assert log.recovery_point == 10
    log.close()


def test_partition_metadata(tmp_path: Path) -> None:
    tid = uuid.uuid4()
    log = UnifiedLog(tmp_path / "t-0", LogConfig(), topic_id=tid)
    text = (tmp_path / "t-0" / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {format_topic_id(tid)}\n"
    log.close()
    assert UnifiedLog(tmp_path / "t-0", LogConfig()).topic_id == tid
    with pytest.raises(InconsistentTopicIdError):
        UnifiedLog(tmp_path / "t-0", LogConfig(), topic_id=uuid.uuid4())
    # a str(uuid) form written by hand is accepted too
    (tmp_path / "u-0").mkdir()
    (tmp_path / "u-0" / "partition.metadata").write_text(f"version: 0\ntopic_id: {tid}\n")
    assert UnifiedLog(tmp_path / "u-0", LogConfig()).topic_id == tid


def test_delete(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig())
    log.append_as_leader(make_batch(1), 0)
    log.delete()
    assert not (tmp_path / "t-0").exists()
