"""The leader's cost of an acks=all produce and of the follower fetches that complete it does not
grow with the partitions the broker hosts (issue #19): the partitions looked at (HW advance,
acks=all checks, reads) are counted while one produce to a few partitions is acknowledged
through follower fetches, on a broker hosting 20 and then 200 partitions; the counts are equal.
A count, not a timing.

Real ReplicaManager, LogManager, UnifiedLogs and Partitions on tmp_path (RF 3, this broker the
leader, min.insync.replicas=2); the followers' fetches are ``read_for_fetch`` calls as the
Fetch handler makes them."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from broker.cluster.partition import Partition
from broker.config import KafkaConfig
from broker.controller.metadata_image import PartitionRegistration
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.replication.delayed_fetch import FetchPurgatory
from broker.replication.replica_manager import ReplicaManager
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)

TOPIC = "spread"
PRODUCED = (1, 7, 13)


class _CountingPartition(Partition):
    """A Partition that counts the calls of its per-partition replication steps."""

    calls: Counter[str] = Counter()

    def maybe_increment_leader_hw(self, now_ms: int | None = None) -> bool:
        self.calls["maybe_increment_leader_hw"] += 1
        return super().maybe_increment_leader_hw(now_ms)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        self.calls["check_enough_replicas_reach_offset"] += 1
        return super().check_enough_replicas_reach_offset(required_offset)

    def read_records(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["read_records"] += 1
        return super().read_records(*args, **kwargs)


def _manager(tmp_path: Path, hosted: int) -> ReplicaManager:
    config = KafkaConfig({"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path)})
    log_manager = LogManager([tmp_path / f"logs-{hosted}"], LogConfig(min_insync_replicas=2))
    manager = ReplicaManager(
        config, 1, log_manager, FetchPurgatory(), image=lambda: None, controller=lambda: None
    )  # type: ignore[arg-type]
    topic_id = uuid.uuid4()
    for index in range(hosted):
        p = _CountingPartition(
            TOPIC, index, topic_id, 1, log_manager.get_or_create_log(TOPIC, index, topic_id)
        )
        p.make_leader(PartitionRegistration(index, (1, 2, 3), (1, 2, 3), 1, 0, 0))
        manager._partitions[(TOPIC, index)] = p
    return manager


async def _acknowledged_produce(manager: ReplicaManager) -> dict[tuple[str, int], ErrorCode]:
    """One acks=all produce to PRODUCED, acknowledged once both followers fetched it."""
    batch = encode_batch([(None, b"v" * 100, int(time.time() * 1000), [])])
    entries = {(TOPIC, i): memoryview(bytearray(batch)) for i in PRODUCED}
    produce = asyncio.create_task(manager.append_records(entries, -1, 30_000))
    await asyncio.sleep(0)
    assert not produce.done()  # parked: the followers have not fetched yet
    for follower in (2, 3):
        for index in PRODUCED:  # the follower's fetch at its log end (the batch) ...
            manager.read_for_fetch(TOPIC, index, 0, 1 << 20, replica_id=follower)
        for index in PRODUCED:  # ... and its next fetch, past it
            manager.read_for_fetch(TOPIC, index, 1, 1 << 20, replica_id=follower)
    results = await asyncio.wait_for(produce, 5)
    return {key: result.error_code for key, result in results.items()}


def test_acks_all_produce_costs_the_same_with_20_or_200_hosted_partitions(tmp_path: Path) -> None:
    counts = []
    for hosted in (20, 200):
        manager = _manager(tmp_path, hosted)
        _CountingPartition.calls = Counter()
        assert asyncio.run(_acknowledged_produce(manager)) == {(TOPIC, i): ErrorCode.none for i in PRODUCED}
        assert all(manager.partition(TOPIC, i).high_watermark == 1 for i in PRODUCED)  # type: ignore[union-attr]
        counts.append(dict(_CountingPartition.calls))
        manager.log_manager.shutdown()
    assert counts[0] == counts[1], counts
    # per produced partition, not per hosted one
    assert counts[0]["read_records"] == 4 * len(PRODUCED)
    assert counts[0]["check_enough_replicas_reach_offset"] <= 4 * len(PRODUCED)
