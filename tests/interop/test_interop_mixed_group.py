"""Mixed consumer groups: our consumers with confluent-kafka (librdkafka) and kafka-python
members in one group on one topic. Checks: each partition owned by exactly one member once the
group is stable (our view and confluent-kafka's AdminClient view), rebalances on join and on
leave, every record consumed, and no record consumed again after someone committed past it.
Also offsets committed by one client read back by another, and our admin's group listings
next to confluent-kafka's."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.local_cluster import LocalCluster

GROUP_BROKER_CONFIG = {"offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0"}

TP = tuple[str, int]


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    with LocalCluster(brokers=1, config_overrides=GROUP_BROKER_CONFIG) as cluster:
        yield cluster.bootstrap_servers


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Ledger:
    """Consumption and successful commits in one global order (members record from their own threads)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seq = 0
        self.consumed: list[tuple[int, str, TP, int]] = []
        self.commits: list[tuple[int, TP, int]] = []

    def consume(self, who: str, tp: TP, offset: int) -> None:
        with self.lock:
            self.seq += 1
            self.consumed.append((self.seq, who, tp, offset))

    def commit(self, offsets: dict[TP, int]) -> None:
        with self.lock:
            self.seq += 1
            for tp, off in offsets.items():
                self.commits.append((self.seq, tp, off))

    def violations(self) -> list[str]:
        """Records consumed after a commit had already moved past them."""
        bad = []
        for seq, who, tp, offset in self.consumed:
            for cseq, ctp, coff in self.commits:
                if cseq < seq and ctp == tp and coff > offset:
                    bad.append(f"{who} consumed {tp}@{offset} after commit {coff} (#{cseq} < #{seq})")
                    break
        return bad

    def unique(self) -> set[tuple[TP, int]]:
        with self.lock:
            return {(tp, off) for _, _, tp, off in self.consumed}


class Member:
    name: str

    def poll(self) -> list[tuple[TP, int]]: ...
    def commit(self, offsets: dict[TP, int]) -> bool: ...
    def assignment(self) -> set[TP]: ...
    def close(self) -> None: ...


