"""Uncleanable partitions (Kafka's ``LogCleanerManager.markPartitionUncleanable``): a log whose
cleaning raises (here a gzip batch corrupted on disk, below what recovery checks) is logged once
and skipped from then on while another dirty log is still cleaned; deleting and re-creating the
partition makes it cleanable again."""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path

import pytest

from broker.log.log_cleaner import CleanerStats, LogCleaner
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.record_batch import COMPRESSION_GZIP, RECORD_BATCH_OVERHEAD
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)


def fill(log: UnifiedLog, batches: int) -> None:
    """Keyed gzip batches with overwritten keys, then a roll: everything below is cleanable."""
    for i in range(batches):
        batch = encode_batch(
            [(b"k%d" % (j % 3), b"v%d" % i, 1000, []) for j in range(6)], compression_type=COMPRESSION_GZIP
        )
        log.append_as_leader(bytearray(batch), 0)
    log.update_high_watermark(log.log_end_offset)
    log.roll()


def corrupt_first_batch(log: UnifiedLog) -> None:
    """Garble the compressed payload of the first batch in place (bit rot under a CRC that
    nothing below the recovery point re-checks)."""
    fd = os.open(log.segments[0].log_path, os.O_WRONLY)
    try:
        os.pwrite(fd, b"\xff\xff\xff\xff", RECORD_BATCH_OVERHEAD)
    finally:
        os.close(fd)


def test_failing_log_is_skipped_and_others_are_cleaned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    mgr = LogManager([tmp_path], LogConfig(segment_bytes=100_000, cleanup_policy=("compact",)))
    mgr.startup()
    bad = mgr.get_or_create_log("bad", 0, uuid.uuid4())  # first: wins the tie of dirty ratios
    good = mgr.get_or_create_log("good", 0, uuid.uuid4())
    fill(bad, 10)
    fill(good, 10)
    corrupt_first_batch(bad)
    cleaner = LogCleaner(mgr)
    plan = cleaner.filthiest()
    assert plan is not None and plan.log is bad

    async def passes(n: int) -> list[CleanerStats | None]:
        return [await cleaner.clean_once() for _ in range(n)]

    with caplog.at_level(logging.ERROR, logger="broker.log.log_cleaner"):
        results = asyncio.run(passes(4))
    assert results[0] is None  # bad raised
    assert results[1] is not None and results[1].records_retained == 3
    assert results[2:] == [None, None]  # nothing left: bad is not retried
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "(bad-0) as uncleanable" in errors[0].getMessage()
    assert "CORRUPT_MESSAGE" in errors[0].getMessage()
    assert cleaner.uncleanable_partitions(tmp_path) == {("bad", 0)}
    assert cleaner.is_uncleanable(bad) and not cleaner.is_uncleanable(good)

    mgr.delete_log("bad", 0)  # topic deleted and re-created: the mark goes with the old log
    assert cleaner.uncleanable_partitions(tmp_path) == set()
    again = mgr.get_or_create_log("bad", 0, uuid.uuid4())
    fill(again, 10)
    assert not cleaner.is_uncleanable(again)
    stats = asyncio.run(cleaner.clean_once())
    assert stats is not None and stats.records_retained == 3
    mgr.shutdown()
