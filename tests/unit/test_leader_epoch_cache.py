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


def test_assign_ignores_same_or_older_epochs(tmp_path: Path) -> None:
    cache = _cache(tmp_path, [(0, 0), (0, 5), (2, 10)])
    assert cache.entries() == [(0, 0), (2, 10)]
    assert not cache.assign(1, 20)  # older than the latest: ignored
    assert cache.entries() == [(0, 0), (2, 10)]
    assert cache.latest_epoch == 2 and cache.epoch_for_offset(9) == 0 and cache.epoch_for_offset(10) == 2


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
