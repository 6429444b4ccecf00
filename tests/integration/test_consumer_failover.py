"""Our consumer across a leader failover on a 3-broker cluster (SIGKILL of the leader): it
refreshes metadata, validates its position against the new leader (KIP-320) and goes on with
no record lost or repeated. confluent-kafka (acks=all) is the independent producer."""

from __future__ import annotations

import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(150)


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000}
    )
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(60) == 0


def test_consumer_follows_the_new_leader_after_a_kill() -> None:
    with LocalCluster(brokers=3) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = "fo-" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        cluster.wait_for_isr(topic, 0, 3, timeout_s=60)
        first = [f"a-{i}".encode() for i in range(50)]
        produce(bootstrap, topic, first)
        tp = TopicPartition(topic, 0)
        consumer = KafkaConsumer(
            {
                "bootstrap.servers": bootstrap,
                "auto.offset.reset": "earliest",
                "fetch.max.wait.ms": 200,
                "retry.backoff.ms": 100,
                "reconnect.backoff.ms": 50,
                "request.timeout.ms": 10000,
            }
        )
        got: list[tuple[int, bytes]] = []
        with consumer:
            consumer.assign([tp])
            deadline = time.monotonic() + 30
            while len(got) < 50 and time.monotonic() < deadline:
                for records in consumer.poll(200).values():
                    got.extend((r.offset, r.value) for r in records)
            old_leader = cluster.partition(topic, 0).leader
            old_epoch = consumer._subscriptions.state(tp).current_leader_epoch
            cluster.kill(old_leader)
            new_leader = cluster.wait_for_leader(topic, 0, not_in=[old_leader], timeout_s=60)
            second = [f"b-{i}".encode() for i in range(50)]
            produce(bootstrap, topic, second)
            deadline = time.monotonic() + 60
            while len(got) < 100 and time.monotonic() < deadline:
                for records in consumer.poll(200).values():
                    got.extend((r.offset, r.value) for r in records)
            assert [o for o, _ in got] == list(range(100))
            assert [v for _, v in got] == first + second
            state = consumer._subscriptions.state(tp)
            assert new_leader != old_leader
            assert state.current_leader_epoch is not None and old_epoch is not None
            assert state.current_leader_epoch > old_epoch and not state.awaiting_validation
