"""CreateTopics / DeleteTopics / Metadata through confluent-kafka's and kafka-python's admin
clients, and ListOffsets through get_watermark_offsets / offsets_for_times."""

from __future__ import annotations

import time

import confluent_kafka
import kafka
import kafka.errors
import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic
from peers import ck_create_topic, ck_produce, make_messages

pytestmark = pytest.mark.timeout(60)


def _ck_error(future: object) -> confluent_kafka.KafkaError | None:
    try:
        future.result(timeout=15)  # type: ignore[attr-defined]
    except confluent_kafka.KafkaException as exc:
        return exc.args[0]
    return None


def _wait_until(predicate, timeout_s: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_confluent_admin_create_describe_delete(bootstrap_servers: str, unique_topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    other = unique_topic + "-defaults"

    # validate_only creates nothing
    assert (
        _ck_error(admin.create_topics([NewTopic(unique_topic, 5, 1)], validate_only=True)[unique_topic])
        is None
    )
    assert unique_topic not in admin.list_topics(timeout=10).topics

    futures = admin.create_topics([NewTopic(unique_topic, 5, 1), NewTopic(other)])
    assert _ck_error(futures[unique_topic]) is None
    assert _ck_error(futures[other]) is None

    metadata = admin.list_topics(timeout=10)
    assert metadata.cluster_id and metadata.controller_id == 1
    assert [b.id for b in metadata.brokers.values()] == [1]
    topic = metadata.topics[unique_topic]
    assert topic.error is None
    assert sorted(topic.partitions) == [0, 1, 2, 3, 4]
    for p in topic.partitions.values():
        assert (p.leader, p.replicas, p.isrs) == (1, [1], [1])
    assert sorted(metadata.topics[other].partitions) == [0]  # num.partitions default

    errors = {
        "exists": _ck_error(admin.create_topics([NewTopic(unique_topic, 1, 1)])[unique_topic]),
        "rf": _ck_error(admin.create_topics([NewTopic(unique_topic + "-rf", 1, 3)])[unique_topic + "-rf"]),
        "name": _ck_error(admin.create_topics([NewTopic("bad/name", 1, 1)])["bad/name"]),
        "partitions": _ck_error(
            admin.create_topics([NewTopic(unique_topic + "-p", 0, 1)])[unique_topic + "-p"]
        ),
    }
    assert errors["exists"].code() == confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS
    assert errors["rf"].code() == confluent_kafka.KafkaError.INVALID_REPLICATION_FACTOR
    assert errors["name"].code() == confluent_kafka.KafkaError.TOPIC_EXCEPTION
    assert errors["partitions"].code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    configs = {
        "unknown": {"no.such.config": "1"},
        "bad_policy": {"cleanup.policy": "shred"},
        "compact": {"cleanup.policy": "compact"},
        "known": {"retention.ms": "60000", "segment.bytes": "1048576"},
    }
    results = {
        label: _ck_error(
            admin.create_topics([NewTopic(f"{unique_topic}-{label}", 1, 1, config=cfg)])[
                f"{unique_topic}-{label}"
            ]
        )
        for label, cfg in configs.items()
    }
    assert results["unknown"].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert results["bad_policy"].code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert results["compact"] is None
    assert results["known"] is None

    deleted = admin.delete_topics([unique_topic, other], operation_timeout=10)
    assert _ck_error(deleted[unique_topic]) is None and _ck_error(deleted[other]) is None
    assert unique_topic not in admin.list_topics(timeout=10).topics
    missing = _ck_error(admin.delete_topics([unique_topic])[unique_topic])
    assert missing is not None and missing.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_authorized_operations_without_authorizer(
    bootstrap_servers: str, unique_topic: str
) -> None:
    """KIP-430 with no authorizer: every operation the resource type has (``AclEntry``)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    ck_create_topic(bootstrap_servers, unique_topic, 1)
    plain = admin.describe_topics(TopicCollection([unique_topic]))[unique_topic].result(15)
    assert plain.authorized_operations is None  # not asked: INT32_MIN, "unknown"
    described = admin.describe_topics(TopicCollection([unique_topic]), include_authorized_operations=True)
    assert {op.name for op in described[unique_topic].result(15).authorized_operations} == {
        "READ",
        "WRITE",
        "CREATE",
        "DESCRIBE",
        "DELETE",
        "ALTER",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
    }
    cluster = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert {op.name for op in cluster.authorized_operations} == {
        "CREATE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
        "ALTER",
        "DESCRIBE",
    }


def test_kafka_python_admin(bootstrap_servers: str, unique_topic: str) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics([kafka.admin.NewTopic(unique_topic, 3, 1)])
        assert unique_topic in admin.list_topics()
        described = admin.describe_topics([unique_topic])
        assert described[0]["error_code"] == 0
        assert sorted(p["partition_index"] for p in described[0]["partitions"]) == [0, 1, 2]
        with pytest.raises(kafka.errors.TopicAlreadyExistsError):
            admin.create_topics([kafka.admin.NewTopic(unique_topic, 1, 1)])
        cluster = admin.describe_cluster()
        assert cluster["controller_id"] == 1 and len(cluster["brokers"]) == 1
        admin.delete_topics([unique_topic])
        assert unique_topic not in admin.list_topics()
    finally:
        admin.close()


def test_confluent_list_offsets(bootstrap_servers: str, unique_topic: str) -> None:
    ck_create_topic(bootstrap_servers, unique_topic, 2)
    messages = make_messages(600, 2)
    ck_produce(bootstrap_servers, unique_topic, messages, "all")
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "interop-offsets"}
    )
    try:
        for p in range(2):
            assert consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(unique_topic, p), timeout=10
            ) == (0, 300)
        p0 = [m for m in messages if m.partition == 0]
        queries = [
            confluent_kafka.TopicPartition(unique_topic, 0, p0[0].timestamp_ms - 1000),  # before all -> 0
            confluent_kafka.TopicPartition(unique_topic, 0, p0[123].timestamp_ms),  # exact -> 123
            confluent_kafka.TopicPartition(unique_topic, 0, p0[200].timestamp_ms - 1),  # between -> 200
            confluent_kafka.TopicPartition(unique_topic, 0, p0[-1].timestamp_ms + 1),  # after all -> -1
        ]
        result = [consumer.offsets_for_times([q], timeout=10)[0] for q in queries]
        assert [r.error for r in result] == [None] * 4
        assert [r.offset for r in result] == [0, 123, 200, -1]
    finally:
        consumer.close()


def test_kafka_python_list_offsets(bootstrap_servers: str, unique_topic: str) -> None:
    ck_create_topic(bootstrap_servers, unique_topic, 1)
    messages = make_messages(100, 1)
    ck_produce(bootstrap_servers, unique_topic, messages, "1")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap_servers)
    try:
        tp = kafka.TopicPartition(unique_topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 100}
        found = consumer.offsets_for_times({tp: messages[42].timestamp_ms})[tp]
        assert (found.offset, found.timestamp) == (42, messages[42].timestamp_ms)
        assert consumer.offsets_for_times({tp: messages[-1].timestamp_ms + 1})[tp] is None
    finally:
        consumer.close()
