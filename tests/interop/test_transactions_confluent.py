"""Transactions (KIP-98) end to end against our transaction coordinator and partition leaders,
with confluent-kafka's transactional producer and read_committed consumer, kafka-python's
transactional producer and admin client (DescribeTransactions / ListTransactions) as
independent peers, on one shared single-node broker."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import kafka
import pytest
from interop.txn_peers import create_topic, describe, producer, read_committed
from kafka.admin import KafkaAdminClient

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def txn_cluster() -> Iterator[LocalCluster]:
    # timed-out transactions are looked for every 200 ms instead of Kafka's 10 s
    cluster = LocalCluster(
        brokers=1, config_overrides={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


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
        # ListTransactions v2 (KIP-1152), kafka-python's own request: an RE2 pattern matched whole
        by_pattern = [
            t for ts in admin.list_transactions(transactional_id_pattern=tid[:-2] + "..").values() for t in ts
        ]
        assert [t.transactional_id for t in by_pattern] == [tid]
        assert not [
            t for ts in admin.list_transactions(transactional_id_pattern=tid[1:]).values() for t in ts
        ]
        # INVALID_REGULAR_EXPRESSION (128), a code kafka-python has no class for
        with pytest.raises(kafka.errors.BrokerResponseError, match="error_code=128"):
            admin.list_transactions(transactional_id_pattern="(ab(cd")
    finally:
        admin.close()


def test_transaction_timeout_above_broker_max_is_fatal(txn_cluster: LocalCluster) -> None:
    p = producer(
        txn_cluster.bootstrap_servers, f"big-{uuid.uuid4().hex[:8]}", **{"transaction.timeout.ms": 900001}
    )
    with pytest.raises(confluent_kafka.KafkaException) as info:
        p.init_transactions(30)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.INVALID_TRANSACTION_TIMEOUT


def test_commit_abort_and_offsets_seen_by_read_committed(txn_cluster: LocalCluster) -> None:
    bootstrap = txn_cluster.bootstrap_servers
    topic = f"txn-e2e-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    group = f"eos-{uuid.uuid4().hex[:8]}"
    group_consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    p = producer(bootstrap, f"e2e-{uuid.uuid4().hex[:8]}")
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, f"commit-{i}".encode(), partition=i % 2)
    offsets = [confluent_kafka.TopicPartition(topic, 0, 17, metadata='{"batch": 3}')]
    p.send_offsets_to_transaction(offsets, group_consumer.consumer_group_metadata(), 30)
    # KIP-447: pending offsets are unstable; librdkafka (read_committed by default) retries
    # UNSTABLE_OFFSET_COMMIT until the transaction ends
    with pytest.raises(confluent_kafka.KafkaException) as unstable:
        group_consumer.committed([confluent_kafka.TopicPartition(topic, 0)], 1)
    assert unstable.value.args[0].code() == confluent_kafka.KafkaError._TIMED_OUT
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"abort-{i}".encode(), partition=i % 2)
    p.send_offsets_to_transaction(
        [confluent_kafka.TopicPartition(topic, 0, 99)], group_consumer.consumer_group_metadata(), 30
    )
    p.flush(30)  # the aborted records are in the log
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"commit-last", partition=1)
    p.commit_transaction(30)
    values = read_committed(bootstrap, topic, 2)
    assert sorted(values) == sorted([f"commit-{i}".encode() for i in range(4)] + [b"commit-last"])
    # the committed transaction's offset (not the aborted one's) is what the group reads
    committed = group_consumer.committed([confluent_kafka.TopicPartition(topic, 0)], 30)
    assert committed[0].offset == 17
    group_consumer.close()
    # its metadata as kafka-python reads it. confluent-kafka's binding reads librdkafka's copy of
    # the metadata (not NUL-terminated) as a C string, so bytes after it can leak into the value
    # it returns; and it sends strlen + 1 bytes, so the stored string ends in its C NUL.
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    assert {(tp.partition, o.offset, o.metadata) for tp, o in listed.items()} == {(0, 17, '{"batch": 3}\x00')}


def test_zombie_producer_is_fenced(txn_cluster: LocalCluster) -> None:
    bootstrap = txn_cluster.bootstrap_servers
    topic = f"txn-zombie-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    tid = f"zombie-{uuid.uuid4().hex[:8]}"
    old = producer(bootstrap, tid)
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, b"zombie-1", partition=0)
    old.flush(30)  # written, in an open transaction
    new = producer(bootstrap, tid)
    new.init_transactions(30)  # fences the old producer and aborts its transaction
    new.begin_transaction()
    new.produce(topic, b"new-1", partition=0)
    new.commit_transaction(30)
    old.produce(topic, b"zombie-2", partition=0)
    with pytest.raises(confluent_kafka.KafkaException) as info:
        old.commit_transaction(30)
    error = info.value.args[0]
    assert error.fatal() and error.code() in (
        confluent_kafka.KafkaError._FENCED,
        confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH,
        confluent_kafka.KafkaError.PRODUCER_FENCED,
    )
    assert read_committed(bootstrap, topic, 1) == [b"new-1"]
    d = describe(bootstrap, tid)
    assert (d.state, d.producer_epoch) == ("CompleteCommit", 2)  # fence bump + retry bump


def test_timed_out_transaction_is_aborted(txn_cluster: LocalCluster) -> None:
    bootstrap = txn_cluster.bootstrap_servers
    topic = f"txn-timeout-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    tid = f"timeout-{uuid.uuid4().hex[:8]}"
    p = producer(bootstrap, tid, **{"transaction.timeout.ms": 1000})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"too-slow", partition=0)
    p.flush(30)
    deadline = time.monotonic() + 15
    while describe(bootstrap, tid).state != "CompleteAbort" and time.monotonic() < deadline:
        time.sleep(0.2)
    d = describe(bootstrap, tid)
    assert (d.state, d.producer_epoch) == ("CompleteAbort", 1)  # fenced, then aborted
    with pytest.raises(confluent_kafka.KafkaException):
        p.commit_transaction(30)
    assert read_committed(bootstrap, topic, 1) == []


def test_kafka_python_transactional_producer(txn_cluster: LocalCluster) -> None:
    """kafka-python as a second transactional peer: commit with offsets, then abort."""
    bootstrap = txn_cluster.bootstrap_servers
    topic = f"txn-kp-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    group = f"kp-{uuid.uuid4().hex[:8]}"
    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:8]}")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"k1", partition=0)
        p.send(topic, b"k2", partition=0)
        tp = kafka.TopicPartition(topic, 0)
        p.send_offsets_to_transaction({tp: kafka.OffsetAndMetadata(5, "m", -1)}, group)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"aborted", partition=0)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    assert read_committed(bootstrap, topic, 1) == [b"k1", b"k2"]
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert consumer.committed(tp) == 5
    finally:
        consumer.close()
