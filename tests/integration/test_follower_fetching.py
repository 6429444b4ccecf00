"""KIP-392 fetching from the closest replica on a 3-broker cluster with one rack per broker and
``replica.selector.class`` set: the leader sends a consumer in a follower's rack to that
follower, which serves it up to its high watermark, and wakes its parked fetch when new records
are replicated. librdkafka (confluent-kafka, ``client.rack``) is the independent consumer; our
consumer is checked the same way. A consumer in the leader's rack stays on the leader."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(180)

RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(60) == 0


def _librdkafka_read(bootstrap: str, topic: str, rack: str, count: int) -> tuple[list[bytes], dict[str, Any]]:
    """``count`` values read by a librdkafka consumer in ``rack``, and its last statistics of
    partition 0 (``broker``: the broker it fetches from, ``leader``)."""
    stats: list[str] = []
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kip392-" + uuid.uuid4().hex[:6],
            "client.rack": rack,
            "enable.auto.commit": False,
            "statistics.interval.ms": 200,
            "stats_cb": stats.append,
            "fetch.wait.max.ms": 100,
        }
    )
    values: list[bytes] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        seen = len(stats)
        while len(stats) <= seen + 1 and time.monotonic() < deadline + 5:
            consumer.poll(0.1)  # one more statistics report, taken after the reads
    finally:
        consumer.close()
    return values, json.loads(stats[-1])["topics"][topic]["partitions"]["0"]


def test_consumers_read_from_the_replica_in_their_rack() -> None:
    overrides = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
    with LocalCluster(brokers=3, config_overrides=overrides, racks=RACKS) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = "rack-" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        cluster.wait_for_isr(topic, 0, 3, timeout_s=60)
        leader = cluster.partition(topic, 0).leader
        follower = min(n for n in RACKS if n != leader)
        first = [f"a-{i}".encode() for i in range(200)]
        _produce(bootstrap, topic, first)

        # librdkafka in the follower's rack is redirected there; in the leader's rack it stays
        values, partition_stats = _librdkafka_read(bootstrap, topic, RACKS[follower], len(first))
        assert values == first
        assert (partition_stats["leader"], partition_stats["broker"]) == (leader, follower)
        values, partition_stats = _librdkafka_read(bootstrap, topic, RACKS[leader], len(first))
        assert values == first
        assert (partition_stats["leader"], partition_stats["broker"]) == (leader, leader)

        # ours: redirected, then parked on the follower (a long max wait) and woken there when
        # the next records are replicated, well before the wait would end
        tp = TopicPartition(topic, 0)
        consumer = KafkaConsumer(
            {
                "bootstrap.servers": bootstrap,
                "auto.offset.reset": "earliest",
                "client.rack": RACKS[follower],
                "fetch.max.wait.ms": 30000,
                "request.timeout.ms": 40000,
            }
        )
        got: list[bytes] = []
        with consumer:
            consumer.assign([tp])
            deadline = time.monotonic() + 30
            while len(got) < len(first) and time.monotonic() < deadline:
                for records in consumer.poll(200).values():
                    got.extend(r.value for r in records)
            assert got == first
            assert consumer._subscriptions.state(tp).preferred_read_replica == follower
            for _ in range(3):  # let its fetch park on the follower
                consumer.poll(100)
            second = [f"b-{i}".encode() for i in range(50)]
            _produce(bootstrap, topic, second)
            started = time.monotonic()
            while len(got) < len(first) + len(second) and time.monotonic() - started < 25:
                for records in consumer.poll(200).values():
                    got.extend(r.value for r in records)
            woken_after_s = time.monotonic() - started
            assert got == first + second
            assert woken_after_s < 15, f"the follower answered after {woken_after_s:.1f} s, at its max wait"
            assert consumer._subscriptions.state(tp).preferred_read_replica == follower
