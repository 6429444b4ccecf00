"""``set_log_append_time`` (Kafka's ``DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, now)``):
the stamped batch keeps a valid CRC, says LogAppendTime, and every record reads the stamp, for
plain and compressed batches; a LogAppendTime topic's log stamps what it appends as leader."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.record_batch import (
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    decode_batch,
    read_header,
    set_log_append_time,
    validate_batch,
)
from spark_kafkalite.protocol.record_batch_writer import encode_batch

RECORDS = [(b"k%d" % i, b"v%d" % i, 1_000 + i, []) for i in range(10)]


@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_ZSTD])
def test_stamped_batch_is_valid_and_every_record_reads_the_stamp(codec: int) -> None:
    batch = bytearray(encode_batch(RECORDS, compression_type=codec))
    set_log_append_time(batch, 1_700_000_000_123)
    header = validate_batch(batch, 0)  # raises on a stale CRC
    assert (header.timestamp_type, header.max_timestamp, header.compression_type) == (
        1,
        1_700_000_000_123,
        codec,
    )
    decoded = decode_batch(batch)
    assert decoded.timestamps_ms == [1_700_000_000_123] * len(RECORDS)
    assert decoded.values == [r[1] for r in RECORDS]


def test_log_append_time_topic_stamps_leader_appends(tmp_path: Path) -> None:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"))
    try:
        before_ms = int(time.time() * 1000)
        info = log.append_as_leader(memoryview(encode_batch(RECORDS)), leader_epoch=0)  # a view: copied
        after_ms = int(time.time() * 1000)
        assert before_ms <= info.log_append_time_ms <= after_ms
        stored = log.read(0, 1 << 20, None, True).records
        header = read_header(bytes(stored))
        assert (header.timestamp_type, header.max_timestamp) == (1, info.log_append_time_ms)
        validate_batch(bytes(stored), 0)
    finally:
        log.close()
