"""OffsetIndex unit tests and index-lookup-vs-brute-force property tests on random logs."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.log_config import LogConfig
from broker.log.log_segment import LogSegment
from broker.log.offset_index import OffsetIndex
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.record_batch import decode_batches, iter_batch_headers
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from tests.unit._hypothesis_budget import examples

pytestmark = pytest.mark.timeout(60)


def make_batch(n: int, value_size: int = 10, ts: int = 1000) -> bytearray:
    return bytearray(encode_batch([(None, bytes(value_size), ts + i, []) for i in range(n)]))


def test_index_append_lookup_truncate(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100)
    assert idx.lookup(150) == (100, 0)
    idx.append(109, 4200)
    idx.append(130, 9000)
    idx.append(200, 13000)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(108) == (100, 0)
    assert idx.lookup(109) == (109, 4200)
    assert idx.lookup(150) == (130, 9000)
    assert idx.lookup(10**12) == (200, 13000)
    with pytest.raises(ValueError):
        idx.append(150, 14000)  # offset not increasing
    with pytest.raises(ValueError):
        idx.append(300, 13000)  # position not increasing
    idx.truncate_to(130)
    assert idx.entries == 1 and idx.last_entry == (109, 4200)
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 8
    idx.close()


def test_index_reload_and_trim(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    idx = OffsetIndex(path, 0)
    idx.append(10, 5000)
    idx.append(20, 10000)
    idx.close()
    assert path.read_bytes() == struct.pack(">iiii", 10, 5000, 20, 10000)
    # a preallocated (zero-filled) tail and a torn entry, as a crash may leave behind
    with open(path, "ab") as f:
        f.write(bytes(16) + b"\x00\x01\x02")
    idx = OffsetIndex(path, 0)
    assert idx.entries == 2
    assert idx.lookup(25) == (20, 10000)
    assert path.stat().st_size == 16
    idx.close()


def test_index_full(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size_bytes=16)
    idx.append(1, 100)
    idx.append(2, 200)
    assert idx.is_full and not idx.can_append(3)
    with pytest.raises(ValueError):
        idx.append(3, 300)
    idx.close()


def _brute_force_first_batch(records: bytes, offset: int) -> int | None:
    for _, header in iter_batch_headers(records):
        if header.last_offset >= offset:
            return header.base_offset
    return None


@settings(
    max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    counts=st.lists(st.integers(1, 20), min_size=1, max_size=40),
    value_sizes=st.lists(st.integers(0, 300), min_size=1, max_size=40),
    interval=st.sampled_from([0, 100, 512, 4096]),
    segment_bytes=st.sampled_from([600, 2000, 1 << 20]),
    data=st.data(),
)
def test_lookup_matches_brute_force(
    tmp_path_factory: pytest.TempPathFactory,
    counts: list[int],
    value_sizes: list[int],
    interval: int,
    segment_bytes: int,
    data: st.DataObject,
) -> None:
    tmp = tmp_path_factory.mktemp("idx")
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    log = UnifiedLog(tmp / "t-0", config)
    all_bytes = bytearray()
    for i, n in enumerate(counts):
        batch = make_batch(n, value_sizes[i % len(value_sizes)])
        log.append_as_leader(batch, 0)
        all_bytes += batch
    leo = log.log_end_offset
    assert leo == sum(counts)
    # per segment: find_batch agrees with a linear scan of the whole log
    targets = data.draw(st.lists(st.integers(0, leo), min_size=5, max_size=20))
    for target in targets:
        expected = _brute_force_first_batch(bytes(all_bytes), target)
        got = log.read(target, 1)
        if expected is None:
            assert got.records == b""
        else:
            assert got.first_batch_offset == expected
            first = next(decode_batches(got.records))
            assert first.header.base_offset == expected
            assert first.header.base_offset <= target <= first.header.last_offset
    # every index entry points at a real batch whose last offset is the entry's offset
    for seg in log.segments:
        headers = {pos: h for pos, h in seg.iter_batches()}
        for n in range(seg.index.entries):
            offset, pos = seg.index.entry(n)
            assert headers[pos].last_offset == offset
    # a rebuilt index answers the same
    for seg in log.segments:
        before = [seg.index.entry(n) for n in range(seg.index.entries)]
        seg.rebuild_index()
        assert [seg.index.entry(n) for n in range(seg.index.entries)] == before
    log.close()


def test_segment_rebuilds_missing_index(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=100)
    seg = LogSegment.open(tmp_path, 0, config)
    offset = 0
    for _ in range(20):
        batch = make_batch(3, 80)
        batch[0:8] = offset.to_bytes(8, "big")
        seg.append(batch, offset, offset + 2)
        offset += 3
    entries = [seg.index.entry(n) for n in range(seg.index.entries)]
    assert len(entries) > 5
    seg.close()
    (tmp_path / "00000000000000000000.index").unlink()
    seg = LogSegment.open(tmp_path, 0, config)
    assert [seg.index.entry(n) for n in range(seg.index.entries)] == entries
    assert seg.next_offset == 60
    seg.close()
