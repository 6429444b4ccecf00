"""confluent-kafka 2.16's ``ShareConsumer`` (librdkafka's KIP-932 share consumer) against the
broker: several members of one share group read one partition together, every record once with
ACCEPT; records a member acquired and never acknowledged are redelivered to another member once
their lock expires; a record released again and again is archived after
``group.share.delivery.count.limit`` deliveries; REJECT archives at once. One broker for the
module, with the record lock lowered to 2 s for the group under test (Kafka's lower bound is 15 s)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from group_peers import create_topic, group_cluster, produce
from txn_wire import raw_client

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make

pytestmark = pytest.mark.timeout(120)

LOCK_MS = 2000


@pytest.fixture(scope="module")
def kcluster() -> Iterator[LocalCluster]:
    with group_cluster(**{"group.share.min.record.lock.duration.ms": "1000"}) as cluster:
        yield cluster


def _share_group(bootstrap: str, **configs: str) -> tuple[str, str]:
    """A new topic (one partition) and share group reading it from the earliest offset."""
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"share-topic-{suffix}", f"share-{suffix}"
    create_topic(bootstrap, topic, 1)
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in {"share.auto.offset.reset": "earliest", **configs}.items()
        ],
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=15)
    return topic, group


def _member(bootstrap: str, group: str, topic: str, explicit: bool = False) -> ShareConsumer:
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        }
    )
    consumer.subscribe([topic])
    return consumer


def _poll(consumer: ShareConsumer, timeout: float = 0.3) -> list[confluent_kafka.Message]:
    batch = consumer.poll(timeout=timeout)
    return [m for m in (batch or []) if m.error() is None]


def test_members_share_a_partition_and_read_each_record_once(kcluster: LocalCluster) -> None:
    bootstrap = kcluster.bootstrap_servers
    topic, group = _share_group(bootstrap)
    rounds, per_round = 12, 5
    total = rounds * per_round
    members = [_member(bootstrap, group, topic) for _ in range(3)]
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    readers: dict[int, int] = {}
    seen: list[int] = []
    try:
        # records arrive in small batches while all three members poll: whichever member's
        # ShareFetch is parked when a batch lands acquires it
        deadline = time.monotonic() + 30
        produced = 0
        while len(seen) < total and time.monotonic() < deadline:
            if produced < rounds:
                for i in range(per_round):
                    producer.produce(topic, value=f"r{produced}-{i}".encode(), partition=0)
                assert producer.flush(10) == 0
                produced += 1
            for i, member in enumerate(members):
                for m in _poll(member, 0.1):
                    seen.append(m.offset())
                    readers[i] = readers.get(i, 0) + 1
                    assert m.delivery_count() == 1
        # implicit acknowledgement: every record accepted by the next poll, none read twice
        for member in members:
            assert _poll(member, 0.3) == []
        # the admin view (librdkafka's admin API has no share groups): ListGroups v5 with the
        # type filter share, ShareGroupDescribe with the three members all reading partition 0
        client = raw_client(bootstrap)
        try:
            listed = client.send_and_wait(
                0,
                make(request_class(ApiKey.LIST_GROUPS, 5), states_filter=(), types_filter=("share",)),
                10000,
            )
            assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
                (group, "share", "Stable", "share")
            ]
            described = client.send_and_wait(
                0,
                make(
                    request_class(ApiKey.SHARE_GROUP_DESCRIBE, 1),
                    group_ids=(group,),
                    include_authorized_operations=False,
                ),
                10000,
            ).groups[0]
            assert (described.error_code, described.group_state, len(described.members)) == (0, "Stable", 3)
            assert {
                (tp.topic_name, tuple(tp.partitions))
                for m in described.members
                for tp in m.assignment.topic_partitions
            } == {(topic, (0,))}
        finally:
            client.close()
    finally:
        for member in members:
            member.close()
    # the members left (ShareGroupHeartbeat epoch -1): the empty share group can be deleted
    client = raw_client(bootstrap)
    try:
        deleted = client.send_and_wait(
            0, make(request_class(ApiKey.DELETE_GROUPS, 2), groups_names=(group,)), 10000
        )
        assert [(r.group_id, r.error_code) for r in deleted.results] == [(group, 0)]
        listed = client.send_and_wait(
            0, make(request_class(ApiKey.LIST_GROUPS, 5), states_filter=(), types_filter=("share",)), 10000
        )
        assert [g.group_id for g in listed.groups if g.group_id == group] == []
    finally:
        client.close()
    assert sorted(seen) == list(range(total))
    assert len(readers) >= 2, f"one member read everything: {readers}"


def test_unacknowledged_records_are_redelivered_after_the_lock(kcluster: LocalCluster) -> None:
    bootstrap = kcluster.bootstrap_servers
    topic, group = _share_group(bootstrap, **{"share.record.lock.duration.ms": str(LOCK_MS)})
    produce(bootstrap, topic, 1, 10)
    silent = _member(bootstrap, group, topic, explicit=True)
    taken: list[int] = []
    deadline = time.monotonic() + 20
    while not taken and time.monotonic() < deadline:
        taken = [m.offset() for m in _poll(silent, 0.5)]
    assert taken, "the first member got nothing"
    # the first member holds its records and neither acknowledges nor polls again
    other = _member(bootstrap, group, topic)
    try:
        redelivered: dict[int, int] = {}
        deadline = time.monotonic() + 20
        while len(redelivered) < 10 and time.monotonic() < deadline:
            for m in _poll(other, 0.5):
                redelivered[m.offset()] = m.delivery_count()
        assert sorted(redelivered) == list(range(10))
        # the ones the first member held came back with a second delivery, after its lock
        assert {o: redelivered[o] for o in taken} == dict.fromkeys(taken, 2)
        assert all(redelivered[o] == 1 for o in set(range(10)) - set(taken))
    finally:
        other.close()
        silent.close()


def test_delivery_count_limit_archives_a_poison_record(kcluster: LocalCluster) -> None:
    bootstrap = kcluster.bootstrap_servers
    topic, group = _share_group(bootstrap)
    produce(bootstrap, topic, 1, 4)
    member = _member(bootstrap, group, topic, explicit=True)
    deliveries: dict[int, list[int]] = {}
    try:
        deadline = time.monotonic() + 30
        accepted: set[int] = set()
        while time.monotonic() < deadline:
            batch = _poll(member, 0.3)
            for m in batch:
                deliveries.setdefault(m.offset(), []).append(m.delivery_count())
                if m.offset() == 0:
                    member.acknowledge(m, AcknowledgeType.RELEASE)  # poison: always handed back
                elif m.offset() == 1:
                    member.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    member.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add(m.offset())
            if batch:
                member.commit_sync()
            elif accepted == {2, 3} and len(deliveries.get(0, [])) >= 5:
                break
        # group.share.delivery.count.limit (5): released five times, then archived
        assert deliveries[0] == [1, 2, 3, 4, 5]
        assert deliveries[1] == [1] and deliveries[2] == [1] and deliveries[3] == [1]
        # nothing more comes: every record is acknowledged or archived
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            assert _poll(member, 0.3) == []
    finally:
        member.close()
