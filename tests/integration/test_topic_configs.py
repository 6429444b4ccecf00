"""Topic configs and CreatePartitions on a real broker, driven by independent peers
(confluent-kafka's AdminClient, kafka-python's KafkaAdminClient) and by our admin client:
DescribeConfigs sources, CreateTopics configs, IncrementalAlterConfigs / AlterConfigs,
validation errors, live effect on the log, and persistence across a restart."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType as KpResourceType
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from spark_kafkalite.client import KafkaAdminClient
from spark_kafkalite.client import NewTopic as OurNewTopic
from spark_kafkalite.client.admin_configs import ConfigResource as OurResource
from spark_kafkalite.client.admin_configs import ConfigSource
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRequestError,
    UnknownTopicOrPartitionError,
)

pytestmark = pytest.mark.timeout(60)

TOPIC_CONFIG = 1  # ConfigSource ids on the wire
STATIC_BROKER = 4
DEFAULT = 5


def ck_admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def ck_error(future: object) -> confluent_kafka.KafkaError | None:
    try:
        future.result(timeout=15)  # type: ignore[attr-defined]
    except confluent_kafka.KafkaException as exc:
        return exc.args[0]
    return None


def ck_describe(admin: AdminClient, topic: str) -> dict[str, confluent_kafka.admin.ConfigEntry]:
    resource = ConfigResource("topic", topic)
    return admin.describe_configs([resource])[resource].result(timeout=15)


def segment_files(log_dir: Path, topic: str, partition: int = 0) -> list[Path]:
    return sorted((log_dir / f"{topic}-{partition}").glob("*.log"))


def produce_separately(bootstrap: str, topic: str, count: int, size: int = 400) -> None:
    """``count`` records in ``count`` batches (flush after each)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=b"%04d" % i + b"x" * size, partition=0)
        assert producer.flush(10) == 0


# ---------------------------------------------------------------------------------------------
# confluent-kafka


def test_confluent_create_with_config_and_describe_sources(cluster: LocalCluster, unique_topic: str) -> None:
    admin = ck_admin(cluster.bootstrap_servers)
    dry = admin.create_topics(
        [NewTopic(unique_topic, 2, 1, config={"retention.ms": "60000"})], validate_only=True
    )
    assert ck_error(dry[unique_topic]) is None
    assert unique_topic not in admin.list_topics(timeout=10).topics
    created = admin.create_topics(
        [NewTopic(unique_topic, 2, 1, config={"retention.ms": "60000", "cleanup.policy": "delete"})]
    )
    assert ck_error(created[unique_topic]) is None
    entries = ck_describe(admin, unique_topic)
    assert (entries["retention.ms"].value, entries["retention.ms"].source) == ("60000", TOPIC_CONFIG)
    assert not entries["retention.ms"].is_default and not entries["retention.ms"].is_read_only
    assert entries["cleanup.policy"].source == TOPIC_CONFIG
    assert (entries["segment.bytes"].value, entries["segment.bytes"].source) == ("1073741824", DEFAULT)
    assert entries["segment.bytes"].is_default
    assert not any(e.is_sensitive for e in entries.values())

    bad = {
        "unknown": {"no.such.config": "1"},
        "policy": {"cleanup.policy": "foo"},
        "type": {"retention.ms": "abc"},
    }
    results = {
        label: ck_error(
            admin.create_topics([NewTopic(f"{unique_topic}-{label}", 1, 1, config=cfg)])[
                f"{unique_topic}-{label}"
            ]
        )
        for label, cfg in bad.items()
    }
    for label, error in results.items():
        assert error is not None and error.code() == confluent_kafka.KafkaError.INVALID_CONFIG, label
    assert "no.such.config" in results["unknown"].str()
    assert "cleanup.policy" in results["policy"].str()
    assert "retention.ms" in results["type"].str()

    missing = ConfigResource("topic", unique_topic + "-missing")
    error = ck_error(admin.describe_configs([missing])[missing])
    assert error is not None and error.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def test_confluent_incremental_and_legacy_alter(cluster: LocalCluster, unique_topic: str) -> None:
    admin = ck_admin(cluster.bootstrap_servers)
    assert (
        ck_error(
            admin.create_topics([NewTopic(unique_topic, 1, 1, config={"segment.ms": "100000"})])[unique_topic]
        )
        is None
    )

    changes = ConfigResource(
        "topic",
        unique_topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "12345", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
        ],
    )
    assert ck_error(admin.incremental_alter_configs([changes])[changes]) is None
    entries = ck_describe(admin, unique_topic)
    modified = {name: e.value for name, e in entries.items() if e.source == TOPIC_CONFIG}
    assert modified == {"retention.ms": "12345", "cleanup.policy": "delete"}
    assert entries["segment.ms"].source == DEFAULT

    validate = ConfigResource(
        "topic",
        unique_topic,
        incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    assert ck_error(admin.incremental_alter_configs([validate], validate_only=True)[validate]) is None
    assert ck_describe(admin, unique_topic)["retention.ms"].value == "12345"

    invalid = ConfigResource(
        "topic",
        unique_topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "foo", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    error = ck_error(admin.incremental_alter_configs([invalid])[invalid])
    assert error is not None and error.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "cleanup.policy" in error.str()
    not_list = ConfigResource(
        "topic",
        unique_topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND)
        ],
    )
    error = ck_error(admin.incremental_alter_configs([not_list])[not_list])
    assert error is not None and error.code() == confluent_kafka.KafkaError.INVALID_CONFIG

    replace = ConfigResource("topic", unique_topic, set_config={"retention.bytes": "1000000"})
    with pytest.warns(DeprecationWarning):
        future = admin.alter_configs([replace])[replace]
    assert ck_error(future) is None
    modified = {
        name: e.value for name, e in ck_describe(admin, unique_topic).items() if e.source == TOPIC_CONFIG
    }
    assert modified == {"retention.bytes": "1000000"}  # AlterConfigs replaced the whole set

    missing = ConfigResource(
        "topic",
        unique_topic + "-missing",
        incremental_configs=[ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET)],
    )
    error = ck_error(admin.incremental_alter_configs([missing])[missing])
    assert error is not None and error.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART


