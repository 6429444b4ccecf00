"""A transaction coordinator SIGKILLed after it made PrepareCommit / PrepareAbort durable but
before its WriteTxnMarkers reached a partition leader (issue #12), real broker processes.

Kafka: ``TransactionCoordinator.handleEndTransaction`` answers EndTxn once the Prepare* record is
in ``__transaction_state``; ``TransactionMarkerChannelManager`` then writes the markers. The
broker that takes over the ``__transaction_state`` partition finds the Prepare* record while
loading it (``TransactionStateManager.loadTransactionsForTxnTopicPartition``), writes the
markers again, then CompleteCommit / CompleteAbort.

The window is forced without hooks in the broker: data partition 0 lives on broker B alone and
B is SIGSTOPped before EndTxn, so no marker can reach it (the controller fences B: partition 0
has no leader, B leaves the ``__transaction_state`` ISR so the Prepare* append completes).
Data partition 1 lives on broker C: it gets its marker from the coordinator A before A is
SIGKILLed, and again (a duplicate) from the new coordinator. Then B is resumed (its controller
vote is needed again). Four confluent-kafka transactional producers, all coordinated by A,
share that one failover: one committed, one aborted, one committed whose application
"restarts" (a new producer, InitProducerId) right after the failover, while the new
coordinator may still be loading or writing the markers, and one left Ongoing, which the new
coordinator aborts when it times out.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import IsolationLevel
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from fault.replication_helpers import start_cluster
from interop.txn_peers import describe, producer, read_committed
from kafka.errors import KafkaError

from broker.coordinator.group.group_metadata_manager import partition_for_group
from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(120)

TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 4  # LocalCluster's transaction.state.log.num.partitions
#: the orphan transaction times out after the failover, at the new coordinator
ORPHAN_TIMEOUT_MS = 9000
#: the records of the transactions ended around the failover (one per data partition)
COMMITTED = [b"commit-0", b"commit-1", b"restart-0", b"restart-1"]


@dataclass
class Window:
    cluster: LocalCluster
    topic: str
    bootstrap: str  # the brokers still alive
    ids: dict[str, str]  # "commit" / "abort" / "restart" -> transactional id
    before: dict[str, tuple[int, int]]  # id -> (producer id, epoch) before the failover
    producers: dict[str, confluent_kafka.Producer]  # id -> the producer that ended its transaction
    restarted: confluent_kafka.Producer  # the "restart" id's producer initialized after the failover
    coordinator: int  # A, SIGKILLed


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not within {timeout_s} s")
        time.sleep(0.1)


def _describe_when(bootstrap: str, tid: str, predicate: Callable[[Any], bool], timeout_s: float) -> Any:
    """kafka-python's DescribeTransactions of ``tid``, retried (connection refused, NOT_COORDINATOR,
    COORDINATOR_LOAD_IN_PROGRESS while the coordinator moves) until ``predicate`` holds."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            last = describe(bootstrap, tid)
            if predicate(last):
                return last
        except KafkaError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"{tid}: last DescribeTransactions {last!r} after {timeout_s} s")
        time.sleep(0.1)


def _id_coordinated_by(cluster: LocalCluster, broker: int, prefix: str) -> str:
    """A transactional id whose ``__transaction_state`` partition (Kafka's ``partitionFor``) is
    led by ``broker``."""
    leaders = {p: cluster.partition(TXN_STATE, p).leader for p in range(TXN_STATE_PARTITIONS)}
    for _ in range(1000):
        tid = f"{prefix}-{uuid.uuid4().hex[:8]}"
        if leaders[partition_for_group(tid, TXN_STATE_PARTITIONS)] == broker:
            return tid
    raise AssertionError(f"no transactional id hashes to a partition led by {broker}: {leaders}")


def _read_committed_values(window: Window) -> list[bytes]:
    return read_committed(window.bootstrap, window.topic, 2, timeout_s=30)


def _lso_reached_hw(window: Window) -> bool:
    """confluent-kafka's ListOffsets(latest): read_committed (the last stable offset) equals
    read_uncommitted (the high watermark) on both partitions."""
    admin = AdminClient({"bootstrap.servers": window.bootstrap})
    ends = {}
    for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        spec = {confluent_kafka.TopicPartition(window.topic, p): OffsetSpec.latest() for p in (0, 1)}
        result = admin.list_offsets(spec, isolation_level=level, request_timeout=10)
        ends[level] = {tp.partition: f.result().offset for tp, f in result.items()}
    return ends[IsolationLevel.READ_COMMITTED] == ends[IsolationLevel.READ_UNCOMMITTED]


