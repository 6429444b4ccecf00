"""The produce purgatory (Kafka's DelayedProduce.tryCompleteElseWatch): an acks=all append that
the high watermark already covers (an ISR of just the leader) completes at once, without
parking or even yielding to the event loop, as Kafka's ReplicaManager answers it without a
DelayedProduce wait; one the HW does not cover yet waits for it. Real Partitions and logs on
tmp_path."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from broker.cluster.partition import Partition
from broker.controller.metadata_image import PartitionRegistration
from broker.log.log_config import LogConfig
from broker.log.unified_log import UnifiedLog
from broker.replication.delayed_produce import DelayedProduce, ProducePurgatory
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.record_batch_writer import encode_batch


def _batch() -> bytearray:
    return bytearray(encode_batch([(None, b"v", int(time.time() * 1000), [])]))


def _leader(tmp_path: Path, name: str, replicas: tuple[int, ...], min_isr: int = 1) -> Partition:
    p = Partition(
        name, 0, None, 1, UnifiedLog(tmp_path / f"{name}-0", LogConfig(min_insync_replicas=min_isr))
    )
    p.make_leader(PartitionRegistration(0, replicas, replicas, 1, 0, 0))
    return p


def test_leader_only_isr_completes_without_yielding(tmp_path: Path) -> None:
    p = _leader(tmp_path, "solo", (1,))
    info = p.append_records_to_leader(_batch(), -1)
    purgatory = ProducePurgatory({p.key: p}.get)
    coro = purgatory.try_complete_else_watch(DelayedProduce({p.key: info.last_offset + 1}), 30_000)
    try:
        coro.send(None)  # would return a future to wait on if it had to park
    except StopIteration as done:
        assert done.value == {p.key: ErrorCode.none}
    else:
        coro.close()
        raise AssertionError("an acks=all append covered by the HW waited in the purgatory")
    assert purgatory.num_delayed == 0


def test_waits_for_the_follower_then_completes(tmp_path: Path) -> None:
    p = _leader(tmp_path, "rf2", (1, 2), min_isr=2)
    info = p.append_records_to_leader(_batch(), -1)
    purgatory = ProducePurgatory({p.key: p}.get)

    async def scenario() -> dict[tuple[str, int], ErrorCode]:
        waiting = asyncio.create_task(
            purgatory.try_complete_else_watch(DelayedProduce({p.key: info.last_offset + 1}), 30_000)
        )
        await asyncio.sleep(0)
        assert not waiting.done() and purgatory.num_delayed == 1
        assert p.update_follower_fetch_state(2, info.last_offset + 1, 0)  # the follower caught up
        purgatory.check_and_complete(p.key)
        return await asyncio.wait_for(waiting, 5)

    assert asyncio.run(scenario()) == {p.key: ErrorCode.none}
    assert purgatory.num_delayed == 0


def test_times_out_when_the_follower_never_fetches(tmp_path: Path) -> None:
    p = _leader(tmp_path, "stuck", (1, 2), min_isr=2)
    info = p.append_records_to_leader(_batch(), -1)
    purgatory = ProducePurgatory({p.key: p}.get)
    op = DelayedProduce({p.key: info.last_offset + 1})
    result = asyncio.run(purgatory.try_complete_else_watch(op, 50))
    assert result == {p.key: ErrorCode.request_timed_out}
    assert purgatory.num_delayed == 0


def test_a_change_rechecks_only_that_partition() -> None:
    """A change to one partition re-checks that partition of a parked operation, not all of
    them (a request spanning P partitions costs O(P) checks, not O(P^2))."""
    checked: list[tuple[str, int]] = []

    class Counting:
        def __init__(self, key: tuple[str, int]) -> None:
            self.key = key

        def check_enough_replicas_reach_offset(self, required: int) -> tuple[bool, ErrorCode]:
            checked.append(self.key)
            return False, ErrorCode.none

    keys = [("t", i) for i in range(300)]
    op = DelayedProduce({key: 1 for key in keys})
    lookup = {key: Counting(key) for key in keys}.get
    assert not op.try_complete_partition(("t", 7), lookup)  # type: ignore[arg-type]
    assert checked == [("t", 7)]