def _produce_error(producer: confluent_kafka.Producer, topic: str, size: int) -> int | None:
    outcome: list[confluent_kafka.KafkaError | None] = []
    producer.produce(topic, b"x" * size, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    return None if outcome[0] is None else outcome[0].code()


def _wait_produce_error(producer: confluent_kafka.Producer, topic: str, size: int, code: int | None) -> None:
    """Produce until the broker answers ``code`` (a dynamic config reaches the topics right
    after the alter returns, as in Kafka)."""
    deadline = time.monotonic() + 10
    while _produce_error(producer, topic, size) != code:
        assert time.monotonic() < deadline, f"produce of {size} bytes never answered {code}"
        time.sleep(0.05)


def test_confluent_dynamic_broker_configs(cluster: LocalCluster, unique_topic: str) -> None:
    """Kafka's dynamic broker configs: a static key is refused, ``message.max.bytes`` changes
    what a producer may send without a restart, per broker over the cluster-wide default, and
    DescribeConfigs reports each level's source."""
    admin = ck_admin(cluster.bootstrap_servers)
    ours = KafkaAdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    assert ck_error(admin.create_topics([NewTopic(unique_topic, 1, 1)])[unique_topic]) is None
    broker = ConfigResource("broker", "1")
    entries = admin.describe_configs([broker])[broker].result(timeout=15)
    assert entries["num.partitions"].value == "1" and entries["num.partitions"].is_read_only
    assert entries["node.id"].source == STATIC_BROKER
    assert entries["message.max.bytes"].source == DEFAULT and not entries["message.max.bytes"].is_read_only

    def change(name: str, *entries: tuple[str, str | None, AlterConfigOpType]) -> int | None:
        resource = ConfigResource(
            "broker",
            name,
            incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries],
        )
        error = ck_error(admin.incremental_alter_configs([resource])[resource])
        return None if error is None else error.code()

    refused = ConfigResource(
        "broker",
        "1",
        incremental_configs=[ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)],
    )
    error = ck_error(admin.incremental_alter_configs([refused])[refused])
    assert error is not None and error.code() == confluent_kafka.KafkaError.INVALID_REQUEST
    assert error.str() == "Cannot update these configs dynamically: Set(num.partitions)"

    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    try:
        # confluent-kafka refuses an empty broker name: the cluster-wide default goes through ours
        ours.incremental_alter_configs({OurResource(4, ""): {"message.max.bytes": "2000"}})
        _wait_produce_error(producer, unique_topic, 3000, confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE)
        default = ours.describe_configs(OurResource(4, ""))
        assert (default["message.max.bytes"].value, default["message.max.bytes"].source) == (
            "2000",
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        )
        topic_entry = ck_describe(admin, unique_topic)["max.message.bytes"]
        assert (topic_entry.value, topic_entry.source) == (
            "2000",
            int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        )
        # this broker's own value wins over the cluster-wide default
        assert change("1", ("message.max.bytes", "100000", AlterConfigOpType.SET)) is None
        _wait_produce_error(producer, unique_topic, 3000, None)
        entry = admin.describe_configs([broker])[broker].result(timeout=15)["message.max.bytes"]
        assert (entry.value, entry.source) == ("100000", int(ConfigSource.DYNAMIC_BROKER_CONFIG))
    finally:
        change("1", ("message.max.bytes", None, AlterConfigOpType.DELETE))
        ours.incremental_alter_configs({OurResource(4, ""): {"message.max.bytes": None}})
        ours.close()
    _wait_produce_error(producer, unique_topic, 3000, None)
    entry = admin.describe_configs([broker])[broker].result(timeout=15)["message.max.bytes"]
    assert (entry.value, entry.source) == ("1048588", DEFAULT)


