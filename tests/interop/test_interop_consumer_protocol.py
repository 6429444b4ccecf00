"""confluent-kafka (librdkafka >= 2.12) consumers with ``group.protocol=consumer`` (KIP-848)
against the broker: server-side assignment, incremental rebalances when members join, leave or
are killed (session timeout), a regular-expression subscription that picks up a topic created
later, commits and committed offsets with member epochs, and the admin view of the group
(ListGroups type ``consumer``, ConsumerGroupDescribe), and a classic librdkafka group upgraded
online to a mixed group and back. One broker shared by the module, with
Kafka's consumer group session / heartbeat bounds lowered so a killed member is noticed in 2 s."""

from __future__ import annotations

import select
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka import ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient
from group_peers import Collector, assignment_sets, create_topic, group_cluster, produce, wait_balanced

from spark_kafkalite.client import KafkaAdminClient
from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 4
PER_PARTITION = 5
#: Kafka's bounds are 45-60 s sessions and 5-15 s heartbeats; lowered for the test only
FAST_GROUPS = {
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "2000",
    "group.consumer.min.heartbeat.interval.ms": "200",
    "group.consumer.heartbeat.interval.ms": "200",
}


@pytest.fixture(scope="module")
def kcluster() -> Iterator[LocalCluster]:
    with group_cluster(**FAST_GROUPS) as cluster:
        yield cluster


def _names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    return f"cp-topic-{suffix}", f"cp-{suffix}"


def member(bootstrap: str, group: str, subscription: list[str], **config: object) -> confluent_kafka.Consumer:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **config,
        }
    )
    consumer.subscribe(subscription)
    return consumer


def test_assignment_rebalances_commits_and_admin_view(kcluster: LocalCluster) -> None:
    bootstrap = kcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
    collector = Collector()
    members = [member(bootstrap, group, [topic])]
    try:
        assert wait_balanced(members, PARTITIONS, collector, 20) == [set(range(PARTITIONS))]
        members.append(member(bootstrap, group, [topic], **{"group.remote.assignor": "range"}))
        two = wait_balanced(members, PARTITIONS, collector, 20)
        assert sorted(len(s) for s in two) == [2, 2] and two[0].isdisjoint(two[1])
        # every record read, none by two members (incremental: revoked before reassigned)
        deadline = time.monotonic() + 10
        while len(collector.records) < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
            collector.poll(members)
        seen = [(p, o) for _, p, o, _ in collector.records]
        assert sorted(set(seen)) == [(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)]
        # commit with the member epoch (OffsetCommit v9), read it back (OffsetFetch v9)
        mine = sorted(two[0])
        members[0].commit(offsets=[TopicPartition(topic, p, 3) for p in mine], asynchronous=False)
        committed = members[0].committed([TopicPartition(topic, p) for p in mine], timeout=10)
        assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [(p, 3, None) for p in mine]
        # the admin view: a consumer group, Stable, the range assignor asked for by one member of two
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=10)
        assert group in {g.group_id for g in listed.valid}
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(timeout=10)
        assert group not in {g.group_id for g in classic.valid}
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert described.type == ConsumerGroupType.CONSUMER
        assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [2, 2]
        # our admin client describes it with ConsumerGroupDescribe too (kafkalite groups describe)
        with KafkaAdminClient({"bootstrap.servers": bootstrap}) as ours:
            mine_described = ours.describe_consumer_groups([group])[group]
        assert (mine_described.state, mine_described.partition_assignor) == ("Stable", "range")
        assert sorted(len(m.assignment) for m in mine_described.members) == [2, 2]
        # a member leaving (epoch -1): the other gets everything at the next epoch
        members.pop().close()
        assert wait_balanced(members, PARTITIONS, collector, 20) == [set(range(PARTITIONS))]
    finally:
        for m in members:
            m.close()


KILLED_MEMBER = textwrap.dedent(
    """
    import sys, confluent_kafka
    bootstrap, group, topic = sys.argv[1:4]
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
        "group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    announced = False
    while True:
        c.poll(0.1)
        if c.assignment() and not announced:
            print("assigned", flush=True)
            announced = True
    """
)


