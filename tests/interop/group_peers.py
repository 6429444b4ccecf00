"""Shared helpers of the consumer-group interop tests: a broker tuned for fast rebalances and
confluent-kafka group members polled until their assignments settle."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import confluent_kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CkNewTopic

from spark_kafkalite.local_cluster import LocalCluster

# Small __consumer_offsets, a short initial rebalance delay and session timeouts allowed down to 1 s.
GROUP_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "200",
    "group.min.session.timeout.ms": "1000",
}


@contextmanager
def group_cluster(**extra: str) -> Iterator[LocalCluster]:
    cluster = LocalCluster(brokers=1, config_overrides={**GROUP_OVERRIDES, **extra})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([CkNewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = "v") -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, value=f"{tag}-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def ck_member(bootstrap: str, group: str, topic: str, **config: object) -> confluent_kafka.Consumer:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **config,
        }
    )
    consumer.subscribe([topic])
    return consumer


class Collector:
    """Polls members round-robin and records (member index, partition, offset, value)."""

    def __init__(self) -> None:
        self.records: list[tuple[int, int, int, bytes]] = []

    def poll(self, members: list[confluent_kafka.Consumer], timeout_s: float = 0.05) -> None:
        for index, member in enumerate(members):
            for m in member.consume(num_messages=500, timeout=timeout_s):
                assert m.error() is None, m.error()
                self.records.append((index, m.partition(), m.offset(), m.value()))


def assignment_sets(members: list[confluent_kafka.Consumer]) -> list[set[int]]:
    return [{tp.partition for tp in m.assignment()} for m in members]


def wait_balanced(
    members: list[confluent_kafka.Consumer], partitions: int, collector: Collector, timeout_s: float = 40.0
) -> list[set[int]]:
    """Poll until every partition is owned by exactly one member and each member owns some."""
    deadline = time.monotonic() + timeout_s
    sets: list[set[int]] = []
    while time.monotonic() < deadline:
        collector.poll(members)
        sets = assignment_sets(members)
        union = set().union(*sets)
        if union == set(range(partitions)) and sum(len(s) for s in sets) == partitions and all(sets):
            return sets
    raise AssertionError(f"assignments never balanced: {sets}")