def test_dynamic_connection_limit_applies_to_the_next_connections(cluster: LocalCluster) -> None:
    """``max.connections.per.ip.overrides`` changed without a restart: a second connection from
    127.0.0.2 (another loopback address, so the other tests' clients are not limited) is closed
    at once while the first stays; deleting the override lifts the limit."""
    admin = ck_admin(cluster.bootstrap_servers)
    host, port = cluster.bootstrap_servers.split(":")

    def alter(op: AlterConfigOpType, value: str | None) -> None:
        entry = ConfigEntry("max.connections.per.ip.overrides", value, incremental_operation=op)
        resource = ConfigResource("broker", "1", incremental_configs=[entry])
        assert ck_error(admin.incremental_alter_configs([resource])[resource]) is None

    def connect() -> socket.socket:
        sock = socket.create_connection((host, int(port)), timeout=5, source_address=("127.0.0.2", 0))
        sock.settimeout(0.3)
        return sock

    def closed_by_broker(sock: socket.socket) -> bool:
        try:
            return sock.recv(1) == b""
        except TimeoutError:
            return False

    alter(AlterConfigOpType.SET, "127.0.0.2:1")
    try:
        deadline = time.monotonic() + 10
        while True:  # the broker takes the new limit right after the alter returns
            with connect() as first, connect() as second:
                if closed_by_broker(second):
                    assert not closed_by_broker(first)
                    break
            assert time.monotonic() < deadline, "the per-IP override never applied"
            time.sleep(0.05)
    finally:
        alter(AlterConfigOpType.DELETE, None)
    deadline = time.monotonic() + 10
    while True:
        with connect() as first, connect() as second:
            if not closed_by_broker(second):
                break
        assert time.monotonic() < deadline, "the per-IP override was never lifted"
        time.sleep(0.05)


def test_confluent_group_configs(cluster: LocalCluster) -> None:
    """KIP-848 GROUP config resources (type 32): validated against the broker's bounds,
    described with GROUP_CONFIG / DEFAULT_CONFIG sources, whether the group exists or not."""
    admin = ck_admin(cluster.bootstrap_servers)
    group = ConfigResource(ResourceType.GROUP, "configured-group")

    def change(*entries: tuple[str, str | None, AlterConfigOpType]) -> confluent_kafka.KafkaError | None:
        resource = ConfigResource(
            ResourceType.GROUP,
            "configured-group",
            incremental_configs=[ConfigEntry(k, v, incremental_operation=op) for k, v, op in entries],
        )
        return ck_error(admin.incremental_alter_configs([resource])[resource])

    described = admin.describe_configs([group])[group].result(timeout=15)
    assert (
        described["consumer.session.timeout.ms"].value,
        described["consumer.session.timeout.ms"].source,
    ) == (
        "45000",
        DEFAULT,
    )
    assert change(("consumer.session.timeout.ms", "50000", AlterConfigOpType.SET)) is None
    too_long = change(("consumer.session.timeout.ms", "70000", AlterConfigOpType.SET))
    assert too_long is not None and too_long.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "group.consumer.max.session.timeout.ms" in too_long.str()
    unknown = change(("session.timeout.ms", "50000", AlterConfigOpType.SET))
    assert unknown is not None and unknown.str() == "Unknown group config name: session.timeout.ms"
    described = admin.describe_configs([group])[group].result(timeout=15)
    assert (
        described["consumer.session.timeout.ms"].value,
        described["consumer.session.timeout.ms"].source,
    ) == (
        "50000",
        int(ConfigSource.GROUP_CONFIG),
    )
    assert change(("consumer.session.timeout.ms", None, AlterConfigOpType.DELETE)) is None