def test_killed_member_is_removed_after_its_session(kcluster: LocalCluster) -> None:
    bootstrap = kcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, PARTITIONS)
    collector = Collector()
    survivor = member(bootstrap, group, [topic])
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_MEMBER, bootstrap, group, topic], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 20
        while not select.select([proc.stdout], [], [], 0)[0] and time.monotonic() < deadline:
            collector.poll([survivor])  # the survivor revokes what the new member gets
        assert proc.stdout.readline().strip() == "assigned"
        while len(assignment_sets([survivor])[0]) != PARTITIONS // 2 and time.monotonic() < deadline:
            collector.poll([survivor])
        assert len(assignment_sets([survivor])[0]) == PARTITIONS // 2
        proc.kill()  # no leave heartbeat: the session timeout (2 s) removes it
        killed_at = time.monotonic()
        assert wait_balanced([survivor], PARTITIONS, collector, 20) == [set(range(PARTITIONS))]
        assert time.monotonic() - killed_at >= 1.5
    finally:
        proc.kill()
        proc.wait()
        survivor.close()


def test_regex_subscription_picks_up_a_new_topic(kcluster: LocalCluster) -> None:
    bootstrap = kcluster.bootstrap_servers
    prefix = f"rx-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, f"{prefix}-a", 2)
    collector = Collector()
    consumer = member(bootstrap, f"{prefix}-g", [f"^{prefix}-.*"])
    try:
        deadline = time.monotonic() + 20
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            collector.poll([consumer])
        assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == {
            (f"{prefix}-a", 0),
            (f"{prefix}-a", 1),
        }
        create_topic(bootstrap, f"{prefix}-b", 1)
        produce(bootstrap, f"{prefix}-b", 1, 3, tag="late")
        deadline = time.monotonic() + 20
        while len(collector.records) < 3 and time.monotonic() < deadline:
            collector.poll([consumer])
        assert sorted(v for _, _, _, v in collector.records) == [b"late-0-0", b"late-0-1", b"late-0-2"]
        assert (f"{prefix}-b", 0) in {(tp.topic, tp.partition) for tp in consumer.assignment()}
    finally:
        consumer.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_classic_group_upgrades_online_to_a_mixed_group_and_back(
    kcluster: LocalCluster, strategy: str
) -> None:
    """KIP-848 online upgrade: a classic librdkafka member owns every partition; a
    consumer-protocol member joins, the group becomes a consumer group with both, the classic
    member is told to rejoin and keeps half (eager ``range`` and incremental
    ``cooperative-sticky``: it revokes before the other gets them); when the consumer-protocol
    member leaves, the group turns classic again (downgrade) and the classic member takes
    everything. Every record is read."""
    bootstrap = kcluster.bootstrap_servers
    topic, group = _names()
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
    collector = Collector()
    classic = member(
        bootstrap,
        group,
        [topic],
        **{
            "group.protocol": "classic",
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
        },
    )
    members = [classic]
    try:
        assert wait_balanced(members, PARTITIONS, collector, 20) == [set(range(PARTITIONS))]
        members.append(member(bootstrap, group, [topic]))
        two = wait_balanced(members, PARTITIONS, collector, 30)
        assert sorted(len(s) for s in two) == [2, 2]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert described.type == ConsumerGroupType.CONSUMER and len(described.members) == 2
        deadline = time.monotonic() + 10
        while len({(p, o) for _, p, o, _ in collector.records}) < PARTITIONS * PER_PARTITION and (
            time.monotonic() < deadline
        ):
            collector.poll(members)
        assert sorted({(p, o) for _, p, o, _ in collector.records}) == [
            (p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)
        ]
        # downgrade: the consumer-protocol member leaves, the group turns classic and rebalances
        members.pop().close()
        assert wait_balanced(members, PARTITIONS, collector, 20) == [set(range(PARTITIONS))]
        described = admin.describe_consumer_groups([group])[group].result(timeout=10)
        assert described.type == ConsumerGroupType.CLASSIC and len(described.members) == 1
    finally:
        for m in members:
            m.close()
