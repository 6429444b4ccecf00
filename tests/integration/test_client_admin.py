"""KafkaAdminClient against a real broker: create / delete / list / describe topics, cluster."""

from __future__ import annotations

import pytest

from spark_kafkalite.client import KafkaAdminClient, NewTopic, PartitionInfo
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.protocol.errors import (
    InvalidPartitionsError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def admin(bootstrap_servers: str):  # type: ignore[no-untyped-def]
    client = KafkaAdminClient({"bootstrap.servers": bootstrap_servers, "default.api.timeout.ms": 10_000})
    yield client
    client.close()


def test_create_describe_list_delete(admin: KafkaAdminClient, unique_topic: str) -> None:
    admin.create_topics([NewTopic(unique_topic, 3, 1, {"retention.ms": "3600000"})])
    assert unique_topic in admin.list_topics()
    described = admin.describe_topics([unique_topic])[unique_topic]
    assert [p.partition for p in described] == [0, 1, 2]
    node_id = admin.describe_cluster()["brokers"][0][0]
    assert all(
        p == PartitionInfo(p.partition, node_id, [node_id], [node_id], p.leader_epoch) for p in described
    )
    admin.delete_topics([unique_topic])
    assert unique_topic not in admin.list_topics()
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_topics([unique_topic])


def test_broker_defaults_for_partitions_and_replication(admin: KafkaAdminClient, unique_topic: str) -> None:
    admin.create_topics([NewTopic(unique_topic)])  # -1 / -1: num.partitions, default.replication.factor
    assert len(admin.describe_topics([unique_topic])[unique_topic]) >= 1


def test_create_errors(admin: KafkaAdminClient, unique_topic: str) -> None:
    admin.create_topics([NewTopic(unique_topic, 1, 1)])
    with pytest.raises(TopicAlreadyExistsError, match=unique_topic):
        admin.create_topics([NewTopic(unique_topic, 1, 1)])
    with pytest.raises(InvalidTopicError):
        admin.create_topics([NewTopic("bad/name", 1, 1)])
    with pytest.raises(InvalidPartitionsError):
        admin.create_topics([NewTopic(unique_topic + "-zero", 0, 1)])


def test_validate_only_creates_nothing(admin: KafkaAdminClient, unique_topic: str) -> None:
    admin.create_topics([NewTopic(unique_topic, 2, 1)], validate_only=True)
    assert unique_topic not in admin.list_topics()


def test_delete_unknown_topic(admin: KafkaAdminClient, unique_topic: str) -> None:
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([unique_topic])


def test_describe_cluster(admin: KafkaAdminClient, bootstrap_servers: str) -> None:
    info = admin.describe_cluster()
    host, port = bootstrap_servers.split(",")[0].rsplit(":", 1)
    assert any(b[1] == host and b[2] == int(port) for b in info["brokers"])
    assert info["controller_id"] in {b[0] for b in info["brokers"]}
    assert isinstance(info["cluster_id"], str) and info["cluster_id"]


def test_closed_admin_refuses_calls(bootstrap_servers: str) -> None:
    admin = KafkaAdminClient({"bootstrap.servers": bootstrap_servers})
    admin.close()
    with pytest.raises(IllegalStateError):
        admin.list_topics()
