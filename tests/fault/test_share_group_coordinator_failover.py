"""kill -9 of the broker coordinating a KIP-932 share group (3 brokers, ``__consumer_offsets``
replicated 3 ways) while two confluent-kafka ``ShareConsumer``s read a partition led by another
broker: the members rejoin the new coordinator and the share-partition state, kept by the
partition's leader, is intact: every record is delivered once, none redelivered, none lost."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import confluent_kafka
import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.framing import decode_response, encode_request

pytestmark = pytest.mark.timeout(150)

RECORDS = 300


def find_coordinator(address: str, group: str) -> int:
    """The group's coordinator from FindCoordinator v4 (retried while it is being created)."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + 30
    while True:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                encode_request(FindCoordinatorRequest(key_type=0, coordinator_keys=(group,)), 1, "fc")
            )
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            _, response = decode_response(10, 4, sock.recv(size, socket.MSG_WAITALL))
        found = response.coordinators[0]
        if found.error_code == 0:
            return int(found.node_id)
        assert time.monotonic() < deadline, found
        time.sleep(0.2)


def share_group_members(address: str, group: str) -> int:
    """How many members ShareGroupDescribe v1 sent to ``address`` reports."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        request = ShareGroupDescribeRequest(group_ids=(group,), include_authorized_operations=False)
        sock.sendall(encode_request(request, 1, "members"))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        _, response = decode_response(77, 1, sock.recv(size, socket.MSG_WAITALL))
    described = response.groups[0]
    return len(described.members) if described.error_code == 0 else -int(described.error_code)


def test_share_group_survives_coordinator_kill_9() -> None:
    overrides = {"offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "3"}
    with LocalCluster(brokers=3, config_overrides=overrides) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic, group = f"sgf-{uuid.uuid4().hex[:8]}", f"sgf-g-{uuid.uuid4().hex[:8]}"
        coordinator = find_coordinator(bootstrap.split(",")[0], group)
        leader = next(n for n in cluster.node_ids if n != coordinator)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics(
            [NewTopic(topic, num_partitions=1, replica_assignment=[[leader]])]
        ).values():
            future.result(timeout=30)
        resource = ConfigResource(
            ResourceType.GROUP,
            group,
            incremental_configs=[
                ConfigEntry(
                    "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
                )
            ],
        )
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=15)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        members = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(2)]
        deliveries: list[tuple[int, int]] = []
        produced = 0

        def step() -> None:
            nonlocal produced
            if produced < RECORDS:  # records keep arriving across the failover, 10 per step
                for i in range(produced, produced + 10):
                    producer.produce(topic, value=f"v{i}".encode(), partition=0)
                producer.flush(10)
                produced += 10
            for member in members:
                for m in member.poll(timeout=0.1) or []:
                    if m.error() is None:
                        deliveries.append((m.offset(), m.delivery_count()))

        try:
            for member in members:
                member.subscribe([topic])
            deadline = time.monotonic() + 40
            while len(deliveries) < RECORDS // 3 and time.monotonic() < deadline:
                step()
            assert RECORDS // 3 <= len(deliveries) < RECORDS
            cluster.kill(coordinator)
            deadline = time.monotonic() + 60
            while len(deliveries) < RECORDS and time.monotonic() < deadline:
                step()
            end = time.monotonic() + 2
            while time.monotonic() < end:
                step()
            # both members rejoined the new coordinator
            successor = find_coordinator(cluster.broker_address(leader), group)
            assert successor != coordinator
            deadline = time.monotonic() + 20
            while share_group_members(cluster.broker_address(successor), group) != 2:
                assert time.monotonic() < deadline
                step()
        finally:
            for member in members:
                member.close()
        assert sorted(o for o, _ in deliveries) == list(range(RECORDS))
        assert {c for _, c in deliveries} == {1}
