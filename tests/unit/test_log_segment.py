"""LogSegment: append/read, read limits, recovery of a torn or corrupted tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.log_config import LogConfig
from broker.log.log_segment import LogSegment, log_file_name
from spark_kafkalite.protocol.record_batch import assign_offsets, decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(30)


def make_batch(base_offset: int, n: int, value_size: int = 20, ts: int = 1000) -> bytearray:
    batch = bytearray(encode_batch([(None, bytes([i % 256]) * value_size, ts + i, []) for i in range(n)]))
    assign_offsets(batch, base_offset, 0)
    return batch


def fill(seg: LogSegment, batches: int, per_batch: int = 5, value_size: int = 20) -> list[bytearray]:
    out = []
    offset = seg.base_offset
    for _ in range(batches):
        b = make_batch(offset, per_batch, value_size)
        seg.append(b, offset, offset + per_batch - 1)
        out.append(b)
        offset += per_batch
    return out


def test_file_names(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 42, LogConfig())
    assert seg.log_path.name == "00000000000000000042.log" == log_file_name(42)
    assert seg.next_offset == 42 and seg.size_bytes == 0
    # the index files come with the first data (an empty segment costs one file)
    assert not (tmp_path / "00000000000000000042.index").exists()
    assert seg.file_paths == (seg.log_path,)
    seg.append(make_batch(42, 1), 42, 42)
    assert (tmp_path / "00000000000000000042.index").exists()
    assert (tmp_path / "00000000000000000042.timeindex").exists()
    assert len(seg.file_paths) == 3
    seg.close()


def test_append_read_whole_batches(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 100, LogConfig(index_interval_bytes=200))
    batches = fill(seg, 30)
    assert seg.next_offset == 250
    assert seg.size_bytes == sum(map(len, batches))
    assert seg.index.entries > 3
    res = seg.read(137, 10**6)
    assert res is not None
    assert res.first_offset == 135 and res.next_offset == 250
    assert res.records == b"".join(batches[7:])
    # max_bytes keeps whole batches only
    size = len(batches[0])
    res = seg.read(100, 2 * size + size // 2)
    assert res is not None and res.records == bytes(batches[0] + batches[1])
    # max_position cuts at a batch boundary
    res = seg.read(100, 10**6, max_position=3 * size + 5)
    assert res is not None and res.records == b"".join(batches[:3])
    # max_offset excludes batches whose base offset is >= max_offset
    res = seg.read(100, 10**6, max_offset=111)
    assert res is not None and [b.header.base_offset for b in decode_batches(res.records)] == [100, 105, 110]
    # beyond the last offset: None
    assert seg.read(250, 100) is None
    seg.close()


def test_min_one_message(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, LogConfig())
    batches = fill(seg, 3, per_batch=10, value_size=500)
    res = seg.read(3, 100, min_one_message=True)
    assert res is not None and res.records == bytes(batches[0])
    res = seg.read(3, 100, min_one_message=False)
    assert res is not None and res.records == b""
    seg.close()


def _reopen(tmp_path: Path, config: LogConfig) -> LogSegment:
    return LogSegment.open(tmp_path, 0, config)


def test_recover_valid_segment_is_untouched(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=100)
    seg = LogSegment.open(tmp_path, 0, config)
    fill(seg, 20)
    size, entries = seg.size_bytes, [seg.index.entry(n) for n in range(seg.index.entries)]
    seg.close()
    seg = _reopen(tmp_path, config)
    assert seg.recover() == 0
    assert seg.size_bytes == size and seg.next_offset == 100
    assert [seg.index.entry(n) for n in range(seg.index.entries)] == entries
    seg.close()


def test_recover_truncates_partial_tail(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=100)
    seg = LogSegment.open(tmp_path, 0, config)
    batches = fill(seg, 10)
    good = seg.size_bytes
    seg.close()
    with open(tmp_path / log_file_name(0), "ab") as f:  # a crash mid-write of the 11th batch
        f.write(make_batch(50, 5)[:40])
    seg = _reopen(tmp_path, config)
    assert seg.has_partial_tail
    assert seg.recover() == 40
    assert seg.size_bytes == good == (tmp_path / log_file_name(0)).stat().st_size
    assert seg.next_offset == 50
    res = seg.read(0, 10**6)
    assert res is not None and res.records == b"".join(batches)
    # appends continue cleanly after recovery
    seg.append(make_batch(50, 5), 50, 54)
    assert seg.next_offset == 55 and seg.read(52, 10**6).first_offset == 50  # type: ignore[union-attr]
    seg.close()


def test_recover_truncates_at_bad_crc(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=100)
    seg = LogSegment.open(tmp_path, 0, config)
    batches = fill(seg, 10)
    seg.close()
    keep = sum(len(b) for b in batches[:6])
    path = tmp_path / log_file_name(0)
    raw = bytearray(path.read_bytes())
    raw[keep + 70] ^= 0xFF  # flip a byte inside the records of batch 7 (covered by the CRC)
    path.write_bytes(raw)
    seg = _reopen(tmp_path, config)
    assert seg.recover() == len(raw) - keep
    assert seg.size_bytes == keep and seg.next_offset == 30
    assert all(pos < keep for _, pos in (seg.index.entry(n) for n in range(seg.index.entries)))
    seg.close()


def test_recover_garbage_and_zeros(tmp_path: Path) -> None:
    config = LogConfig()
    seg = LogSegment.open(tmp_path, 0, config)
    fill(seg, 3)
    good = seg.size_bytes
    seg.close()
    with open(tmp_path / log_file_name(0), "ab") as f:
        f.write(bytes(4096))  # zero-filled tail (what a filesystem may show after a crash)
    seg = _reopen(tmp_path, config)
    assert seg.recover() == 4096 and seg.size_bytes == good
    seg.close()


def test_recover_rejects_offsets_going_backwards(tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, LogConfig())
    seg.append(make_batch(0, 5), 0, 4)
    seg.append(make_batch(5, 5), 5, 9)
    seg.append(make_batch(3, 5), 3, 7)  # valid CRC, but offsets overlap the previous batch
    assert seg.recover() > 0
    assert seg.next_offset == 10
    seg.close()


def test_truncate_to(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=50)
    seg = LogSegment.open(tmp_path, 0, config)
    batches = fill(seg, 10)
    removed = seg.truncate_to(22)  # inside batch [20, 24]: the batch goes whole
    assert removed == sum(len(b) for b in batches[4:])
    assert seg.next_offset == 20
    assert all(off < 22 for off, _ in (seg.index.entry(n) for n in range(seg.index.entries)))
    seg.append(make_batch(20, 5), 20, 24)
    assert seg.read(20, 10**6).first_offset == 20  # type: ignore[union-attr]
    seg.close()