def test_confluent_create_partitions(cluster: LocalCluster, unique_topic: str) -> None:
    admin = ck_admin(cluster.bootstrap_servers)
    assert ck_error(admin.create_topics([NewTopic(unique_topic, 2, 1)])[unique_topic]) is None
    assert (
        ck_error(admin.create_partitions([NewPartitions(unique_topic, 5)], validate_only=True)[unique_topic])
        is None
    )
    assert len(admin.list_topics(unique_topic, timeout=10).topics[unique_topic].partitions) == 2
    assert ck_error(admin.create_partitions([NewPartitions(unique_topic, 5)])[unique_topic]) is None
    metadata = admin.list_topics(unique_topic, timeout=10).topics[unique_topic]
    assert sorted(metadata.partitions) == [0, 1, 2, 3, 4]
    assert all(p.leader == 1 for p in metadata.partitions.values())
    for count in (5, 3):
        error = ck_error(admin.create_partitions([NewPartitions(unique_topic, count)])[unique_topic])
        assert error is not None and error.code() == confluent_kafka.KafkaError.INVALID_PARTITIONS
    error = ck_error(
        admin.create_partitions([NewPartitions(unique_topic + "-missing", 3)])[unique_topic + "-missing"]
    )
    assert error is not None and error.code() == confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART

    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    producer.produce(unique_topic, value=b"new partition", partition=4)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "cp", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(unique_topic, 4, confluent_kafka.OFFSET_BEGINNING)])
    try:
        deadline = time.monotonic() + 10
        messages: list[confluent_kafka.Message] = []
        while not messages and time.monotonic() < deadline:
            messages = [m for m in consumer.consume(1, timeout=0.5) if m.error() is None]
        assert [(m.partition(), m.offset(), m.value()) for m in messages] == [(4, 0, b"new partition")]
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------
# kafka-python


def test_kafka_python_admin_configs_and_partitions(cluster: LocalCluster, unique_topic: str) -> None:
    admin = kafka.KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([KpNewTopic(unique_topic, 1, 1, topic_configs={"retention.ms": "70000"})])
        described = admin.describe_configs([KpConfigResource(KpResourceType.TOPIC, unique_topic)])
        assert described["topic"][unique_topic]["retention.ms"]["value"] == "70000"
        assert described["topic"][unique_topic]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"

        result = admin.alter_configs(
            [KpConfigResource(KpResourceType.TOPIC, unique_topic, configs={"segment.ms": "3600000"})]
        )
        assert result == {"topic": {unique_topic: "OK"}}
        full = admin.describe_configs(
            [KpConfigResource(KpResourceType.TOPIC, unique_topic)], include_synonyms=True, config_filter="all"
        )["topic"][unique_topic]
        assert full["segment.ms"]["value"] == "3600000" and full["retention.ms"]["value"] == "70000"
        assert full["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert full["retention.ms"]["synonyms"][0] == {
            "name": "retention.ms",
            "value": "70000",
            "source": "DYNAMIC_TOPIC_CONFIG",
        }
        assert full["segment.ms"]["config_type"] == "LONG"

        bad = admin.alter_configs(
            [KpConfigResource(KpResourceType.TOPIC, unique_topic, configs={"retention.ms": "abc"})],
            raise_on_unknown=False,
        )
        assert (
            "retention.ms" in bad["topic"][unique_topic]
            and "InvalidConfiguration" in bad["topic"][unique_topic]
        )

        admin.create_partitions({unique_topic: KpNewPartitions(3)})
        assert admin.describe_topics([unique_topic])[0]["partitions"].__len__() == 3
    finally:
        admin.close()