@pytest.fixture(scope="module")
def window(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Window]:
    cluster = start_cluster(
        tmp_path_factory.mktemp("txn-prepared"),
        **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
    )
    try:
        bootstrap = cluster.bootstrap_servers
        ids = {"commit": f"commit-{uuid.uuid4().hex[:8]}"}
        producers = {"commit": producer(bootstrap, ids["commit"])}
        producers["commit"].init_transactions(30)  # creates __transaction_state
        for p in range(TXN_STATE_PARTITIONS):
            cluster.wait_for_isr(TXN_STATE, p, 3)
        a = describe(bootstrap, ids["commit"]).coordinator_id
        others = [n for n in cluster.node_ids if n != a]
        controller = cluster.controller_id()
        b = next(n for n in others if n != controller)  # no controller election when B stops
        (c,) = (n for n in others if n != b)
        for name in ("abort", "restart", "orphan"):
            ids[name] = _id_coordinated_by(cluster, a, name)
            timeout = {"transaction.timeout.ms": ORPHAN_TIMEOUT_MS} if name == "orphan" else {}
            producers[name] = producer(bootstrap, ids[name], **timeout)
            producers[name].init_transactions(30)
        before = {}
        for name, tid in ids.items():
            d = describe(bootstrap, tid)
            assert d.coordinator_id == a
            before[name] = (d.producer_id, d.producer_epoch)

        topic = "prepared-" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = NewTopic(topic, 2, replica_assignment=[[b], [c]], config={"min.insync.replicas": "1"})
        admin.create_topics([new])[topic].result(30)
        for p in (0, 1):
            cluster.wait_for_leader(topic, p)
        for name, p in producers.items():
            p.begin_transaction()
            for partition in (0, 1):
                p.produce(topic, f"{name}-{partition}".encode(), partition=partition)
            p.flush(30)

        cluster.pause(b)  # from now on no marker reaches partition 0
        producers["commit"].commit_transaction(60)  # PrepareCommit durable once B left the ISR
        producers["abort"].abort_transaction(60)
        producers["restart"].commit_transaction(60)
        bootstrap = ",".join(cluster.broker_address(n) for n in (a, c))
        for name, state in (
            ("commit", "PrepareCommit"),
            ("abort", "PrepareAbort"),
            ("restart", "PrepareCommit"),
            ("orphan", "Ongoing"),  # its producer never ends it
        ):
            assert describe(bootstrap, ids[name]).state == state
        cluster.kill(a)
        cluster.resume(b)
        bootstrap = ",".join(cluster.broker_address(n) for n in (b, c))
        restarted = producer(bootstrap, ids["restart"])
        restarted.init_transactions(60)  # CONCURRENT_TRANSACTIONS until the markers are written
        yield Window(cluster, topic, bootstrap, ids, before, producers, restarted, a)
    finally:
        cluster.stop()


@pytest.mark.parametrize(("name", "state"), [("commit", "CompleteCommit"), ("abort", "CompleteAbort")])
def test_new_coordinator_completes_prepared_transaction(window: Window, name: str, state: str) -> None:
    tid = window.ids[name]
    d = _describe_when(window.bootstrap, tid, lambda d: d.state == state, 30)
    assert d.coordinator_id != window.coordinator
    assert (d.producer_id, d.producer_epoch) == window.before[name]
    _wait(lambda: _lso_reached_hw(window), 20, "last stable offset == high watermark")
    first_round = [v for v in _read_committed_values(window) if v.count(b"-") == 1]
    assert sorted(first_round) == COMMITTED  # never abort-0 / abort-1

    # the producer that knew the dead coordinator goes on with its next transaction
    original = window.producers[name]
    original.begin_transaction()
    original.produce(window.topic, f"{name}-next-0".encode(), partition=0)
    original.commit_transaction(30)
    # and after a re-init the same producer id (next epoch) starts a new transaction
    again = producer(window.bootstrap, tid)
    again.init_transactions(30)
    d2 = _describe_when(window.bootstrap, tid, lambda _d: True, 10)
    assert (d2.producer_id, d2.producer_epoch) == (d.producer_id, d.producer_epoch + 1)
    again.begin_transaction()
    again.produce(window.topic, f"{name}-again-1".encode(), partition=1)
    again.commit_transaction(30)
    values = _read_committed_values(window)
    assert {f"{name}-next-0".encode(), f"{name}-again-1".encode()} <= set(values)
    assert sorted(v for v in values if v.count(b"-") == 1) == COMMITTED


def test_producer_restarted_during_failover_gets_next_epoch(window: Window) -> None:
    """InitProducerId sent right after the failover waits for the prepared commit to complete,
    then bumps the epoch of the same producer id; the old producer is fenced."""
    d = _describe_when(window.bootstrap, window.ids["restart"], lambda _d: True, 10)
    producer_id, epoch = window.before["restart"]
    assert (d.producer_id, d.producer_epoch) == (producer_id, epoch + 1)
    assert d.coordinator_id != window.coordinator
    window.restarted.begin_transaction()
    window.restarted.produce(window.topic, b"restart-again-0", partition=0)
    window.restarted.commit_transaction(30)
    values = _read_committed_values(window)
    assert b"restart-again-0" in values
    assert sorted(v for v in values if v.count(b"-") == 1) == COMMITTED
    old = window.producers["restart"]
    old.begin_transaction()
    old.produce(window.topic, b"restart-zombie-1", partition=1)
    with pytest.raises(confluent_kafka.KafkaException) as fenced:
        old.commit_transaction(30)
    assert fenced.value.args[0].code() == confluent_kafka.KafkaError._FENCED
    old.purge()
    assert b"restart-zombie-1" not in _read_committed_values(window)


def test_new_coordinator_aborts_orphan_transaction_on_timeout(window: Window) -> None:
    """An Ongoing transaction loaded by the new coordinator, whose producer never comes back,
    is aborted when ``transaction.timeout.ms`` expires (Kafka's ``abortTimedOutTransactions``:
    PrepareEpochFence, then PrepareAbort / CompleteAbort with the epoch bumped)."""
    producer_id, epoch = window.before["orphan"]
    d = _describe_when(
        window.bootstrap,
        window.ids["orphan"],
        lambda d: d.state == "CompleteAbort",
        ORPHAN_TIMEOUT_MS / 1000 + 20,
    )
    assert (d.producer_id, d.producer_epoch) == (producer_id, epoch + 1)
    assert d.coordinator_id != window.coordinator
    _wait(lambda: _lso_reached_hw(window), 20, "last stable offset == high watermark")
    values = _read_committed_values(window)
    assert not [v for v in values if v.startswith(b"orphan")]
    old = window.producers["orphan"]
    with pytest.raises(confluent_kafka.KafkaException):
        old.commit_transaction(30)  # fenced by the epoch bump
