"""kill -9 of the group coordinator's broker in a 3-broker cluster: the coordinator moves with
the leadership of the group's ``__consumer_offsets`` partition, the new leader loads the
replicated group and offsets, and the consumer group resumes from its committed offsets (no
committed record is consumed twice, nothing is skipped)."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.coordinator.group.group_metadata_manager import partition_for_group
from spark_kafkalite.local_cluster import LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop"))
from group_peers import Collector, ck_member, produce, wait_balanced  # noqa: E402

OFFSETS_PARTITIONS = 3
PARTITIONS = 4


@pytest.mark.timeout(180)
def test_group_resumes_on_new_coordinator_after_kill_9() -> None:
    overrides = {
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "group.initial.rebalance.delay.ms": "200",
        "group.min.session.timeout.ms": "1000",
    }
    with LocalCluster(brokers=3, config_overrides=overrides) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = "failover-" + uuid.uuid4().hex[:8]
        group = "failover-group-" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic(topic, PARTITIONS, 3)]).values():
            future.result(timeout=30)
        produce(bootstrap, topic, PARTITIONS, 5, tag="before")
        collector = Collector()
        # a session longer than the failover (broker session timeout + election), so the member
        # keeps its id and generation across the coordinator change
        members = [
            ck_member(bootstrap, group, topic, **{"session.timeout.ms": 20000}),
            ck_member(bootstrap, group, topic, **{"session.timeout.ms": 20000}),
        ]
        try:
            wait_balanced(members, PARTITIONS, collector, timeout_s=60)
            deadline = time.monotonic() + 30
            while len(collector.records) < PARTITIONS * 5 and time.monotonic() < deadline:
                collector.poll(members)
            assert len(collector.records) == PARTITIONS * 5
            for m in members:
                m.commit(asynchronous=False)

            offsets_partition = partition_for_group(group, OFFSETS_PARTITIONS)
            coordinator = cluster.partition("__consumer_offsets", offsets_partition).leader
            assert coordinator in (1, 2, 3)
            cluster.kill(coordinator)
            new_coordinator = cluster.wait_for_leader(
                "__consumer_offsets", offsets_partition, not_in=[coordinator], timeout_s=60
            )
            survivors = [n for n in (1, 2, 3) if n != coordinator]
            survivor_bootstrap = ",".join(cluster.broker_address(n) for n in survivors)
            produce(survivor_bootstrap, topic, PARTITIONS, 2, tag="after")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                collector.poll(members)
                if sum(1 for *_, v in collector.records if v.startswith(b"after")) >= PARTITIONS * 2:
                    break
            time.sleep(1.0)
            collector.poll(members)
            keys = [(p, o) for _, p, o, _ in collector.records]
            assert len(keys) == len(set(keys)), "a committed record was consumed twice"
            assert sorted(keys) == [(p, o) for p in range(PARTITIONS) for o in range(7)]

            probe = AdminClient({"bootstrap.servers": survivor_bootstrap})
            described = probe.describe_consumer_groups([group])[group].result(timeout=30)
            assert len(described.members) == 2
            assert described.coordinator.id == new_coordinator
            tps = [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
            for m in members:
                m.commit(asynchronous=False)
            assert [tp.offset for tp in members[0].committed(tps, timeout=20)] == [7] * PARTITIONS
        finally:
            for m in members:
                m.close()