# ---------------------------------------------------------------------------------------------
# our admin client + the live log


def test_our_admin_and_live_segment_bytes(cluster: LocalCluster, unique_topic: str) -> None:
    admin = KafkaAdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        admin.create_topics([OurNewTopic(unique_topic, 1, 1, {"retention.ms": "3600000"})])
        entries = admin.describe_configs(unique_topic)
        assert (
            entries["retention.ms"].value == "3600000"
            and entries["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        )
        assert entries["segment.bytes"].is_default

        produce_separately(cluster.bootstrap_servers, unique_topic, 5)
        assert len(segment_files(cluster.log_dir(1), unique_topic)) == 1
        admin.incremental_alter_configs({unique_topic: {"segment.bytes": "1024", "retention.ms": None}})
        entries = admin.describe_configs(
            unique_topic, keys=["segment.bytes", "retention.ms"], include_synonyms=True
        )
        assert set(entries) == {"segment.bytes", "retention.ms"}
        assert entries["segment.bytes"].value == "1024" and entries["retention.ms"].is_default
        assert entries["segment.bytes"].synonyms[0].name == "segment.bytes"
        produce_separately(cluster.bootstrap_servers, unique_topic, 8)  # ~450 B batches: 2 per segment
        assert len(segment_files(cluster.log_dir(1), unique_topic)) >= 4  # applied without a restart

        with pytest.raises(InvalidConfigError, match="cleanup.policy"):
            admin.incremental_alter_configs({unique_topic: {"cleanup.policy": "foo"}})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_configs(unique_topic + "-missing")
        with pytest.raises(InvalidRequestError):
            admin.alter_configs({OurResource.broker(1): {"num.partitions": "2"}})
        broker_entries = admin.describe_configs(OurResource.broker(1))
        assert broker_entries["num.partitions"].read_only

        admin.alter_configs({unique_topic: {"retention.bytes": "4096"}})
        modified = {k: v.value for k, v in admin.describe_configs(unique_topic).items() if not v.is_default}
        assert modified == {"retention.bytes": "4096"}

        admin.create_partitions({unique_topic: 3})
        assert [p.partition for p in admin.describe_topics([unique_topic])[unique_topic]] == [0, 1, 2]
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({unique_topic: 2})

        admin.delete_topics([unique_topic])
        admin.create_topics([OurNewTopic(unique_topic, 1, 1)])
        assert all(e.is_default for e in admin.describe_configs(unique_topic).values())  # no stale overrides
    finally:
        admin.close()


# ---------------------------------------------------------------------------------------------
# restart


def test_overrides_and_partitions_survive_restart(tmp_path: Path) -> None:
    topic = "configured"
    with LocalCluster(data_dir=tmp_path / "cluster") as local:
        bootstrap = local.bootstrap_servers
        admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
        try:
            admin.create_topics([OurNewTopic(topic, 1, 1, {"retention.ms": "86400000"})])
            admin.incremental_alter_configs({topic: {"segment.bytes": "1024"}})
            admin.create_partitions({topic: 2})
        finally:
            admin.close()
        assert (local.log_dir(1) / "topic-configs.json").exists()

        assert local.terminate(1) == 0
        local.restart(1)

        admin = KafkaAdminClient({"bootstrap.servers": bootstrap})
        try:
            modified = {k: v.value for k, v in admin.describe_configs(topic).items() if not v.is_default}
            assert modified == {"retention.ms": "86400000", "segment.bytes": "1024"}
            assert len(admin.describe_topics([topic])[topic]) == 2
        finally:
            admin.close()
        before = len(segment_files(local.log_dir(1), topic))
        produce_separately(bootstrap, topic, 6)
        assert (
            len(segment_files(local.log_dir(1), topic)) >= before + 2
        )  # the restored override drives the log

        local.kill(1)  # crash: the overrides were made durable when they changed
        local.restart(1)
        entries = ck_describe(ck_admin(bootstrap), topic)
        assert entries["segment.bytes"].value == "1024" and entries["segment.bytes"].source == TOPIC_CONFIG
