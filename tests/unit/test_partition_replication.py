"""Partition (leader side): HW from the ISR's LEOs, min.insync guard, acks=all completion
rules, ISR shrink/expand decisions, epoch fencing and DivergingEpoch reads (Kafka's
Partition.scala rules, kafka_internals §1.2-1.5). A real UnifiedLog on tmp_path; time injected."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.cluster.partition import Partition
from broker.controller.metadata_image import PartitionRegistration
from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from spark_kafkalite.protocol.record_batch_writer import encode_batch

LAG_MS = 10_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _batch(n: int = 1) -> bytearray:
    return bytearray(encode_batch([(None, b"v%d" % i, int(time.time() * 1000), []) for i in range(n)]))


def _reg(
    leader: int = 1, epoch: int = 0, isr: tuple[int, ...] = (1, 2, 3), pe: int = 0
) -> PartitionRegistration:
    return PartitionRegistration(0, (1, 2, 3), isr, leader, epoch, pe)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _partition(tmp_path: Path, clock: Clock, min_isr: int = 2, fenced: set[int] | None = None) -> Partition:
    log = UnifiedLog(tmp_path / "t-0", LogConfig(min_insync_replicas=min_isr))
    return Partition(
        "t",
        0,
        None,
        1,
        log,
        replica_lag_time_max_ms=LAG_MS,
        isr_eligible=lambda b: b not in (fenced or set()),
        time_ms=clock,
    )


def test_hw_is_min_leo_of_isr_and_never_moves_back(tmp_path: Path, clock: Clock) -> None:
    p = _partition(tmp_path, clock)
    assert p.make_leader(_reg())
    for _ in range(5):
        p.append_records_to_leader(_batch(), -1)
    assert p.high_watermark == 0  # followers' LEOs unknown
    assert not p.update_follower_fetch_state(2, 3, 0)
    assert p.high_watermark == 0  # follower 3 unknown
    assert p.update_follower_fetch_state(3, 2, 0)
    assert p.high_watermark == 2
    assert p.update_follower_fetch_state(3, 5, 0)
    assert p.high_watermark == 3
    p.update_follower_fetch_state(2, 1, 0)  # a follower "going back" (e.g. truncated)
    assert p.high_watermark == 3


def test_hw_waits_while_isr_below_min_isr(tmp_path: Path, clock: Clock) -> None:
    p = _partition(tmp_path, clock, min_isr=2)
    p.make_leader(_reg(isr=(1,)))
    p.append_records_to_leader(_batch(), 1)
    assert p.high_watermark == 0  # KAFKA-15583: no HW advance under min ISR
    with pytest.raises(NotEnoughReplicasError):
        p.append_records_to_leader(_batch(), -1)
    assert p.log.log_end_offset == 1  # nothing written by the refused acks=all append
    single = _partition(tmp_path / "single", clock, min_isr=2)
    single.make_leader(PartitionRegistration(0, (1,), (1,), 1, 0, 0))  # RF=1: min(min_isr, RF) = 1
    single.append_records_to_leader(_batch(), -1)
    assert single.high_watermark == 1


def test_check_enough_replicas_reach_offset(tmp_path: Path, clock: Clock) -> None:
    p = _partition(tmp_path, clock, min_isr=2)
    p.make_leader(_reg())
    p.append_records_to_leader(_batch(3), -1)
    assert p.check_enough_replicas_reach_offset(3) == (False, ErrorCode.none)
    p.update_follower_fetch_state(2, 3, 0)
    p.update_follower_fetch_state(3, 3, 0)
    assert p.check_enough_replicas_reach_offset(3) == (True, ErrorCode.none)
    # ISR shrank below min.insync after the HW passed: NOT_ENOUGH_REPLICAS_AFTER_APPEND
    p.make_leader(_reg(isr=(1,), pe=1))
    assert p.check_enough_replicas_reach_offset(3) == (True, ErrorCode.not_enough_replicas_after_append)
    p.make_follower(_reg(leader=2, epoch=1, pe=2))
    assert p.check_enough_replicas_reach_offset(3) == (True, ErrorCode.not_leader_or_follower)


def test_isr_shrink_and_expand_candidates(tmp_path: Path, clock: Clock) -> None:
    p = _partition(tmp_path, clock, min_isr=1, fenced={3})
    p.make_leader(_reg(isr=(1, 2, 3)))
    p.append_records_to_leader(_batch(), 1)
    assert p.out_of_sync_replicas() == []  # ISR members start caught up at becoming leader
    clock.now += LAG_MS // 2
    p.update_follower_fetch_state(2, 1, 0)  # 2 reached the LEO
    clock.now += LAG_MS // 2 + 1
    assert p.out_of_sync_replicas() == [3]
    p.make_leader(_reg(isr=(1, 2), pe=1))  # shrink committed
    assert not p.isr_expansion_candidate(3)  # fenced: not eligible
    p.isr_eligible = lambda b: True
    p.update_follower_fetch_state(3, 0, 0)
    assert not p.isr_expansion_candidate(3)  # below the HW (1)
    p.update_follower_fetch_state(3, 1, 0)
    assert p.isr_expansion_candidate(3)
    p.pending_isr = (1, 2, 3)
    assert not p.isr_expansion_candidate(3)  # one AlterPartition at a time
    assert p.maximal_isr == frozenset({1, 2, 3})


def test_epoch_fencing_and_leadership(tmp_path: Path, clock: Clock) -> None:
    p = _partition(tmp_path, clock)
    p.make_leader(_reg(epoch=4))
    p.check_leader(4)
    p.check_leader(-1)
    with pytest.raises(FencedLeaderEpochError):
        p.check_leader(3)
    with pytest.raises(UnknownLeaderEpochError):
        p.check_leader(5)
    p.make_follower(_reg(leader=2, epoch=5))
    with pytest.raises(NotLeaderOrFollowerError):
        p.read_records(0, 1000, is_follower=False)
    with pytest.raises(NotLeaderOrFollowerError):
        p.append_records_to_leader(_batch(), 1)


def test_diverging_epoch_read_and_consumer_reads_stop_at_hw(tmp_path: Path, clock: Clock) -> None:
    p = _partition(tmp_path, clock, min_isr=1)
    p.make_leader(_reg(epoch=0))
    for _ in range(4):
        p.append_records_to_leader(_batch(), 1)  # offsets 0-3 in epoch 0
    p.make_leader(_reg(epoch=2, pe=1))
    p.append_records_to_leader(_batch(), 1)  # offset 4 in epoch 2
    assert p.log.leader_epoch_cache.entries() == [(0, 0), (2, 4)]
    # a follower that wrote offsets 4..6 in epoch 1 (never committed) diverges at 4
    result = p.read_records(7, 10_000, is_follower=True, last_fetched_epoch=1)
    assert result.diverging_epoch == (0, 4) and result.info.records == b""
    ok = p.read_records(4, 10_000, is_follower=True, last_fetched_epoch=0)
    assert ok.diverging_epoch is None and ok.info.records
    assert p.high_watermark == 0  # followers have not fetched
    assert p.read_records(0, 10_000, is_follower=False).info.records == b""
    assert p.read_records(0, 10_000, is_follower=True).info.records
    assert p.last_offset_for_leader_epoch(2, 0) == (0, 4)
    assert p.last_offset_for_leader_epoch(-1, 2) == (2, 5)
