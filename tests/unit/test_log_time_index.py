"""Time index (``.timeindex``): entries, loading, rebuilds, lookups by timestamp vs brute force,
``segment.ms`` rolls, and proof (bytes read) that lookups on a large log use the indexes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.log_config import LogConfig
from broker.log.log_segment import SEGMENT_READ_STATS
from broker.log.time_index import TIME_INDEX_ENTRY_SIZE, TimeIndex
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.record_batch import decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from tests.unit._hypothesis_budget import examples

pytestmark = pytest.mark.timeout(60)


def batch_with_timestamps(timestamps: list[int], value_size: int = 10) -> bytearray:
    return bytearray(encode_batch([(None, bytes(value_size), ts, []) for ts in timestamps]))


def all_records(log: UnifiedLog) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record from log_start_offset, by decoding the whole log."""
    data = log.read(log.log_start_offset, 1 << 30).records
    return [
        (o, t)
        for b in decode_batches(data)
        for o, t in zip(b.offsets, b.timestamps_ms, strict=True)
        if o >= log.log_start_offset
    ]


def brute_force_by_timestamp(records: list[tuple[int, int]], target: int) -> tuple[int, int] | None:
    return next(((o, t) for o, t in records if t >= target), None)


def brute_force_max(records: list[tuple[int, int]]) -> tuple[int, int] | None:
    largest = max((t for _, t in records), default=-1)
    if largest < 0:
        return None
    return next((o, t) for o, t in records if t == largest)


# -- TimeIndex ------------------------------------------------------------------------------


def test_time_index_append_rules_and_lookup(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100)
    assert idx.last_entry == (-1, 100) and idx.lookup(5) == (-1, 100)
    assert idx.maybe_append(1000, 104)
    assert not idx.maybe_append(1000, 110)  # timestamp must grow
    assert not idx.maybe_append(900, 110)
    assert not idx.maybe_append(2000, 104)  # offset must grow
    assert idx.maybe_append(2000, 120)
    assert idx.maybe_append(3000, 130)
    assert idx.entries == 3 and idx.last_entry == (3000, 130)
    assert idx.lookup_before(1000) is None
    assert idx.lookup_before(1001) == (1000, 104)
    assert idx.lookup_before(5000) == (3000, 130)
    assert idx.lookup(2000) == (2000, 120) and idx.lookup(1999) == (1000, 104)
    idx.truncate_to(120)
    assert idx.entries == 1 and idx.last_entry == (1000, 104)
    idx.close()
    assert (tmp_path / "00000000000000000100.timeindex").stat().st_size == TIME_INDEX_ENTRY_SIZE


def test_time_index_load_trims_invalid_tail(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    idx = TimeIndex(path, 0)
    idx.maybe_append(10, 1)
    idx.maybe_append(20, 2)
    idx.close()
    with open(path, "ab") as f:
        f.write(bytes(12) + b"\x01\x02")  # a preallocated zero entry and a torn one
    again = TimeIndex(path, 0)
    assert again.entries == 2 and again.was_trimmed
    assert path.stat().st_size == 24


# -- segment-level behaviour ----------------------------------------------------------------


def test_time_index_written_on_append_and_final_entry_on_roll(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=2000, index_interval_bytes=300))
    for i in range(60):
        log.append_as_leader(batch_with_timestamps([1000 + 10 * i, 1005 + 10 * i]), 0)
    assert len(log.segments) > 2
    for seg in log.segments[:-1]:
        assert seg.time_index.entries >= 2
        ts, off = seg.time_index.last_entry
        assert ts == seg.max_timestamp_ms and off == seg.offset_of_max_timestamp
        assert off == seg.next_offset - 1  # increasing timestamps: the last batch holds the max
    log.close()


def test_clean_reopen_needs_no_scan_and_missing_time_index_is_rebuilt(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=100_000, index_interval_bytes=1024)
    log = UnifiedLog(tmp_path / "t-0", config)
    for i in range(4000):
        log.append_as_leader(batch_with_timestamps([5000 - 7 * (i % 50), 9000 + (i * 37) % 500], 200), 0)
    before = all_records(log)
    maxes = [s.max_timestamp_ms for s in log.segments]
    total = log.size_bytes
    log.close()

    SEGMENT_READ_STATS.reset()
    reopened = UnifiedLog(tmp_path / "t-0", config)
    assert [s.max_timestamp_ms for s in reopened.segments] == maxes
    assert not any(s.rebuilt_indexes for s in reopened.segments)
    # index sanity checks and the active segment's tail only: a few KB per segment, no scan
    assert SEGMENT_READ_STATS.bytes_read < 8 * 1024 * len(reopened.segments) < total / 5
    assert reopened.latest_timestamp() == brute_force_max(before)
    reopened.close()

    for p in (tmp_path / "t-0").glob("*.timeindex"):
        p.unlink()
    rebuilt = UnifiedLog(tmp_path / "t-0", config)
    assert [s.max_timestamp_ms for s in rebuilt.segments] == maxes
    assert all(s.rebuilt_indexes for s in rebuilt.segments)
    for target in (0, 4700, 9000, 9250, 9499, 9500):
        assert rebuilt.fetch_offset_by_timestamp(target) == brute_force_by_timestamp(before, target)
    rebuilt.close()


