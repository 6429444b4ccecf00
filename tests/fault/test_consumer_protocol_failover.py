"""kill -9 of the broker coordinating a KIP-848 consumer group (3 brokers, ``__consumer_offsets``
replicated 3 ways): two confluent-kafka consumers with ``group.protocol=consumer`` keep their
group (its epoch, members and assignment are records the new coordinator loads: the epochs continue),
their commits
keep working, every record is read and none below a committed offset (no re-read of committed
work)."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.framing import decode_response, encode_request

pytestmark = pytest.mark.timeout(150)

PARTITIONS = 4
RECORDS = 400


def group_epochs(address: str, group: str) -> tuple[int, int]:
    """(group epoch, assignment epoch) from ConsumerGroupDescribe v1 sent to ``address``."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        request = ConsumerGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
        sock.sendall(encode_request(request, 1, "epochs"))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        _, response = decode_response(69, 1, sock.recv(size, socket.MSG_WAITALL))
    described = response.groups[0]
    assert described.error_code == 0, described
    return described.group_epoch, described.assignment_epoch


def test_consumer_group_survives_coordinator_kill_9() -> None:
    overrides = {
        "offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "500",
    }
    with LocalCluster(brokers=3, config_overrides=overrides) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic, group = f"cpf-{uuid.uuid4().hex[:8]}", f"cpf-g-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3)], operation_timeout=20).values():
            future.result(timeout=30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(RECORDS):
            producer.produce(topic, value=f"v{i}".encode(), partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        members = [confluent_kafka.Consumer(config), confluent_kafka.Consumer(config)]
        consumed: list[tuple[int, int]] = []
        committed: dict[int, int] = {}
        violations: list[str] = []

        def step() -> None:
            for consumer in members:
                messages = consumer.consume(num_messages=10, timeout=0.1)
                last: dict[int, int] = {}
                for m in messages:
                    if m.error() is not None:
                        continue
                    if m.offset() < committed.get(m.partition(), 0):
                        violations.append(f"{m.partition()}@{m.offset()} below {committed[m.partition()]}")
                    consumed.append((m.partition(), m.offset()))
                    last[m.partition()] = m.offset() + 1
                if last:
                    try:
                        consumer.commit(
                            offsets=[TopicPartition(topic, p, o) for p, o in last.items()], asynchronous=False
                        )
                    except confluent_kafka.KafkaException:
                        continue  # failed during the failover: the records are read again
                    committed.update(last)

        try:
            # a third member joins and leaves first: the group epoch is past what two members
            # joining a fresh group would reach, so a group rebuilt from nothing would show
            passing = confluent_kafka.Consumer(config)
            passing.subscribe([topic])
            deadline = time.monotonic() + 20
            while not passing.assignment() and time.monotonic() < deadline:
                passing.poll(0.1)
            passing.close()
            for consumer in members:
                consumer.subscribe([topic])
            deadline = time.monotonic() + 40
            while len(consumed) < RECORDS // 3 and time.monotonic() < deadline:
                step()
            assert len(consumed) >= RECORDS // 3
            described = admin.describe_consumer_groups([group])[group].result(timeout=10)
            coordinator = described.coordinator.id
            assert len(described.members) == 2
            epoch_before, _ = group_epochs(cluster.broker_address(coordinator), group)
            assert epoch_before >= 4
            cluster.kill(coordinator)
            deadline = time.monotonic() + 60
            while len(set(consumed)) < RECORDS and time.monotonic() < deadline:
                step()
            assert set(consumed) == {(i % PARTITIONS, i // PARTITIONS) for i in range(RECORDS)}
            after = admin.describe_consumer_groups([group])[group].result(timeout=20)
            assert after.coordinator.id != coordinator
            assert len(after.members) == 2
            # the new coordinator loaded the group: its epochs continue from the old ones
            epoch_after, _ = group_epochs(cluster.broker_address(after.coordinator.id), group)
            assert epoch_after >= epoch_before
        finally:
            for consumer in members:
                consumer.close()
        assert violations == []
