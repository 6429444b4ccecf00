"""Large reads left in the segment files (``UnifiedLog.read`` with ``defer_above``): the same
bytes, first offset and aborted-transaction bounds as the inline read, for every byte and offset
limit; the data stays readable after the segment is deleted."""

from __future__ import annotations

import random
from pathlib import Path

from broker.log.file_slices import DeferredRecords
from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.record_batch_writer import encode_batch


def _log(tmp_path: Path) -> UnifiedLog:
    rng = random.Random(7)
    log = UnifiedLog(tmp_path / "t-0", LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512))
    for i in range(300):
        n = rng.randint(1, 6)
        log.append_as_leader(
            bytearray(encode_batch([(b"k", bytes(rng.randint(10, 900)), 1000 + i, []) for _ in range(n)])), 0
        )
    log.update_high_watermark(log.log_end_offset)
    return log


def _loaded(records: object) -> bytes:
    return records.load() if isinstance(records, DeferredRecords) else bytes(records)  # type: ignore[arg-type]


def test_deferred_reads_equal_inline_reads(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert len(log.segments) > 3
    rng = random.Random(11)
    deferred = 0
    for _ in range(300):
        fetch_offset = rng.randrange(log.log_end_offset)
        max_bytes = rng.choice([0, 100, 1000, 5000, 70_000, 200_000, 10**7])
        max_offset = rng.choice([None, rng.randrange(fetch_offset, log.log_end_offset + 1)])
        min_one = rng.random() < 0.8
        inline = log.read(fetch_offset, max_bytes, max_offset, min_one)
        lazy = log.read(fetch_offset, max_bytes, max_offset, min_one, defer_above=rng.choice([0, 600, 4096]))
        deferred += isinstance(lazy.records, DeferredRecords)
        assert len(lazy.records) == len(inline.records)
        assert lazy.first_batch_offset == inline.first_batch_offset
        assert _loaded(lazy.records) == bytes(inline.records)
    assert deferred > 100


def test_deferred_read_survives_segment_deletion(tmp_path: Path) -> None:
    log = _log(tmp_path)
    expected = bytes(log.read(0, 10**7).records)
    lazy = log.read(0, 10**7, defer_above=0)
    assert isinstance(lazy.records, DeferredRecords)
    log.delete_leading_segments(2, "test")
    assert lazy.records.load() == expected
    log.close()
