"""kill -9 of the group coordinator's broker (3 brokers) while our consumer is a group member:
the consumer rediscovers the coordinator, the group re-forms, commits keep working and a new
member resumes from the committed offsets; no committed record is consumed twice."""

from __future__ import annotations

import time
import uuid

import pytest

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.local_cluster import LocalCluster

PARTITIONS = 3


@pytest.mark.timeout(180)
def test_our_group_survives_coordinator_kill_9() -> None:
    overrides = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
    with LocalCluster(brokers=3, config_overrides=overrides) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic, group = f"fo-{uuid.uuid4().hex[:8]}", f"fo-g-{uuid.uuid4().hex[:8]}"
        with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
        with KafkaProducer({"bootstrap.servers": bootstrap, "acks": "all"}) as producer:
            for i in range(300):
                producer.send(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
            producer.flush()
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
            "max.poll.records": "20",
            "session.timeout.ms": "30000",
            "heartbeat.interval.ms": "500",
            "request.timeout.ms": "5000",
            "default.api.timeout.ms": "60000",
        }
        consumed: list[tuple[int, int]] = []
        committed: dict[int, int] = {}
        violations: list[str] = []

        def step(consumer: KafkaConsumer) -> None:
            for tp, records in consumer.poll(200).items():
                for r in records:
                    if r.offset < committed.get(tp.partition, 0):
                        violations.append(
                            f"{tp.partition}@{r.offset} below committed {committed[tp.partition]}"
                        )
                    consumed.append((tp.partition, r.offset))
                offsets = {tp: records[-1].offset + 1}
                consumer.commit_sync(offsets)
                committed[tp.partition] = records[-1].offset + 1

        consumer = KafkaConsumer(config)
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            while len(consumed) < 120 and time.monotonic() < deadline:
                step(consumer)
            assert len(consumed) >= 120
            with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
                coordinator = admin.describe_consumer_groups([group])[group].coordinator[0]
            cluster.kill(coordinator)
            deadline = time.monotonic() + 90
            while len(set(consumed)) < 300 and time.monotonic() < deadline:
                step(consumer)
            assert {(p, o) for p, o in consumed} == {(i % PARTITIONS, i // PARTITIONS) for i in range(300)}
        finally:
            consumer.close()
        assert violations == []
        with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
            assert admin.describe_consumer_groups([group])[group].coordinator[0] != coordinator
            assert admin.list_consumer_group_offsets(group) == {
                TopicPartition(topic, p): 100 for p in range(PARTITIONS)
            }
        # a new member resumes from the committed offsets: nothing left to read
        resumed = KafkaConsumer(config)
        try:
            resumed.subscribe([topic])
            deadline = time.monotonic() + 30
            while len(resumed.assignment()) < PARTITIONS and time.monotonic() < deadline:
                assert resumed.poll(200) == {}
            assert {resumed.position(TopicPartition(topic, p)) for p in range(PARTITIONS)} == {100}
        finally:
            resumed.close()
