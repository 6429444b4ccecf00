"""confluent-kafka (librdkafka) consumer groups against the broker's group coordinator: joins,
rebalances on join and leave, exclusive partition ownership, commits that survive a broker
restart, static membership, and the admin group APIs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from group_peers import Collector, ck_member, create_topic, group_cluster, produce, wait_balanced

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(150)

PARTITIONS = 6
PER_PARTITION = 10


@pytest.fixture(scope="module")
def gcluster() -> Iterator[LocalCluster]:
    with group_cluster() as cluster:
        yield cluster


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"grp-topic-{suffix}", f"grp-{suffix}"


def _close(members: list[confluent_kafka.Consumer]) -> None:
    for m in members:
        m.close()


def test_group_rebalances_on_join_and_leave_with_exclusive_ownership(gcluster: LocalCluster) -> None:
    bootstrap = gcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
    collector = Collector()
    members = [ck_member(bootstrap, group, topic)]
    try:
        assert wait_balanced(members, PARTITIONS, collector) == [set(range(PARTITIONS))]
        members.append(ck_member(bootstrap, group, topic))
        two = wait_balanced(members, PARTITIONS, collector)
        assert two[0].isdisjoint(two[1])
        members.append(ck_member(bootstrap, group, topic))
        three = wait_balanced(members, PARTITIONS, collector)
        assert [len(s) for s in three] == [2, 2, 2]
        leaving = members.pop(1)
        leaving.close()  # LeaveGroup: the others take over its partitions
        after = wait_balanced(members, PARTITIONS, collector)
        assert sorted(len(s) for s in after) == [3, 3]
        deadline = time.monotonic() + 20
        while (
            len({(p, o) for _, p, o, _ in collector.records}) < PARTITIONS * PER_PARTITION
            and time.monotonic() < deadline
        ):
            collector.poll(members)
        seen = {(p, o) for _, p, o, _ in collector.records}
        assert seen == {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(timeout=15)
        assert str(described.state).endswith("STABLE")
        assert len(described.members) == 2
        owned = sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions)
        assert owned == list(range(PARTITIONS))
        listed = {g.group_id for g in admin.list_consumer_groups().result(timeout=15).valid}
        assert group in listed
    finally:
        _close(members)


def test_committed_offsets_survive_broker_restart() -> None:
    with group_cluster() as cluster:
        bootstrap = cluster.bootstrap_servers
        topic, group = _names()
        create_topic(bootstrap, topic, PARTITIONS)
        produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
        collector = Collector()
        members = [ck_member(bootstrap, group, topic), ck_member(bootstrap, group, topic)]
        wait_balanced(members, PARTITIONS, collector)
        deadline = time.monotonic() + 20
        while len(collector.records) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            collector.poll(members)
        assert len(collector.records) == PARTITIONS * PER_PARTITION
        for m in members:
            m.commit(asynchronous=False)
        tps = [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
        assert [tp.offset for tp in members[0].committed(tps, timeout=10)] == [PER_PARTITION] * PARTITIONS
        _close(members)

        cluster.restart(1)
        bootstrap = cluster.bootstrap_servers
        produce(bootstrap, topic, PARTITIONS, 2, tag="after")
        fresh = ck_member(bootstrap, group, topic)
        try:
            committed = fresh.committed(tps, timeout=20)
            assert [tp.offset for tp in committed] == [PER_PARTITION] * PARTITIONS
            again = Collector()
            wait_balanced([fresh], PARTITIONS, again)
            deadline = time.monotonic() + 20
            while len(again.records) < PARTITIONS * 2 and time.monotonic() < deadline:
                again.poll([fresh])
            time.sleep(0.5)
            again.poll([fresh])
            # resumed from the committed offsets: only the records produced after the restart
            assert sorted((p, o) for _, p, o, _ in again.records) == [
                (p, o) for p in range(PARTITIONS) for o in (PER_PARTITION, PER_PARTITION + 1)
            ]
            assert all(v.startswith(b"after-") for *_, v in again.records)
        finally:
            fresh.close()


def test_static_member_restart_keeps_assignment_without_rebalance(gcluster: LocalCluster) -> None:
    bootstrap = gcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, 4)
    collector = Collector()
    a = ck_member(bootstrap, group, topic, **{"group.instance.id": "instance-a"})
    b = ck_member(bootstrap, group, topic, **{"group.instance.id": "instance-b"})
    members = [a, b]
    try:
        before = wait_balanced(members, 4, collector)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        first = admin.describe_consumer_groups([group])[group].result(timeout=15)
        old_ids = {m.group_instance_id: m.member_id for m in first.members}
        assert set(old_ids) == {"instance-a", "instance-b"}
        # a static member closing does not leave the group (KIP-345): its replacement takes
        # the same instance id back without a rebalance
        b.close()
        members = [a]
        b2 = ck_member(bootstrap, group, topic, **{"group.instance.id": "instance-b"})
        members = [a, b2]
        after = wait_balanced(members, 4, collector)
        assert after == before
        second = admin.describe_consumer_groups([group])[group].result(timeout=15)
        new_ids = {m.group_instance_id: m.member_id for m in second.members}
        assert new_ids["instance-a"] == old_ids["instance-a"]
        assert new_ids["instance-b"] != old_ids["instance-b"]
    finally:
        _close(members)


def test_admin_offsets_and_delete_group(gcluster: LocalCluster) -> None:
    bootstrap = gcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)])
    altered = admin.alter_consumer_group_offsets([request])[group].result(timeout=15)
    assert all(tp.error is None for tp in altered.topic_partitions)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(
        timeout=15
    )
    assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == [(0, 5), (1, 7)]
    member = ck_member(bootstrap, group, topic)
    try:
        wait_balanced([member], 2, Collector())
        with pytest.raises(confluent_kafka.KafkaException) as info:
            admin.delete_consumer_groups([group])[group].result(timeout=15)
        assert info.value.args[0].code() == confluent_kafka.KafkaError.NON_EMPTY_GROUP
    finally:
        member.close()
    admin.delete_consumer_groups([group])[group].result(timeout=15)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(
        timeout=15
    )
    assert [tp.offset for tp in listed.topic_partitions] == []
    with pytest.raises(confluent_kafka.KafkaException) as info:
        admin.delete_consumer_groups([group])[group].result(timeout=15)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.GROUP_ID_NOT_FOUND


def test_cooperative_sticky_incremental_rebalances(gcluster: LocalCluster) -> None:
    """KIP-429 runs entirely in the clients over the classic protocol: members keep their
    partitions across a join (only moved ones are revoked, in a second rebalance)."""
    bootstrap = gcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, PARTITIONS)
    collector = Collector()
    config = {"partition.assignment.strategy": "cooperative-sticky"}
    members = [ck_member(bootstrap, group, topic, **config)]
    try:
        assert wait_balanced(members, PARTITIONS, collector) == [set(range(PARTITIONS))]
        members.append(ck_member(bootstrap, group, topic, **config))
        first, second = wait_balanced(members, PARTITIONS, collector)
        assert len(first) == len(second) == PARTITIONS // 2
        members.append(ck_member(bootstrap, group, topic, **config))
        after = wait_balanced(members, PARTITIONS, collector)
        assert [len(s) for s in after] == [2, 2, 2]
        assert after[0] <= first and after[1] <= second  # sticky: nothing moved between the old members
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(timeout=15)
        assert described.partition_assignor == "cooperative-sticky"
    finally:
        _close(members)
