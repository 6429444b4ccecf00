"""A Spark streaming query keeps running across a leader failover, and its output has no gap
(issue 3, test 6).

``LocalCluster(brokers=3)`` (combined broker+controller nodes), topics ``in`` (2 partitions) and
``out`` (2 partitions), both RF=3 with ``min.insync.replicas=2``. A ``readStream`` /
``writeStream`` ``format("kafkalite")`` query copies ``in`` to ``out`` on a 1 s processing-time
trigger while the leader of ``in``-0 (which may also lead ``out`` partitions, and may be the
active controller) is killed with SIGKILL and more records are produced with acks=all. The
source's consumer and the sink's producer must follow the new leaders: the query stays active and
every input value reaches ``out``.

Duplicates are tolerated: the sink is at-least-once like Spark's Kafka sink (a micro-batch whose
offsets were not committed to the checkpoint before a failure is written again). Missing values
are not: that would be a gap.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from fault.replication_helpers import FAULT_OVERRIDES, AckLog, confluent_producer

from spark_kafkalite.local_cluster import LocalCluster

IN_TOPIC, OUT_TOPIC = "in", "out"
N_BEFORE, M_AFTER = 300, 300


def _create_topics(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(t, 2, 3, config={"min.insync.replicas": "2"}) for t in (IN_TOPIC, OUT_TOPIC)]
    )
    for future in futures.values():
        future.result(30)
    for topic in (IN_TOPIC, OUT_TOPIC):
        for p in (0, 1):
            cluster.wait_for_leader(topic, p, timeout_s=30)
            cluster.wait_for_isr(topic, p, 3, timeout_s=30)


def _produce(cluster: LocalCluster, values: list[bytes], acks: AckLog, spread_s: float = 0.0) -> None:
    """Send ``values`` round-robin over both partitions with acks=all (idempotent), pacing them
    over ``spread_s`` seconds, and wait for every delivery report."""
    producer = confluent_producer(cluster)

    def callback(err: Any, msg: Any) -> None:
        if err is None:
            acks.on_ack(msg.value(), msg.partition(), msg.offset())
        else:
            acks.on_fail(msg.value(), str(err))

    pause_s = spread_s / max(1, len(values))
    for i, value in enumerate(values):
        producer.produce(IN_TOPIC, value=value, partition=i % 2, callback=callback)
        producer.poll(0)
        if pause_s:
            time.sleep(pause_s)
    remaining = producer.flush(90)
    assert remaining == 0, f"{remaining} records not delivered; failures {acks.failed[:3]}"


class _OutReader:
    """A confluent-kafka consumer on ``out`` from offset 0 that accumulates every value."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "verify-" + uuid.uuid4().hex[:6],
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.consumer.assign([TopicPartition(OUT_TOPIC, p, 0) for p in (0, 1)])
        self.values: list[bytes] = []

    def poll_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF or msg.error().retriable():
                    continue
                if msg.error().code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN):
                    continue
                raise AssertionError(f"consumer error on {OUT_TOPIC}: {msg.error()}")
            self.values.append(msg.value())

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.timeout(240)
def test_streaming_query_survives_leader_failover_without_gap(spark: Any, tmp_path: Path) -> None:
    cluster = LocalCluster(
        brokers=3, data_dir=tmp_path / "cluster", config_overrides=dict(FAULT_OVERRIDES)
    ).start()
    query = None
    reader = None
    try:
        _create_topics(cluster)
        acks = AckLog()
        before = [b"v-%05d" % i for i in range(N_BEFORE)]
        after = [b"v-%05d" % i for i in range(N_BEFORE, N_BEFORE + M_AFTER)]
        _produce(cluster, before, acks)

        bootstrap = cluster.bootstrap_servers
        query = (
            spark.readStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", IN_TOPIC)
            .option("startingOffsets", "earliest")
            .load()
            .select("key", "value")
            .writeStream.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", OUT_TOPIC)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(processingTime="1 second")
            .start()
        )
        reader = _OutReader(cluster)
        deadline = time.monotonic() + 90
        while not reader.values and time.monotonic() < deadline:
            assert query.isActive, f"query stopped before any output: {query.exception()}"
            reader.poll_for(1.0)
        assert reader.values, f"no output in {OUT_TOPIC} within 90 s; progress {query.recentProgress[-1:]}"

        victim = cluster.wait_for_leader(IN_TOPIC, 0)
        cluster.kill(victim)
        new_leader = cluster.wait_for_leader(IN_TOPIC, 0, not_in=[victim], timeout_s=30)
        assert new_leader != victim
        _produce(cluster, after, acks, spread_s=5.0)
        assert len(acks.acked) == N_BEFORE + M_AFTER and not acks.failed

        expected = set(before) | set(after)
        deadline = time.monotonic() + 90
        while not expected <= set(reader.values) and time.monotonic() < deadline:
            assert query.isActive, f"query died after the failover: {query.exception()}"
            reader.poll_for(1.0)
        missing = sorted(expected - set(reader.values))
        assert not missing, (
            f"{len(missing)} input values never reached {OUT_TOPIC} (a gap), e.g. {missing[:5]}; "
            f"killed leader {victim}; last progress {query.recentProgress[-1:]}; exception {query.exception()}"
        )
        assert query.isActive and query.exception() is None
        assert set(reader.values) == expected, (
            f"unexpected values {sorted(set(reader.values) - expected)[:5]}"
        )
        duplicates = len(reader.values) - len(set(reader.values))
        print(
            f"killed leader {victim} of {IN_TOPIC}-0 (new leader {new_leader}); {duplicates} duplicates in {OUT_TOPIC}"
        )
    finally:
        if query is not None:
            query.stop()
        if reader is not None:
            reader.close()
        cluster.stop()
