"""LeaderEpochFileCache: Kafka's endOffsetFor rules, truncation, and the checkpoint file format."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    LeaderEpochFileCache,
    load_leader_epoch_cache,
)
from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.record_batch_writer import encode_batch


def _cache(tmp_path: Path, entries: list[tuple[int, int]]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE)
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def test_end_offset_for_follows_kafka_rules(tmp_path: Path) -> None:
    cache = _cache(tmp_path, [(1, 0), (3, 100), (6, 250)])
    leo = 400
    assert cache.end_offset_for(6, leo) == (6, 400)  # latest epoch -> LEO
    assert cache.end_offset_for(3, leo) == (3, 250)  # next epoch's start
    assert cache.end_offset_for(4, leo) == (3, 250)  # largest epoch <= 4 is 3
    assert cache.end_offset_for(5, leo) == (3, 250)
    assert cache.end_offset_for(0, leo) == (0, 0)  # below every epoch: first start offset
    assert cache.end_offset_for(7, leo) == (-1, -1)  # above every epoch
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert LeaderEpochFileCache(None).end_offset_for(0, 10) == (-1, -1)


def test_assign_follows_kafka_and_drops_contradicted_entries(tmp_path: Path) -> None:
    cache = _cache(tmp_path, [(0, 0), (0, 5), (2, 10)])
    assert cache.entries() == [(0, 0), (2, 10)]  # the same epoch later: no change
    assert cache.latest_epoch == 2 and cache.epoch_for_offset(9) == 0 and cache.epoch_for_offset(10) == 2
    assert not cache.assign(-1, 20) and not cache.assign(3, -1)
    # Kafka's maybeTruncateNonMonotonicEntries: an older epoch at a later offset (the leader's
    # batches over a stale trailing entry) drops the entries it contradicts.
    assert cache.assign(1, 20)
    assert cache.entries() == [(0, 0), (1, 20)]
    assert cache.assign(1, 15)  # the latest epoch starting earlier moves back
    assert cache.entries() == [(0, 0), (1, 15)]
    assert LeaderEpochFileCache.load(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).entries() == [(0, 0), (1, 15)]


def test_follower_append_replaces_an_empty_trailing_epoch(tmp_path: Path) -> None:
    """Issue #14: ``... 2 1732 3 2264`` (epoch 3 led here, nothing appended) followed by the
    leader's epoch-4 batch at 2264 becomes ``... 2 1732 4 2264``."""
    cache = _cache(tmp_path, [(1, 0), (2, 1732), (3, 2264)])
    assert cache.assign(4, 2264)
    assert cache.entries() == [(1, 0), (2, 1732), (4, 2264)]


def test_truncation_from_end_and_start(tmp_path: Path) -> None:
    cache = _cache(tmp_path, [(1, 0), (3, 100), (6, 250)])
    cache.truncate_from_end(250)
    assert cache.entries() == [(1, 0), (3, 100)]
    cache.truncate_from_end(101)
    assert cache.entries() == [(1, 0), (3, 100)]
    cache.truncate_from_start(120)
    assert cache.entries() == [(3, 120)]
    cache.clear()
    assert cache.entries() == [] and cache.latest_epoch is None


def test_checkpoint_file_is_kafkas_text_format(tmp_path: Path) -> None:
    cache = _cache(tmp_path, [(0, 0), (4, 37)])
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    assert path.read_text() == "0\n2\n0 0\n4 37\n"
    assert LeaderEpochFileCache.load(path).entries() == [(0, 0), (4, 37)]
    cache.truncate_from_end(10)
    assert path.read_text() == "0\n1\n0 0\n"


@pytest.mark.parametrize("text", ["1\n1\n0 0\n", "0\n3\n0 0\n", "garbage", ""])
def test_malformed_file_is_ignored(tmp_path: Path, text: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    path.write_text(text)
    assert LeaderEpochFileCache.load(path).entries() == []


def test_load_rebuilds_from_batches_when_missing_and_trims(tmp_path: Path) -> None:
    headers = [(0, 0), (0, 5), (2, 10), (2, 12), (5, 20)]
    cache = load_leader_epoch_cache(tmp_path, iter(headers), log_start_offset=0, log_end_offset=25)
    assert cache.entries() == [(0, 0), (2, 10), (5, 20)]
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).exists()

    def no_scan() -> Iterator[tuple[int, int]]:
        raise AssertionError("the checkpoint exists: the log must not be scanned")
        yield (0, 0)

    again = load_leader_epoch_cache(tmp_path, no_scan(), 0, 15)
    assert again.entries() == [(0, 0), (2, 10)]  # trimmed to the log end (20 >= 15)


def test_truncate_to_at_the_log_end_drops_an_empty_trailing_epoch(tmp_path: Path) -> None:
    """Kafka's ``UnifiedLog.truncateTo``: a target at or past the log end removes no record but
    truncates the epoch cache at the log end (the broker led epoch 3 and appended nothing)."""
    log = UnifiedLog(tmp_path / "t-0", LogConfig())
    for epoch in (1, 2):
        log.append_as_leader(bytearray(encode_batch([(None, b"v", 1000, [])])), epoch)
    log.leader_epoch_cache.assign(3, log.log_end_offset)  # Partition.make_leader
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 1), (3, 2)]
    assert not log.truncate_to(log.log_end_offset)
    assert log.log_end_offset == 2
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 1)]
    assert LeaderEpochFileCache.load(tmp_path / "t-0" / LEADER_EPOCH_CHECKPOINT_FILE).entries() == [
        (1, 0),
        (2, 1),
    ]
    assert not log.truncate_to(10)  # past the log end: nothing more to drop
    assert log.leader_epoch_cache.entries() == [(1, 0), (2, 1)]
    log.close()