class Ours(Member):
    def __init__(
        self, bootstrap: str, group: str, topic: str, name: str, strategy: str = "range,cooperative-sticky"
    ) -> None:
        self.name = name
        self.c = KafkaConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": "false",
                "session.timeout.ms": "10000",
                "heartbeat.interval.ms": "500",
                "partition.assignment.strategy": strategy,
            }
        )
        self.c.subscribe([topic])

    def poll(self) -> list[tuple[TP, int]]:
        return [((r.topic, r.partition), r.offset) for recs in self.c.poll(50).values() for r in recs]

    def commit(self, offsets: dict[TP, int]) -> bool:
        try:
            self.c.commit_sync({TopicPartition(*tp): off for tp, off in offsets.items()})
            return True
        except Exception:  # noqa: BLE001 - rebalanced away: the records stay uncommitted
            return False

    def assignment(self) -> set[TP]:
        return {(tp.topic, tp.partition) for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close()


class Confluent(Member):
    def __init__(
        self, bootstrap: str, group: str, topic: str, name: str, strategy: str = "range,roundrobin"
    ) -> None:
        self.name = name
        self.c = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 500,
                "topic.metadata.refresh.interval.ms": 1000,
                "partition.assignment.strategy": strategy,
            }
        )
        self.c.subscribe([topic])

    def poll(self) -> list[tuple[TP, int]]:
        out = []
        for m in self.c.consume(num_messages=100, timeout=0.05):
            if m.error() is None:
                out.append(((m.topic(), m.partition()), m.offset()))
        return out

    def commit(self, offsets: dict[TP, int]) -> bool:
        try:
            self.c.commit(
                offsets=[confluent_kafka.TopicPartition(t, p, off) for (t, p), off in offsets.items()],
                asynchronous=False,
            )
            return True
        except confluent_kafka.KafkaException:
            return False

    def assignment(self) -> set[TP]:
        return {(tp.topic, tp.partition) for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close()


class KafkaPython(Member):
    def __init__(self, bootstrap: str, group: str, topic: str, name: str, strategy: str = "") -> None:
        self.name = name
        self.c = kafka.KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
        )

    def poll(self) -> list[tuple[TP, int]]:
        return [
            ((r.topic, r.partition), r.offset) for recs in self.c.poll(timeout_ms=50).values() for r in recs
        ]

    def commit(self, offsets: dict[TP, int]) -> bool:
        try:
            self.c.commit(
                {
                    kafka.TopicPartition(*tp): kafka.structs.OffsetAndMetadata(off, "", -1)
                    for tp, off in offsets.items()
                }
            )
            return True
        except Exception:  # noqa: BLE001 - CommitFailedError after a rebalance
            return False

    def assignment(self) -> set[TP]:
        return {(tp.topic, tp.partition) for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close()


class Poller(threading.Thread):
    """Polls one member in its own thread, as applications run their consumers.

    A single thread taking turns between members stalls every member while another polls, and
    kafka-python 3.0.12 drops a JoinGroup/SyncGroup round that completes while its ``poll()`` is
    not running (``ensure_active_group`` replaces a finished join task with a new JoinGroup): as
    group leader it then rejoins after every rebalance, endlessly. Records are written to the
    ledger by the member's own thread right after ``poll()`` returns, before its next ``poll()``
    could revoke the partition, so the ledger's order stays a valid order of events."""

    def __init__(self, member: Member, ledger: Ledger) -> None:
        super().__init__(daemon=True, name=f"poll-{member.name}")
        self.member = member
        self.ledger = ledger
        self.owned: set[TP] = set()
        self.error: BaseException | None = None
        self.stop_event = threading.Event()
        self.start()

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                _step(self.member, self.ledger)
                self.owned = self.member.assignment()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc

    def stop(self) -> None:
        """Stops polling (then the member may be closed from another thread)."""
        self.stop_event.set()
        self.join(timeout=30)
        assert not self.is_alive(), f"{self.member.name} still polling"


def _step(member: Member, ledger: Ledger) -> None:
    batch = member.poll()
    if not batch:
        return
    last: dict[TP, int] = {}
    for tp, offset in batch:
        ledger.consume(member.name, tp, offset)
        last[tp] = max(last.get(tp, -1), offset)
    offsets = {tp: off + 1 for tp, off in last.items()}
    if member.commit(offsets):
        ledger.commit(offsets)


def _run_until(pollers: list[Poller], done: Callable[[], bool], timeout_s: float = 45.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for p in pollers:
            if p.error is not None:
                raise AssertionError(f"{p.member.name} failed") from p.error
        if done():
            return
        time.sleep(0.05)
    raise AssertionError(
        f"not reached in time; assignments: {[(p.member.name, sorted(p.owned)) for p in pollers]}"
    )


def _split(pollers: list[Poller], partitions: set[TP]) -> Callable[[], bool]:
    def check() -> bool:
        owned = [p.owned for p in pollers]
        return all(owned) and sum(map(len, owned)) == len(partitions) and set().union(*owned) == partitions

    return check


def _produce(bootstrap: str, topic: str, count: int, partitions: int, start: int) -> None:
    with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(start, start + count):
            producer.send(topic, value=f"v{i}".encode(), partition=i % partitions)
        producer.flush()


def _confluent_view(bootstrap: str, group: str) -> dict[str, set[TP]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    d = admin.describe_consumer_groups([group])[group].result(timeout=15)
    return {
        m.client_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions} for m in d.members
    }


@pytest.mark.parametrize(
    ("peer", "peer_first", "strategy"),
    [
        (Confluent, False, ""),
        (Confluent, True, ""),  # librdkafka leads and assigns for us
        (KafkaPython, False, ""),
        (KafkaPython, True, ""),  # kafka-python leads
        (Confluent, False, "cooperative-sticky"),  # incremental rebalances, both sides KIP-429
    ],
    ids=["confluent", "confluent-leader", "kafka-python", "kafka-python-leader", "confluent-cooperative"],
)
@pytest.mark.timeout(150)
def test_mixed_group_rebalances_without_double_consumption(
    bootstrap: str, peer: type[Member], peer_first: bool, strategy: str
) -> None:
    topic, group = _name("mixed"), _name("g")
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 6, 1)])
    partitions = {(topic, p) for p in range(6)}
    _produce(bootstrap, topic, 300, 6, 0)
    ledger = Ledger()
    kw = {"strategy": strategy} if strategy else {}
    pollers: list[Poller] = []
    try:
        if peer_first:
            pollers.append(Poller(peer(bootstrap, group, topic, "peer-1", **kw), ledger))
            _run_until(pollers, lambda: pollers[0].owned == partitions)
        ours = Poller(Ours(bootstrap, group, topic, "ours-1", **kw), ledger)
        pollers.append(ours)
        if not peer_first:
            _run_until(pollers, lambda: ours.owned == partitions)
            # a peer joins: the group splits the partitions
            pollers.append(Poller(peer(bootstrap, group, topic, "peer-1", **kw), ledger))
        the_peer = next(p for p in pollers if p.member.name == "peer-1")
        _produce(bootstrap, topic, 300, 6, 300)
        _run_until(pollers, _split(pollers, partitions))
        # one more of ours joins
        pollers.append(Poller(Ours(bootstrap, group, topic, "ours-2", **kw), ledger))
        _run_until(pollers, _split(pollers, partitions))
        time.sleep(0.5)  # the group stays as it is: no member rejoins once it is stable
        assert _split(pollers, partitions)()
        view = _confluent_view(bootstrap, group)
        assert {name: owned for name, owned in view.items()} == {p.member.name: p.owned for p in pollers}
        _produce(bootstrap, topic, 300, 6, 600)
        # the peer leaves: ours take over its partitions
        the_peer.stop()
        the_peer.member.close()
        pollers.remove(the_peer)
        _run_until(pollers, _split(pollers, partitions))
        _run_until(pollers, lambda: len(ledger.unique()) >= 900)
    finally:
        for p in pollers:
            p.stop_event.set()
        for p in pollers:
            p.stop()
            try:
                p.member.close()
            except Exception:  # noqa: BLE001 - already closed
                pass
    assert ledger.unique() == {((topic, i % 6), i // 6) for i in range(900)}
    assert ledger.violations() == []
    # the final commits cover everything
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        assert admin.list_consumer_group_offsets(group) == {TopicPartition(topic, p): 150 for p in range(6)}


def test_offsets_committed_by_one_client_are_read_by_the_others(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2, 1)])
    ours = KafkaConsumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": "false"})
    ck = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    kp = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        ours.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        ours.commit_sync({TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 9})
        found = ck.committed(
            [confluent_kafka.TopicPartition(topic, 0), confluent_kafka.TopicPartition(topic, 1)], timeout=10
        )
        assert sorted((tp.partition, tp.offset) for tp in found) == [(0, 7), (1, 9)]
        assert kp.committed(kafka.TopicPartition(topic, 1)) == 9
        ck.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 42)], asynchronous=False)
        assert ours.committed(TopicPartition(topic, 0)).offset == 42  # type: ignore[union-attr]
        assert ours.committed(TopicPartition(topic, 1)).offset == 9  # type: ignore[union-attr]
    finally:
        ours.close()
        ck.close()
        kp.close()


