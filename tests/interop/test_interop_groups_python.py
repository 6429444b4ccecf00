"""kafka-python and aiokafka consumer groups against the broker's group coordinator (each client
negotiates its own JoinGroup / SyncGroup / OffsetCommit versions), and a mixed group of
confluent-kafka, kafka-python and aiokafka members agreeing on a common assignor."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import kafka
import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from group_peers import Collector, ck_member, create_topic, group_cluster, produce, wait_balanced

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(150)

PARTITIONS = 4
PER_PARTITION = 8


@pytest.fixture(scope="module")
def gcluster() -> Iterator[LocalCluster]:
    with group_cluster() as cluster:
        yield cluster


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"pgrp-topic-{suffix}", f"pgrp-{suffix}"


class KpMember(threading.Thread):
    """A kafka-python group member polled in its own thread (the client is not thread-safe)."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        super().__init__(daemon=True)
        self.records: list[tuple[int, int]] = []
        self.assignment: set[int] = set()
        self.error: BaseException | None = None
        self.stop_event = threading.Event()
        self.commit_requested = threading.Event()
        self.committed = threading.Event()
        self.consumer = kafka.KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            **config,
        )

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                for tp, messages in self.consumer.poll(timeout_ms=100).items():
                    self.records.extend((tp.partition, m.offset) for m in messages)
                self.assignment = {tp.partition for tp in self.consumer.assignment()}
                if self.commit_requested.is_set() and not self.committed.is_set():
                    self.consumer.commit()
                    self.committed.set()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.consumer.close()


def _wait(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _balanced(sets: list[set[int]], partitions: int) -> bool:
    return (
        all(sets) and sum(len(s) for s in sets) == partitions and set().union(*sets) == set(range(partitions))
    )


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    probe = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in probe.committed(tps, timeout=15)]
    finally:
        probe.close()


def test_kafka_python_group_shares_partitions_and_commits(gcluster: LocalCluster) -> None:
    bootstrap = gcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
    members = [KpMember(bootstrap, group, topic) for _ in range(2)]
    for m in members:
        m.start()
    try:
        _wait(
            lambda: _balanced([m.assignment for m in members], PARTITIONS),
            60,
            "a balanced kafka-python group",
        )
        _wait(
            lambda: len({r for m in members for r in m.records}) == PARTITIONS * PER_PARTITION,
            30,
            "all records",
        )
        for m in members:
            m.commit_requested.set()
        _wait(lambda: all(m.committed.is_set() for m in members), 30, "commits")
        assert all(m.error is None for m in members), [m.error for m in members]
        assert _committed(bootstrap, group, topic, PARTITIONS) == [PER_PARTITION] * PARTITIONS
        # one member leaves: the other takes every partition
        members[1].stop_event.set()
        members[1].join(15)
        _wait(lambda: members[0].assignment == set(range(PARTITIONS)), 60, "the survivor to own everything")
    finally:
        for m in members:
            m.stop_event.set()
        for m in members:
            m.join(15)
    assert all(m.error is None for m in members), [m.error for m in members]


def test_aiokafka_group_shares_partitions_and_commits(gcluster: LocalCluster) -> None:
    bootstrap = gcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, PER_PARTITION)

    async def scenario() -> None:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )
            for _ in range(2)
        ]
        for c in consumers:
            await c.start()
        seen: set[tuple[int, int]] = set()
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for c in consumers:
                    batch = await c.getmany(timeout_ms=100)
                    for tp, messages in batch.items():
                        seen.update((tp.partition, m.offset) for m in messages)
                sets = [{tp.partition for tp in c.assignment()} for c in consumers]
                if _balanced(sets, PARTITIONS) and len(seen) == PARTITIONS * PER_PARTITION:
                    break
            assert _balanced([{tp.partition for tp in c.assignment()} for c in consumers], PARTITIONS)
            assert len(seen) == PARTITIONS * PER_PARTITION
            for c in consumers:
                await c.commit()
            committed = await consumers[0].committed(AioTopicPartition(topic, 0))
            assert committed == PER_PARTITION
        finally:
            for c in consumers:
                await c.stop()

    asyncio.run(scenario())
    assert _committed(bootstrap, group, topic, PARTITIONS) == [PER_PARTITION] * PARTITIONS


