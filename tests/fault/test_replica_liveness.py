"""Replica liveness on real broker processes (issue #14 item 3).

A broker that became leader, appended nothing, and became a follower again kept the empty
trailing epoch in its leader-epoch cache; its leader answered every fetch with the same diverging
epoch and it never rejoined the ISR. Here the sequence is made deterministic: a controlled
shutdown moves the leadership to a second broker (which appends nothing), the first comes back
and a preferred-leader election (ElectLeaders, KIP-460) makes it leader again, so the second
becomes a follower with ``... e LEO`` for an epoch nobody else has. New records must reach it
and it must stay in (or rejoin) the ISR.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient
from fault.replication_helpers import confluent_producer, create_topic, start_cluster

pytestmark = pytest.mark.timeout(90)

LAG_MS = 2000


def _log_bytes(cluster, topic: str, node_id: int) -> bytes:  # type: ignore[no-untyped-def]
    part_dir = cluster.log_dir(node_id) / f"{topic}-0"
    return b"".join(p.read_bytes() for p in sorted(part_dir.glob("*.log")))


def _epochs(cluster, topic: str, node_id: int) -> list[str]:  # type: ignore[no-untyped-def]
    path = cluster.log_dir(node_id) / f"{topic}-0" / "leader-epoch-checkpoint"
    return path.read_text().split("\n")[2:-1] if path.exists() else []


def _produce(cluster, topic: str, count: int, tag: str) -> None:  # type: ignore[no-untyped-def]
    producer = confluent_producer(cluster)
    for i in range(count):
        producer.produce(topic, value=f"{tag}-{i:06d}".encode())
    assert producer.flush(30) == 0


def test_follower_after_an_empty_leadership_rejoins_the_isr(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path, **{"replica.lag.time.max.ms": str(LAG_MS)})
    try:
        topic = create_topic(cluster)
        _produce(cluster, topic, 200, "a")
        first = cluster.partition(topic, 0)
        preferred = first.replicas[0]
        assert first.leader == preferred
        cluster.terminate(preferred)  # controlled shutdown: the leadership moves, nothing appended
        empty_leader = cluster.wait_for_leader(topic, 0, not_in=[preferred], timeout_s=20)
        epoch_of_empty = cluster.partition(topic, 0).leader_epoch
        cluster.restart(preferred)
        cluster.wait_for_isr(topic, 0, 3, timeout_s=30)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
        assert cluster.wait_for_leader(topic, 0, not_in=[empty_leader], timeout_s=20) == preferred

        _produce(cluster, topic, 200, "b")
        time.sleep(2 * LAG_MS / 1000)  # a stuck follower would be out of the ISR by now
        cluster.wait_for_isr(topic, 0, 3, timeout_s=15)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            logs = {n: _log_bytes(cluster, topic, n) for n in first.replicas}
            if len(set(logs.values())) == 1:
                break
            time.sleep(0.2)
        sizes = {n: len(b) for n, b in logs.items()}
        assert len(set(logs.values())) == 1, f"replicas differ: {sizes}"
        assert str(epoch_of_empty) not in [line.split()[0] for line in _epochs(cluster, topic, empty_leader)]
        output = cluster.output(empty_leader)
        # The precondition happened: the new leader answered a diverging epoch for the empty one.
        assert f"{topic}-0: diverging epoch" in output and "removes no record" in output, output[-3000:]
        assert "twice" not in output
    finally:
        cluster.stop()
