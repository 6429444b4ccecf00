"""acks=all below min.insync.replicas fails with NOT_ENOUGH_REPLICAS (issue 3, test 3).

``LocalCluster(brokers=5)`` (combined broker+controller nodes): the Raft quorum of 5 survives two
failures, so the controller can still shrink the ISR when both followers of an RF=3 partition
die. With ``min.insync.replicas=2`` and an ISR of the leader alone, the leader must reject
acks=all produce requests with NOT_ENOUGH_REPLICAS (error 19, Kafka's
``Partition.appendRecordsToLeader``) before appending anything, while acks=1 still succeeds;
the acks=1 records stay invisible (the HW does not move while the ISR is below min.insync.replicas,
KAFKA-15583) until the followers come back and the ISR grows back to 3.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient
from fault.replication_helpers import FAULT_OVERRIDES, AckLog, confluent_producer, consume_all, create_topic

from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(180)


def _isr(admin: AdminClient, topic: str) -> tuple[int, tuple[int, ...]]:
    """(leader, ISR) of ``topic``-0 as confluent-kafka's Metadata shows them."""
    md = admin.list_topics(topic=topic, timeout=5)
    p = md.topics[topic].partitions[0]
    return int(p.leader), tuple(sorted(p.isrs))


def _wait_isr(admin: AdminClient, topic: str, expected: tuple[int, ...], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = _isr(admin, topic)
            if last[1] == expected:
                return
        except Exception as exc:  # a broker of the bootstrap list may be down
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"ISR of {topic}-0 not {expected} within {timeout_s} s; last (leader, isr): {last}")


def _produce_sync(
    producer: Producer, topic: str, value: bytes, acks: AckLog, timeout_s: float
) -> KafkaError | None:
    """Send one record to partition 0 and wait for its delivery report; returns its error."""
    result: list[KafkaError | None] = []

    def callback(err: KafkaError | None, msg: Any) -> None:
        result.append(err)
        if err is None:
            acks.on_ack(msg.value(), msg.partition(), msg.offset())
        else:
            acks.on_fail(msg.value(), str(err))

    producer.produce(topic, value=value, partition=0, callback=callback)
    deadline = time.monotonic() + timeout_s
    while not result and time.monotonic() < deadline:
        producer.poll(0.1)
    assert result, f"no delivery report for {value!r} within {timeout_s} s"
    return result[0]


def _raw_produce_acks_all(address: str, topic: str, value: bytes) -> int:
    """error_code of a Produce (acks=-1) of one non-idempotent batch sent straight to ``address``."""
    host, port = address.rsplit(":", 1)
    client = NetworkClient({"client.id": "ner-test", "request.timeout.ms": 15000})
    client.add_node(0, host, int(port))
    batch = encode_batch([(None, value, int(time.time() * 1000), [])])

    def build(version: int) -> Any:
        cls = request_class(ApiKey.PRODUCE, version)
        part = nested(cls, "PartitionProduceData")(index=0, records=batch)
        topic_data = (nested(cls, "TopicProduceData")(name=topic, partition_data=(part,)),)
        return make(cls, transactional_id=None, acks=-1, timeout=5000, topic_data=topic_data)

    try:
        response = client.send_and_wait(0, RequestBuilder(ApiKey.PRODUCE, build), timeout_ms=15000)
    finally:
        client.close()
    return int(response.responses[0].partition_responses[0].error_code)


def test_acks_all_below_min_isr_is_not_enough_replicas(tmp_path: Path) -> None:
    cluster = LocalCluster(
        brokers=5, data_dir=tmp_path / "cluster", config_overrides=dict(FAULT_OVERRIDES)
    ).start()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        topic = create_topic(cluster, partitions=1, min_isr=2)
        leader, isr = _isr(admin, topic)
        replicas = tuple(
            sorted(admin.list_topics(topic=topic, timeout=5).topics[topic].partitions[0].replicas)
        )
        assert len(replicas) == 3 and isr == replicas and leader in replicas
        followers = [r for r in replicas if r != leader]

        acks = AckLog()
        producer = confluent_producer(cluster)
        for i in range(20):
            producer.produce(
                topic,
                value=b"before-%03d" % i,
                partition=0,
                callback=lambda err, msg: (
                    acks.on_ack(msg.value(), msg.partition(), msg.offset())
                    if err is None
                    else acks.on_fail(msg.value(), str(err))
                ),
            )
        assert producer.flush(30) == 0
        assert len(acks.acked) == 20 and not acks.failed, acks.failed[:3]

        for follower in followers:
            cluster.kill(follower)
        _wait_isr(admin, topic, (leader,), timeout_s=40)
        assert cluster.partition(topic, 0).leader == leader

        # librdkafka, no retries: the delivery report carries the broker's error as is.
        strict = Producer(
            {
                "bootstrap.servers": cluster.broker_address(leader),
                "acks": "all",
                "retries": 0,
                "enable.idempotence": False,
                "message.timeout.ms": 5000,
                "linger.ms": 0,
            }
        )
        err = _produce_sync(strict, topic, b"rejected-ck", acks, timeout_s=20)
        assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS, err
        # The raw Produce response: error 19 exactly (not 20, NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        # the ISR was already too small, so nothing was appended).
        code = _raw_produce_acks_all(cluster.broker_address(leader), topic, b"rejected-raw")
        assert code == ErrorCode.not_enough_replicas == 19

        # acks=1 only needs the leader.
        acks_one = Producer(
            {
                "bootstrap.servers": cluster.broker_address(leader),
                "acks": 1,
                "enable.idempotence": False,
                "message.timeout.ms": 20000,
                "linger.ms": 0,
            }
        )
        for i in range(5):
            assert _produce_sync(acks_one, topic, b"acks1-%03d" % i, acks, timeout_s=30) is None

        # KAFKA-15583 (Kafka 3.7+): the HW does not advance while the ISR is below
        # min.insync.replicas, so the acks=1 records are stored but not yet visible.
        visible = consume_all(cluster, topic, partitions=1)[0]
        assert [v for _o, v in visible] == [b"before-%03d" % i for i in range(20)]

        cluster.start_nodes(*followers)
        _wait_isr(admin, topic, replicas, timeout_s=60)
        # Leadership may move to the preferred replica now: use a retrying producer.
        err = _produce_sync(confluent_producer(cluster), topic, b"after-heal", acks, timeout_s=60)
        assert err is None, err

        consumed = consume_all(cluster, topic, partitions=1)
        stored = {v: o for o, v in consumed[0]}
        lost = [(v, o) for v, _p, o in acks.acked if stored.get(v) != o]
        assert not lost, f"acknowledged but not stored at its offset: {lost[:5]}"
        assert b"rejected-ck" not in stored and b"rejected-raw" not in stored
        assert len(consumed[0]) == len(acks.acked) == 26
    finally:
        cluster.stop()