def test_admin_group_apis_agree_with_confluent(bootstrap: str) -> None:
    topic, group = _name("t"), _name("g")
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 3, 1)])
    ck = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": "ck-member",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 500,
        }
    )
    ck_admin = AdminClient({"bootstrap.servers": bootstrap})
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
    try:
        ck.subscribe([topic])
        deadline = time.monotonic() + 30
        while not ck.assignment() and time.monotonic() < deadline:
            ck.poll(0.1)
        assert len(ck.assignment()) == 3
        ours = admin.describe_consumer_groups([group])[group]
        theirs: Any = ck_admin.describe_consumer_groups([group])[group].result(timeout=15)
        assert ours.state.upper() == str(theirs.state.name).upper() == "STABLE"
        assert ours.partition_assignor == theirs.partition_assignor
        assert [(m.member_id, m.client_id, m.host, set(m.assignment)) for m in ours.members] == [
            (
                m.member_id,
                m.client_id,
                m.host,
                {TopicPartition(tp.topic, tp.partition) for tp in m.assignment.topic_partitions},
            )
            for m in theirs.members
        ]
        listed_theirs = {g.group_id for g in ck_admin.list_consumer_groups().result(timeout=15).valid}
        assert group in listed_theirs and group in {g.group_id for g in admin.list_consumer_groups()}
        ck.commit(
            offsets=[confluent_kafka.TopicPartition(topic, p, p + 1) for p in range(3)], asynchronous=False
        )
        ck.close()
        # offsets written by our admin are what confluent's admin lists
        admin.alter_consumer_group_offsets(group, {TopicPartition(topic, 0): 5, TopicPartition(topic, 2): 6})
        request = confluent_kafka.ConsumerGroupTopicPartitions(group)
        listed = ck_admin.list_consumer_group_offsets([request])[group].result(timeout=15)
        assert sorted((tp.partition, tp.offset) for tp in listed.topic_partitions) == [(0, 5), (1, 2), (2, 6)]
        assert admin.list_consumer_group_offsets(group) == {
            TopicPartition(topic, 0): 5,
            TopicPartition(topic, 1): 2,
            TopicPartition(topic, 2): 6,
        }
        # deleted by us, gone for confluent too
        admin.delete_consumer_groups([group])
        assert group not in {g.group_id for g in ck_admin.list_consumer_groups().result(timeout=15).valid}
    finally:
        admin.close()
