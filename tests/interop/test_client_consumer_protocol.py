"""Our ``KafkaConsumer`` with ``group.protocol=consumer`` (KIP-848) against the broker: two
members split 4 partitions, a third joins and partitions move with revoke-before-assign (listener
order checked), one closes and the rest take over, commits and committed() carry the member
epoch; a regex subscription picks up a topic created later; a group of ours plus a confluent-kafka
``group.protocol=consumer`` member reads every record exactly once. One broker for the module,
with Kafka's consumer group heartbeat bounds lowered."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from group_peers import create_topic, group_cluster, produce

from spark_kafkalite.cli import main
from spark_kafkalite.client import KafkaConsumer
from spark_kafkalite.client.consumer.consumer_coordinator import CommitFailedError, ConsumerRebalanceListener
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.errors import InvalidConfigError

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 4
PER_PARTITION = 5
FAST_GROUPS = {
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "100",
}


@pytest.fixture(scope="module")
def kcluster() -> Iterator[LocalCluster]:
    with group_cluster(**FAST_GROUPS) as cluster:
        yield cluster


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls.append(("lost", frozenset(lost)))


def ours(bootstrap: str, group: str, **config: object) -> KafkaConsumer:
    return KafkaConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **config,
        }
    )


def poll_until(consumers: list[KafkaConsumer], done, timeout_s: float, sink: list | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            for records in c.poll(50).values():
                if sink is not None:
                    sink.extend((r.topic, r.partition, r.offset) for r in records)
        if done():
            return
    raise AssertionError(f"not reached in {timeout_s} s: {[sorted(c.assignment()) for c in consumers]}")


def balanced(consumers: list[KafkaConsumer], total: int) -> bool:
    sets = [c.assignment() for c in consumers]
    union = set().union(*sets)
    sizes = sorted(len(s) for s in sets)
    return len(union) == total == sum(sizes) and sizes[-1] - sizes[0] <= 1


def test_config_validation() -> None:
    with pytest.raises(InvalidConfigError, match="group.protocol"):
        KafkaConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "group.protocol": "eager"})
    for key, value in (
        ("partition.assignment.strategy", "range"),
        ("session.timeout.ms", 10000),
        ("heartbeat.interval.ms", 1000),
    ):
        with pytest.raises(InvalidConfigError, match=key):
            KafkaConsumer(
                {
                    "bootstrap.servers": "127.0.0.1:1",
                    "group.id": "g",
                    "group.protocol": "CONSUMER",
                    key: value,
                }
            )
    with pytest.raises(InvalidConfigError, match="group.remote.assignor"):
        KafkaConsumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "group.remote.assignor": "range"})


def test_members_split_move_take_over_and_commit(
    kcluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = kcluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"ours-cp-{suffix}", f"ours-cp-g-{suffix}"
    create_topic(bootstrap, topic, PARTITIONS)
    listeners = [Recorder() for _ in range(3)]
    members = [ours(bootstrap, group) for _ in range(2)]
    seen: list = []
    try:
        for c, lst in zip(members, listeners, strict=False):
            c.subscribe([topic], lst)
        poll_until(members, lambda: balanced(members, PARTITIONS), 20)
        # produced once the group is balanced: nothing read before a partition moved
        produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
        poll_until(members, lambda: len(seen) >= PARTITIONS * PER_PARTITION, 20, seen)
        assert len(set(seen)) == PARTITIONS * PER_PARTITION == len(seen)
        # commit with the member epoch, read back
        for c in members:
            c.commit_sync()
            for tp in c.assignment():
                assert c.committed(tp).offset == PER_PARTITION
        # kafkalite groups describe: type, epochs and each member's assignment (ConsumerGroupDescribe)
        assert main(["groups", "describe", "--bootstrap-server", bootstrap, group]) == 0
        shown = capsys.readouterr().out
        assert f"Group {group}: type consumer, state Stable" in shown and "group epoch" in shown
        for c in members:
            member_id = c.group_metadata()["member_id"]
            assert member_id in shown and c.group_metadata()["generation_id"] > 0
        third = ours(bootstrap, group)
        third.subscribe([topic], listeners[2])
        members.append(third)
        poll_until(members, lambda: balanced(members, PARTITIONS), 20)
        # revoke before assign: each moved partition was revoked by its old owner before the
        # new owner's on_partitions_assigned (one thread polls all three in turn)
        moved = third.assignment()
        assert moved
        revoked = set().union(*(s for lst in listeners[:2] for k, s in lst.calls if k == "revoked"))
        assert moved <= revoked
        assert listeners[2].calls[-1] == ("assigned", frozenset(moved))
        for lst in listeners[:2]:
            kinds = [k for k, _ in lst.calls]
            assert kinds[0] == "assigned" and "lost" not in kinds
        members[0].close()
        rest = members[1:]
        poll_until(rest, lambda: balanced(rest, PARTITIONS), 20)
        assert listeners[0].calls[-1][0] == "revoked"
        # the committed offsets survive the moves
        c = rest[0]
        got = c.committed({TopicPartition(topic, p) for p in range(PARTITIONS)})
        assert {tp.partition: om.offset for tp, om in got.items()} == dict.fromkeys(range(PARTITIONS), 5)
    finally:
        for c in members:
            c.close()


def test_regex_subscription_picks_up_a_new_topic(kcluster: LocalCluster) -> None:
    bootstrap = kcluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    first, later, group = f"rx-{suffix}-a", f"rx-{suffix}-b", f"rx-g-{suffix}"
    create_topic(bootstrap, first, 2)
    produce(bootstrap, first, 2, 3)
    c = ours(bootstrap, group)
    try:
        c.subscribe(pattern=f"rx-{suffix}-.*")
        seen: list = []
        poll_until([c], lambda: len(seen) == 6, 20, seen)
        create_topic(bootstrap, later, 2)
        produce(bootstrap, later, 2, 3)
        poll_until([c], lambda: len(seen) == 12, 30, seen)
        assert {t for t, _, _ in seen} == {first, later}
        assert c.subscription() == {first, later}
    finally:
        c.close()


def test_mixed_group_with_confluent_reads_every_record_once(kcluster: LocalCluster) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    bootstrap = kcluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"mix-cp-{suffix}", f"mix-cp-g-{suffix}"
    create_topic(bootstrap, topic, PARTITIONS)
    mine = ours(bootstrap, group)
    mine.subscribe([topic])
    peer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    peer.subscribe([topic])
    seen: list = []
    try:
        deadline = time.monotonic() + 20
        while not (mine.assignment() and peer.assignment() and len(mine.assignment()) == 2):
            assert time.monotonic() < deadline, (mine.assignment(), peer.assignment())
            mine.poll(50)
            peer.poll(0.05)
        produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(seen) < PARTITIONS * PER_PARTITION:
            for records in mine.poll(50).values():
                seen.extend((r.partition, r.offset, "ours") for r in records)
            msg = peer.poll(0.05)
            if msg is not None and msg.error() is None:
                seen.append((msg.partition(), msg.offset(), "peer"))
        assert len(seen) == PARTITIONS * PER_PARTITION
        assert len({(p, o) for p, o, _ in seen}) == len(seen)
        assert {who for _, _, who in seen} == {"ours", "peer"}, "both members should have read"
    finally:
        mine.close()
        peer.close()


def test_fenced_member_loses_partitions_and_rejoins_static_member_returns(kcluster: LocalCluster) -> None:
    bootstrap = kcluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    topic, group = f"fence-cp-{suffix}", f"fence-cp-g-{suffix}"
    create_topic(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, PARTITIONS, PER_PARTITION)
    lst = Recorder()
    sleeper = ours(bootstrap, group)
    static = ours(bootstrap, group, **{"group.instance.id": f"static-{suffix}"})
    try:
        sleeper.subscribe([topic], lst)
        static.subscribe([topic])
        both = [sleeper, static]
        poll_until(both, lambda: balanced(both, PARTITIONS), 20)
        kept = sleeper.assignment()
        # the sleeper misses its session (3 s): the coordinator removes it, the static member takes all
        poll_until([static], lambda: len(static.assignment()) == PARTITIONS, 15)
        with pytest.raises(CommitFailedError):  # Java: UNKNOWN_MEMBER_ID -> CommitFailedException
            sleeper.commit_sync({TopicPartition(topic, p): 1 for p in (tp.partition for tp in kept)})
        poll_until(both, lambda: balanced(both, PARTITIONS), 20)
        assert ("lost", frozenset(kept)) in lst.calls and lst.calls[-1][0] == "assigned"
        # a static member leaves with epoch -2: its partitions wait for its return (no rebalance)
        held = static.assignment()
        static.close()
        again = ours(bootstrap, group, **{"group.instance.id": f"static-{suffix}"})
        both = [sleeper, again]
        again.subscribe([topic])
        poll_until(both, lambda: again.assignment() == held, 20)
        assert sleeper.assignment().isdisjoint(held)
        static = again
    finally:
        sleeper.close()
        static.close()
