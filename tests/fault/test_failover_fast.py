"""Failover with LocalCluster's own settings (issue #14 item 4), real broker processes.

* Controlled shutdown (SIGTERM) of a partition leader under an idempotent ``acks=all`` load from
  our producer: the leadership moves before the broker exits and the producer sees no error
  (every record acknowledged, read back once, in order).
* A paused (SIGSTOP) leader stops heartbeating: the controller fences it and a new leader is
  elected within ``broker.session.timeout.ms`` (plus the controller's check tick and the commit),
  and the load carries on there; resumed, the old leader rejoins the ISR.

The kill -9 failover time itself is measured in ``bench/failover.py`` (not in a timed test).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fault.replication_helpers import AckLog, assert_acked_read_back_once_in_order, consume_all, create_topic

from spark_kafkalite.client import KafkaProducer
from spark_kafkalite.local_cluster import MULTI_NODE_DEFAULTS, LocalCluster

pytestmark = pytest.mark.timeout(90)

SESSION_TIMEOUT_S = int(MULTI_NODE_DEFAULTS["broker.session.timeout.ms"]) / 1000
#: the controller checks sessions every min(0.25 s, session/4); the fence and the election are
#: one Raft commit each; wait_until polls metadata. Generous on 2 shared cores.
SLACK_S = 1.5


class _Load:
    """Our idempotent acks=all producer sending ``seq-N`` at a steady pace from a thread."""

    def __init__(self, cluster: LocalCluster, topic: str, rate_per_s: int = 300) -> None:
        self.acks = AckLog()
        self.producer = KafkaProducer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                # A SIGSTOPped leader keeps its sockets open: a request in flight to it is only
                # given up after request.timeout.ms (as in Kafka's producer) and then retried at
                # the new leader. Kafka's 30 s default would stall the load for ~30 s.
                "request.timeout.ms": 5000,
                "delivery.timeout.ms": 60000,
            }
        )
        self.topic = topic
        self.rate_per_s = rate_per_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _callback(self, value: bytes) -> Any:
        def done(metadata: Any, error: BaseException | None) -> None:
            if error is None:
                self.acks.on_ack(value, metadata.partition, metadata.offset)
            else:
                self.acks.on_fail(value, repr(error))

        return done

    def _run(self) -> None:
        seq = 0
        next_t = time.monotonic()
        while not self.stop.is_set():
            value = b"seq-%08d" % seq
            self.producer.send(self.topic, value, partition=0, callback=self._callback(value))
            seq += 1
            next_t += 1 / self.rate_per_s
            time.sleep(max(0.0, next_t - time.monotonic()))

    def wait_acked(self, count: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acks.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acks.acked)} of {count} acknowledged"
            time.sleep(0.01)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.producer.flush(60)
        self.producer.close(10)


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    # LocalCluster's own failure-detection settings; only the ISR lag is short, so a stopped
    # follower leaves the ISR quickly (as in the other fault tests).
    with LocalCluster(
        brokers=3, data_dir=tmp_path / "cluster", config_overrides={"replica.lag.time.max.ms": "4000"}
    ) as c:
        yield c


def test_controlled_shutdown_of_the_leader_gives_no_produce_error(cluster: LocalCluster) -> None:
    topic = create_topic(cluster)
    leader = cluster.wait_for_leader(topic, 0)
    load = _Load(cluster, topic)
    try:
        load.wait_acked(300)
        assert cluster.terminate(leader) == 0
        assert f"controlled shutdown of broker {leader} done" in cluster.output(leader)
        new_leader = cluster.wait_for_leader(topic, 0, not_in=[leader], timeout_s=10)
        acked_at_stop = len(load.acks.acked)
        load.wait_acked(acked_at_stop + 300)
    finally:
        load.close()
    assert load.acks.failed == [], f"produce errors: {load.acks.failed[:3]}"
    assert new_leader != leader
    assert_acked_read_back_once_in_order(load.acks, consume_all(cluster, topic))


def test_paused_leader_is_fenced_and_replaced_within_the_session_timeout(cluster: LocalCluster) -> None:
    topic = create_topic(cluster)
    leader = cluster.wait_for_leader(topic, 0)
    load = _Load(cluster, topic)
    try:
        load.wait_acked(300)
        paused_at = time.monotonic()
        cluster.pause(leader)
        try:
            metadata = cluster.wait_until(
                lambda c: (
                    c if leader not in c.nodes and c.partitions[topic][0].leader not in (-1, leader) else None
                ),
                timeout_s=SESSION_TIMEOUT_S + 10,
                interval_s=0.05,
            )
            replaced_s = time.monotonic() - paused_at
            new_leader = metadata.partitions[topic][0].leader
            acked_at_switch = len(load.acks.acked)
            load.wait_acked(acked_at_switch + 200)  # the load goes on at the new leader
        finally:
            cluster.resume(leader)
        cluster.wait_for_isr(topic, 0, 3, timeout_s=30)  # the old leader rejoins as a follower
    finally:
        load.close()
    assert replaced_s <= SESSION_TIMEOUT_S + SLACK_S, (
        f"new leader {new_leader} after {replaced_s:.2f} s (session timeout {SESSION_TIMEOUT_S} s)"
    )
    assert f"fencing broker {leader}" in "".join(cluster.output(n) for n in (1, 2, 3) if n != leader)
    assert load.acks.failed == [], f"produce errors: {load.acks.failed[:3]}"
    assert_acked_read_back_once_in_order(load.acks, consume_all(cluster, topic))