def test_mixed_group_of_three_clients(gcluster: LocalCluster) -> None:
    """librdkafka (range, roundrobin), kafka-python (range, roundrobin) and aiokafka
    (roundrobin) members agree on roundrobin and split the partitions between them."""
    bootstrap = gcluster.bootstrap_servers
    topic, group = _names()
    partitions = 6
    create_topic(bootstrap, topic, partitions)
    ck = ck_member(bootstrap, group, topic)
    kp = KpMember(bootstrap, group, topic)
    kp.start()
    result: dict[str, Any] = {}
    stop = threading.Event()

    def run_aiokafka() -> None:
        async def member() -> None:
            consumer = AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=6000,
                heartbeat_interval_ms=500,
            )
            await consumer.start()
            try:
                while not stop.is_set():
                    await consumer.getmany(timeout_ms=100)
                    result["aio"] = {tp.partition for tp in consumer.assignment()}
            finally:
                await consumer.stop()

        try:
            asyncio.run(member())
        except BaseException as exc:  # noqa: BLE001
            result["error"] = exc

    aio_thread = threading.Thread(target=run_aiokafka, daemon=True)
    aio_thread.start()
    collector = Collector()
    try:
        deadline = time.monotonic() + 90
        sets: list[set[int]] = []
        while time.monotonic() < deadline:
            collector.poll([ck])
            sets = [{tp.partition for tp in ck.assignment()}, kp.assignment, result.get("aio", set())]
            if _balanced(sets, partitions):
                break
        assert _balanced(sets, partitions), sets
        assert "error" not in result and kp.error is None
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bootstrap})  # keep a reference until the result arrives
        described = admin.describe_consumer_groups([group])[group].result(15)
        assert described.partition_assignor == "roundrobin"
        assert len(described.members) == 3
    finally:
        stop.set()
        kp.stop_event.set()
        ck.close()
        kp.join(15)
        aio_thread.join(15)


def test_kafka_python_admin_group_apis(gcluster: LocalCluster) -> None:
    """kafka-python's admin (its own versions of OffsetCommit, OffsetFetch, ListGroups,
    DescribeGroups, OffsetDelete, LeaveGroup v3+ by instance id, DeleteGroups)."""
    from kafka import KafkaAdminClient
    from kafka.admin import MemberToRemove
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KpTopicPartition

    bootstrap = gcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        tp0, tp1 = KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)
        altered = admin.alter_group_offsets(
            group, {tp0: OffsetAndMetadata(5, "m", -1), tp1: OffsetAndMetadata(7, "", -1)}
        )
        assert {tp: err.__name__ for tp, err in altered.items()} == {tp0: "NoError", tp1: "NoError"}
        listed = admin.list_group_offsets({group: None})[group]
        assert {tp: (o.offset, o.metadata) for tp, o in listed.items()} == {tp0: (5, "m"), tp1: (7, "")}
        member = ck_member(bootstrap, group, topic, **{"group.instance.id": "kp-admin-static"})
        try:
            wait_balanced([member], 2, Collector())
            groups = {g["group_id"]: g for g in admin.list_groups()}
            assert groups[group]["group_state"] == "Stable" and groups[group]["protocol_type"] == "consumer"
            described = admin.describe_groups([group])[group]
            assert described["protocol_data"] == "range"
            [m] = described["members"]
            assert m["group_instance_id"] == "kp-admin-static" and m["client_host"] == "/127.0.0.1"
            assert m["member_metadata"]["topics"] == [topic]
            assert m["member_assignment"]["assigned_partitions"] == [{"topic": topic, "partitions": [0, 1]}]
            # subscribed topic of a non-empty consumer group: its offsets can't be deleted
            deleted = admin.delete_group_offsets(group, [tp0])
            assert deleted[tp0].__name__ == "GroupSubscribedToTopicError"
            assert admin.delete_groups([group])[group] == "NonEmptyGroupError"
        finally:
            member.close()  # a static member does not leave on close (KIP-345)...
        removed = admin.remove_group_members(group, [MemberToRemove(group_instance_id="kp-admin-static")])
        assert [err.__name__ for err in removed.values()] == ["NoError"]  # ...the admin removes it
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
        assert admin.delete_group_offsets(group, [tp0])[tp0].__name__ == "NoError"
        assert set(admin.list_group_offsets({group: None})[group]) == {tp1}
        assert admin.delete_groups([group])[group] == "OK"
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        admin.close()
