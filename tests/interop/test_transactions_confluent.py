"""Transactions (KIP-98) against our transaction coordinator, with confluent-kafka's
transactional producer and kafka-python's admin client (DescribeTransactions /
ListTransactions) as independent peers, on one shared single-node broker."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def txn_cluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster(brokers=1)
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic("txn-data", 2, 1)], operation_timeout=10).values():
            future.result(timeout=15)
        yield cluster
    finally:
        cluster.stop()


def producer(bootstrap: str, transactional_id: str, **config: object) -> confluent_kafka.Producer:
    return confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **config}
    )


def describe(bootstrap: str, transactional_id: str) -> object:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.describe_transactions([transactional_id])[transactional_id]
    finally:
        admin.close()


def test_init_transactions_and_describe(txn_cluster: LocalCluster) -> None:
    bootstrap = txn_cluster.bootstrap_servers
    tid = f"init-{uuid.uuid4().hex[:8]}"
    p = producer(bootstrap, tid, **{"transaction.timeout.ms": 45000})
    p.init_transactions(30)
    d = describe(bootstrap, tid)
    assert (d.state, d.transaction_timeout_ms, d.producer_epoch, d.topic_partitions) == (
        "Empty",
        45000,
        0,
        set(),
    )
    assert d.transaction_start_time_ms == -1 and d.coordinator_id == 1
    # a second init (a restarted producer) bumps the epoch of the same producer id
    p2 = producer(bootstrap, tid)
    p2.init_transactions(30)
    d2 = describe(bootstrap, tid)
    assert (d2.producer_id, d2.producer_epoch) == (d.producer_id, 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = [t for ts in admin.list_transactions(state_filters=["Empty"]).values() for t in ts]
        assert any(t.transactional_id == tid and t.producer_id == d.producer_id for t in listed)
        assert not [
            t
            for ts in admin.list_transactions(state_filters=["Ongoing"]).values()
            for t in ts
            if t.transactional_id == tid
        ]
    finally:
        admin.close()


def test_transaction_timeout_above_broker_max_is_fatal(txn_cluster: LocalCluster) -> None:
    p = producer(
        txn_cluster.bootstrap_servers, f"big-{uuid.uuid4().hex[:8]}", **{"transaction.timeout.ms": 900001}
    )
    with pytest.raises(confluent_kafka.KafkaException) as info:
        p.init_transactions(30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_zombie_producer_is_fenced(txn_cluster: LocalCluster) -> None:
    bootstrap = txn_cluster.bootstrap_servers
    tid = f"zombie-{uuid.uuid4().hex[:8]}"
    old = producer(bootstrap, tid)
    old.init_transactions(30)
    new = producer(bootstrap, tid)
    new.init_transactions(30)
    old.begin_transaction()
    old.produce("txn-data", b"zombie", partition=0)
    with pytest.raises(confluent_kafka.KafkaException) as info:
        old.commit_transaction(30)
    error = info.value.args[0]
    assert error.fatal() and error.code() in (
        confluent_kafka.KafkaError._FENCED,
        confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH,
        confluent_kafka.KafkaError.PRODUCER_FENCED,
    )
    d = describe(bootstrap, tid)
    assert (d.state, d.producer_epoch) == ("Empty", 1)  # the zombie never opened a transaction
