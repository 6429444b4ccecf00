"""Our consumer groups on a real broker process: join/sync/heartbeat/leave, eager and cooperative
rebalances with listener callbacks, commits (sync, async, auto), committed offsets resuming a
group, pattern subscriptions, partition growth, commit errors, the admin group APIs.
Committed offsets are cross-checked with confluent-kafka where it matters."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator

import confluent_kafka
import pytest

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.client.consumer.consumer_coordinator import CommitFailedError, ConsumerRebalanceListener
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.errors import UnknownMemberIdError

#: single broker: __consumer_offsets with RF 1; no initial rebalance delay keeps tests quick
GROUP_BROKER_CONFIG = {"offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0"}
FAST_GROUP = {
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "500",
    "auto.offset.reset": "earliest",
    "request.timeout.ms": "15000",
}


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    with LocalCluster(brokers=1, config_overrides=GROUP_BROKER_CONFIG) as cluster:
        yield cluster.bootstrap_servers


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])


def _produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(start, start + count):
            producer.send(topic, value=f"v{i}".encode(), partition=i % partitions)
        producer.flush()


def _consumer(bootstrap: str, group: str, **extra: str) -> KafkaConsumer:
    return KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": group, **FAST_GROUP, **extra})


def _poll_until(
    consumers: list[KafkaConsumer],
    done: Callable[[], bool],
    timeout_s: float = 30.0,
    sink: dict[KafkaConsumer, list] | None = None,
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            for records in c.poll(100).values():
                if sink is not None:
                    sink.setdefault(c, []).extend(records)
        if done():
            return
    raise AssertionError("condition not reached in time")


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", set(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", set(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events.append(("lost", set(lost)))


def test_subscribe_consume_commit_and_resume(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 3)
    _produce(bootstrap, topic, 30, 3)
    records: dict[KafkaConsumer, list] = {}
    consumer = _consumer(bootstrap, group, **{"enable.auto.commit": "false"})
    try:
        consumer.subscribe([topic])
        _poll_until([consumer], lambda: len(records.get(consumer, [])) >= 30, sink=records)
        assert consumer.assignment() == {TopicPartition(topic, p) for p in range(3)}
        assert sorted(r.value for r in records[consumer]) == sorted(f"v{i}".encode() for i in range(30))
        consumer.commit_sync()
        committed = consumer.committed([TopicPartition(topic, p) for p in range(3)])
        assert {tp: om.offset for tp, om in committed.items() if om} == {
            TopicPartition(topic, p): 10 for p in range(3)
        }
    finally:
        consumer.close()
    # confluent-kafka reads the same committed offsets
    ck = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = ck.committed([confluent_kafka.TopicPartition(topic, p) for p in range(3)], timeout=10)
        assert sorted((tp.partition, tp.offset) for tp in found) == [(0, 10), (1, 10), (2, 10)]
    finally:
        ck.close()
    # a new member resumes from the committed offsets: only new records arrive
    _produce(bootstrap, topic, 6, 3, start=30)
    records = {}
    consumer = _consumer(bootstrap, group)
    try:
        consumer.subscribe([topic])
        _poll_until([consumer], lambda: len(records.get(consumer, [])) >= 6, sink=records)
        time.sleep(0.3)
        for recs in consumer.poll(300).values():
            records[consumer].extend(recs)
        assert sorted(r.value for r in records[consumer]) == sorted(f"v{i}".encode() for i in range(30, 36))
    finally:
        consumer.close()  # auto-commit on close
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, p): 12 for p in range(3)}


def _stable_split(consumers: list[KafkaConsumer], partitions: set[TopicPartition]) -> Callable[[], bool]:
    def check() -> bool:
        owned = [c.assignment() for c in consumers]
        union = set().union(*owned)
        return union == partitions and sum(map(len, owned)) == len(partitions) and all(owned)

    return check


@pytest.mark.timeout(90)
def test_eager_rebalance_on_join_and_leave(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 4)
    all_tps = {TopicPartition(topic, p) for p in range(4)}
    a_events, b_events = Recorder(), Recorder()
    a = _consumer(bootstrap, group, **{"partition.assignment.strategy": "range"})
    b = _consumer(bootstrap, group, **{"partition.assignment.strategy": "range"})
    try:
        a.subscribe([topic], a_events)
        _poll_until([a], lambda: a.assignment() == all_tps)
        assert a_events.events == [("assigned", all_tps)]
        b.subscribe([topic], b_events)
        _poll_until([a, b], _stable_split([a, b], all_tps))
        assert len(a.assignment()) == 2 and len(b.assignment()) == 2
        # eager: a revoked everything before rejoining
        assert ("revoked", all_tps) in a_events.events
        b.close()
        _poll_until([a], lambda: a.assignment() == all_tps)
        assert a_events.events[-1] == ("assigned", all_tps)
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(90)
def test_cooperative_rebalance_revokes_only_moved_partitions(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 6)
    all_tps = {TopicPartition(topic, p) for p in range(6)}
    cfg = {"partition.assignment.strategy": "cooperative-sticky"}
    a_events, b_events = Recorder(), Recorder()
    a, b = _consumer(bootstrap, group, **cfg), _consumer(bootstrap, group, **cfg)
    try:
        a.subscribe([topic], a_events)
        _poll_until([a], lambda: a.assignment() == all_tps)
        b.subscribe([topic], b_events)
        _poll_until([a, b], _stable_split([a, b], all_tps))
        assert len(a.assignment()) == 3 and len(b.assignment()) == 3
        revoked = [tps for kind, tps in a_events.events if kind == "revoked"]
        assert revoked == [all_tps - a.assignment()]  # only the moved partitions, once
        assert all(kind != "lost" for kind, _ in a_events.events)
        assert set().union(*(tps for kind, tps in b_events.events if kind == "assigned")) == b.assignment()
    finally:
        a.close()
        b.close()


def test_auto_commit_and_async_commit_callback(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 2)
    _produce(bootstrap, topic, 10, 2)
    consumer = _consumer(bootstrap, group, **{"auto.commit.interval.ms": "300"})
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
    try:
        consumer.subscribe([topic])
        got: dict[KafkaConsumer, list] = {}
        _poll_until([consumer], lambda: len(got.get(consumer, [])) >= 10, sink=got)
        expected = {TopicPartition(topic, p): 5 for p in range(2)}
        _poll_until([consumer], lambda: admin.list_consumer_group_offsets(group) == expected, timeout_s=15)
        results: list = []
        consumer.commit_async(
            {TopicPartition(topic, 0): 3}, lambda offsets, exc: results.append((offsets, exc))
        )
        _poll_until([consumer], lambda: bool(results))
        offsets, exc = results[0]
        assert exc is None and offsets[TopicPartition(topic, 0)].offset == 3
    finally:
        consumer.close()
        admin.close()


def test_commit_by_non_member_fails_while_group_is_active(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 1)
    member = _consumer(bootstrap, group)
    outsider = _consumer(bootstrap, group, **{"enable.auto.commit": "false"})
    try:
        member.subscribe([topic])
        _poll_until([member], lambda: bool(member.assignment()))
        outsider.assign([TopicPartition(topic, 0)])
        with pytest.raises(CommitFailedError):
            outsider.commit_sync({TopicPartition(topic, 0): 1})
        with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
            with pytest.raises(UnknownMemberIdError):
                admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 1})
    finally:
        member.close()
        outsider.close()
    # once the group is empty, the admin may move its offsets
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 0})
        assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): 0}


@pytest.mark.timeout(60)
def test_pattern_subscription_picks_up_new_topics(bootstrap: str) -> None:
    prefix, group = _name("pat"), _name("g")
    _create(bootstrap, f"{prefix}-a", 1)
    consumer = _consumer(bootstrap, group, **{"metadata.max.age.ms": "500"})
    try:
        consumer.subscribe(pattern=re.compile(re.escape(prefix) + r"-.*"))
        _poll_until([consumer], lambda: consumer.assignment() == {TopicPartition(f"{prefix}-a", 0)})
        _create(bootstrap, f"{prefix}-b", 2)
        want = {
            TopicPartition(f"{prefix}-a", 0),
            TopicPartition(f"{prefix}-b", 0),
            TopicPartition(f"{prefix}-b", 1),
        }
        _poll_until([consumer], lambda: consumer.assignment() == want)
        assert consumer.subscription() == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        consumer.close()


@pytest.mark.timeout(60)
def test_leader_rejoins_when_partitions_are_added(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 1)
    consumer = _consumer(bootstrap, group, **{"metadata.max.age.ms": "500"})
    try:
        consumer.subscribe([topic])
        _poll_until([consumer], lambda: consumer.assignment() == {TopicPartition(topic, 0)})
        with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
            admin.create_partitions({topic: 3})
        _poll_until([consumer], lambda: len(consumer.assignment()) == 3)
    finally:
        consumer.close()


def test_admin_describe_list_and_delete(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 2)
    consumer = _consumer(bootstrap, group, **{"client.id": "describe-me"})
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
    try:
        consumer.subscribe([topic])
        _poll_until([consumer], lambda: len(consumer.assignment()) == 2)
        listed = {g.group_id: g for g in admin.list_consumer_groups()}
        assert listed[group].state == "Stable" and not listed[group].is_simple_consumer_group
        d = admin.describe_consumer_groups([group])[group]
        assert d.state == "Stable" and d.partition_assignor == "range"
        assert [(m.client_id, m.assignment) for m in d.members] == [
            ("describe-me", frozenset(consumer.assignment()))
        ]
        assert d.members[0].member_id == consumer.group_metadata()["member_id"]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP|GROUP_NOT_EMPTY"):
            admin.delete_consumer_groups([group])
        consumer.commit_sync({TopicPartition(topic, 0): 0, TopicPartition(topic, 1): 0})
    finally:
        consumer.close()
    try:
        _produce(bootstrap, topic, 4, 2)
        lag = admin.consumer_group_lag(group)
        assert {tp: (x.committed, x.log_end_offset, x.lag) for tp, x in lag.items()} == {
            TopicPartition(topic, 0): (0, 2, 2),
            TopicPartition(topic, 1): (0, 2, 2),
        }
        admin.delete_consumer_groups([group])
        assert group not in {g.group_id for g in admin.list_consumer_groups()}
        assert admin.describe_consumer_groups([group])[group].state == "Dead"
    finally:
        admin.close()


def test_subscribe_needs_group_id_and_excludes_assign(bootstrap: str) -> None:
    from spark_kafkalite.client.consumer.group_consumer import InvalidGroupIdError
    from spark_kafkalite.client.errors import IllegalStateError

    plain = KafkaConsumer({"bootstrap.servers": bootstrap})
    try:
        with pytest.raises(InvalidGroupIdError):
            plain.subscribe(["x"])
        with pytest.raises(InvalidGroupIdError):
            plain.commit_sync({TopicPartition("x", 0): 1})
    finally:
        plain.close()
    grouped = _consumer(bootstrap, _name("g"))
    try:
        grouped.assign([TopicPartition("x", 0)])
        with pytest.raises(IllegalStateError):
            grouped.subscribe(["x"])
        grouped.unsubscribe()
        grouped.subscribe(["x"])
        with pytest.raises(IllegalStateError):
            grouped.assign([TopicPartition("x", 0)])
    finally:
        grouped.close()


@pytest.mark.timeout(60)
def test_max_poll_interval_exceeded_leaves_group_and_partitions_are_lost(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 2)
    events = Recorder()
    slow = _consumer(bootstrap, group, **{"max.poll.interval.ms": "2000", "enable.auto.commit": "false"})
    other = _consumer(bootstrap, group)
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
    try:
        slow.subscribe([topic], events)
        _poll_until([slow], lambda: len(slow.assignment()) == 2)
        member_id = slow.group_metadata()["member_id"]
        time.sleep(3.5)  # no poll for longer than max.poll.interval.ms: the heartbeat thread leaves
        members = admin.describe_consumer_groups([group])[group].members
        assert member_id not in {m.member_id for m in members}
        with pytest.raises(CommitFailedError):
            slow.commit_sync({TopicPartition(topic, 0): 1})
        other.subscribe([topic])
        _poll_until([other], lambda: len(other.assignment()) == 2)
        # the slow member polls again: its partitions were lost (not revoked), it rejoins
        _poll_until([slow, other], lambda: len(slow.assignment()) == 1 and len(other.assignment()) == 1)
        assert events.events[1][0] == "lost" and events.events[1][1] == {
            TopicPartition(topic, p) for p in range(2)
        }
        assert slow.group_metadata()["member_id"] != member_id
    finally:
        slow.close()
        other.close()
        admin.close()


@pytest.mark.timeout(60)
def test_static_member_rejoins_with_its_instance_id(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 2)
    first = _consumer(bootstrap, group, **{"group.instance.id": "instance-1"})
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
    try:
        first.subscribe([topic])
        _poll_until([first], lambda: len(first.assignment()) == 2)
        described = admin.describe_consumer_groups([group])[group]
        assert [m.group_instance_id for m in described.members] == ["instance-1"]
        first.close()  # a static member does not send LeaveGroup (KIP-345)
        assert [m.group_instance_id for m in admin.describe_consumer_groups([group])[group].members] == [
            "instance-1"
        ]
        second = _consumer(bootstrap, group, **{"group.instance.id": "instance-1"})
        try:
            second.subscribe([topic])
            _poll_until([second], lambda: len(second.assignment()) == 2)
            members = admin.describe_consumer_groups([group])[group].members
            assert [m.group_instance_id for m in members] == ["instance-1"]
        finally:
            second.close()
    finally:
        first.close()
        admin.close()


def test_position_of_assigned_partition_starts_at_committed_offset(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 1)
    _produce(bootstrap, topic, 10, 1)
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 4})
    consumer = _consumer(bootstrap, group, **{"auto.offset.reset": "latest"})
    try:
        consumer.assign([TopicPartition(topic, 0)])  # manual assignment uses the group's offsets too
        assert consumer.position(TopicPartition(topic, 0)) == 4
        records: dict[KafkaConsumer, list] = {}
        _poll_until([consumer], lambda: len(records.get(consumer, [])) >= 6, sink=records)
        assert [r.offset for r in records[consumer]] == list(range(4, 10))
    finally:
        consumer.close()  # auto-commit on close, also for manual assignment
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, 0): 10}


def test_commit_async_looks_up_the_coordinator_first(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    _create(bootstrap, topic, 1)
    consumer = _consumer(bootstrap, group, **{"enable.auto.commit": "false"})
    results: list = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.commit_async({TopicPartition(topic, 0): 0}, lambda offsets, exc: results.append(exc))
        deadline = time.monotonic() + 15
        while not results and time.monotonic() < deadline:
            consumer.poll(100)
        assert results == [None]
        assert consumer.committed(TopicPartition(topic, 0)).offset == 0  # type: ignore[union-attr]
    finally:
        consumer.close()