def test_corrupt_time_index_is_rebuilt(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=3000, index_interval_bytes=100)
    log = UnifiedLog(tmp_path / "t-0", config)
    for i in range(40):
        log.append_as_leader(batch_with_timestamps([100 * i]), 0)
    expected = all_records(log)
    log.close()
    victim = sorted((tmp_path / "t-0").glob("*.timeindex"))[0]
    raw = bytearray(victim.read_bytes())
    raw[12:24] = bytes(12)  # entry 1 no longer increases: the tail is invalid
    victim.write_bytes(bytes(raw))
    again = UnifiedLog(tmp_path / "t-0", config)
    assert again.segments[0].rebuilt_indexes
    for target in range(-1, 4100, 50):
        assert again.fetch_offset_by_timestamp(target) == brute_force_by_timestamp(expected, target)
    again.close()


def test_roll_by_segment_ms_uses_batch_timestamps(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_ms=1000))
    for ts in (10_000, 10_500, 11_000, 11_001, 11_500, 12_100, 12_200):
        log.append_as_leader(batch_with_timestamps([ts]), 0)
    # rolls when the new batch is > 1000 ms after the active segment's first batch
    assert [s.base_offset for s in log.segments] == [0, 3, 5]
    log.close()


def test_roll_by_segment_ms_without_timestamps_uses_the_clock(tmp_path: Path) -> None:
    now = [1_000_000]
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_ms=1000), time_ms=lambda: now[0])
    log.append_as_leader(batch_with_timestamps([-1]), 0)
    now[0] += 1000
    log.append_as_leader(batch_with_timestamps([-1]), 0)
    assert len(log.segments) == 1
    now[0] += 1
    log.append_as_leader(batch_with_timestamps([-1]), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


# -- lookups vs brute force on random logs ---------------------------------------------------

timestamps_strategy = st.lists(
    st.lists(st.integers(min_value=-1, max_value=2000), min_size=1, max_size=6), min_size=0, max_size=60
)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=timestamps_strategy,
    segment_bytes=st.integers(min_value=200, max_value=3000),
    index_interval_bytes=st.integers(min_value=0, max_value=500),
    start_fraction=st.floats(min_value=0.0, max_value=1.0),
    targets=st.lists(st.integers(min_value=-5, max_value=2100), min_size=1, max_size=15),
    value_size=st.integers(min_value=0, max_value=120),
)
def test_lookups_match_brute_force(
    batches: list[list[int]],
    segment_bytes: int,
    index_interval_bytes: int,
    start_fraction: float,
    targets: list[int],
    value_size: int,
) -> None:
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
    with tempfile.TemporaryDirectory() as tmp:
        log = UnifiedLog(Path(tmp) / "t-0", config)
        for ts in batches:
            log.append_as_leader(batch_with_timestamps(ts, value_size), 0)
        log.update_high_watermark(log.log_end_offset)
        # a log start offset inside the log (as after DeleteRecords)
        log.log_start_offset = int(log.log_end_offset * start_fraction)
        records = all_records(log)
        for target in [*targets, 0, 2000]:
            assert log.fetch_offset_by_timestamp(target) == brute_force_by_timestamp(records, target), target
        assert log.latest_timestamp() == brute_force_max(records)
        lso = log.log_start_offset
        log.close()
        # the same answers from indexes loaded from disk, and from rebuilt ones
        for drop in (False, True):
            if drop:
                for name in os.listdir(Path(tmp) / "t-0"):
                    if name.endswith("index"):
                        os.unlink(Path(tmp) / "t-0" / name)
            again = UnifiedLog(Path(tmp) / "t-0", config, log_start_offset=lso)
            for target in targets:
                assert again.fetch_offset_by_timestamp(target) == brute_force_by_timestamp(records, target)
            again.close()


# -- a large log read by timestamp: the indexes, not a scan ----------------------------------


def test_large_log_lookup_by_timestamp_reads_few_bytes(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=4096)
    log = UnifiedLog(tmp_path / "big-0", config)
    per_batch = 20
    batches = 5000
    for b in range(batches):
        base_ts = 1_000_000 + b * per_batch * 10
        log.append_as_leader(batch_with_timestamps([base_ts + 10 * i for i in range(per_batch)], 100), 0)
    log.update_high_watermark(log.log_end_offset)
    total_bytes = log.size_bytes
    assert total_bytes > 10 * (1 << 20) and len(log.segments) >= 10

    for k in (7, 1234, 40_000, 99_999):
        target = 1_000_000 + k * 10 - 3  # just before record k's timestamp
        SEGMENT_READ_STATS.reset()
        found = log.fetch_offset_by_timestamp(target)
        assert found == (k, 1_000_000 + k * 10)
        # header walk of about two index intervals plus one decoded batch, never the log
        assert SEGMENT_READ_STATS.bytes_read < 40 * 1024, SEGMENT_READ_STATS
    SEGMENT_READ_STATS.reset()
    assert log.latest_timestamp() == (log.log_end_offset - 1, 1_000_000 + (log.log_end_offset - 1) * 10)
    assert SEGMENT_READ_STATS.bytes_read < 40 * 1024
    SEGMENT_READ_STATS.reset()
    assert log.fetch_offset_by_timestamp(10**12) is None
    assert SEGMENT_READ_STATS.bytes_read == 0
    log.close()
