"""Per-API authorization errors as a Kafka broker gives them, seen by confluent-kafka's
Producer, Consumer and AdminClient on PLAINTEXT (principal User:ANONYMOUS).

One broker with the StandardAuthorizer: ACLs are created while User:ANONYMOUS is a super user,
then the broker restarts with ``super.users=User:admin`` (the ACLs come back from acls.json).
User:ANONYMOUS then has: ALL on topics and groups prefixed ``ok-`` (so a prefixed ACL grants
exactly its prefix), READ on topic ``ro``, WRITE on topic ``wo``, a DENY of ALL on topic ``ok-denied`` (deny wins over
the prefixed ALLOW), nothing on ``secret`` or the cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(120)

ANON = "User:ANONYMOUS"
TOPICS = ("ok-t", "ok-denied", "ro", "wo", "secret", "okay")


def _acl(
    rtype: ResourceType, name: str, pattern: ResourcePatternType, op: AclOperation, perm: AclPermissionType
) -> AclBinding:
    return AclBinding(rtype, name, pattern, ANON, "*", op, perm)


def _error(future: object) -> int | None:
    try:
        future.result(15)  # type: ignore[attr-defined]
    except confluent_kafka.KafkaException as exc:
        return int(exc.args[0].code())
    return None


@pytest.fixture(scope="module")
def secured() -> Iterator[str]:
    overrides = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": ANON,
        "auto.create.topics.enable": "true",
    }
    with LocalCluster(brokers=1, config_overrides=overrides) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in TOPICS]).values():
            future.result(15)
        allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
        acls = [
            _acl(ResourceType.TOPIC, "ok-", ResourcePatternType.PREFIXED, AclOperation.ALL, allow),
            _acl(ResourceType.GROUP, "ok-", ResourcePatternType.PREFIXED, AclOperation.ALL, allow),
            _acl(ResourceType.TOPIC, "ro", ResourcePatternType.LITERAL, AclOperation.READ, allow),
            _acl(ResourceType.TOPIC, "wo", ResourcePatternType.LITERAL, AclOperation.WRITE, allow),
            _acl(ResourceType.TOPIC, "ok-denied", ResourcePatternType.LITERAL, AclOperation.ALL, deny),
        ]
        for future in admin.create_acls(acls).values():
            future.result(15)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for topic in ("ok-t", "ro", "wo", "secret"):
            producer.produce(topic, b"v0")
        assert producer.flush(15) == 0
        cluster.config_overrides["super.users"] = "User:admin"
        cluster.restart(1)
        yield cluster.bootstrap_servers


def test_metadata_hides_topics_and_auto_create_needs_create(secured: str) -> None:
    admin = AdminClient({"bootstrap.servers": secured})
    listed = admin.list_topics(timeout=10).topics
    # DESCRIBE: ok- prefix (not "okay", not the denied one), "ro" and "wo" (READ and WRITE
    # imply DESCRIBE)
    assert sorted(listed) == ["ok-t", "ro", "wo"]
    named = admin.list_topics("secret", timeout=10).topics["secret"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    missing = admin.list_topics("nope", timeout=10).topics["nope"]  # existence not revealed
    assert missing.error is not None and missing.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # auto-creation with CREATE on the topic (prefix) works
    producer = Producer({"bootstrap.servers": secured})
    producer.produce("ok-auto", b"x")
    assert producer.flush(15) == 0


def test_produce_needs_write(secured: str) -> None:
    producer = Producer({"bootstrap.servers": secured, "message.timeout.ms": 10000})
    errors: dict[str, int | None] = {}

    def report(err: KafkaError | None, msg: confluent_kafka.Message) -> None:
        errors[msg.topic()] = None if err is None else err.code()

    for topic in ("ok-t", "wo", "ro", "secret", "ok-denied"):
        producer.produce(topic, b"v", on_delivery=report)
    producer.flush(15)
    assert errors == {
        "ok-t": None,
        "wo": None,
        "ro": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "secret": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "ok-denied": KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }


def _consume_error(
    config: dict[str, object], assign: list[TopicPartition] | None, subscribe: list[str] | None
) -> tuple[int | None, int]:
    """(first error code, records read) within a few seconds."""
    consumer = Consumer({"auto.offset.reset": "earliest", "enable.auto.commit": False, **config})
    try:
        if assign is not None:
            consumer.assign(assign)
        if subscribe is not None:
            consumer.subscribe(subscribe)
        deadline = time.monotonic() + 15
        read = 0
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return msg.error().code(), read
            read += 1
            if subscribe is not None:
                consumer.commit(msg, asynchronous=False)
            return None, read
        return None, read
    finally:
        consumer.close()


def test_fetch_and_groups(secured: str) -> None:
    base = {"bootstrap.servers": secured, "group.id": "ok-g"}
    assert _consume_error(base, [TopicPartition("ro", 0, 0)], None) == (None, 1)
    # "wo" is visible (WRITE implies DESCRIBE), so the consumer fetches: Fetch refuses it
    code, _ = _consume_error(base, [TopicPartition("wo", 0, 0)], None)
    assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # "secret" is not even described: the subscription fails on Metadata
    code, _ = _consume_error(base, None, ["secret"])
    assert code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # group ok-g may join, read and commit
    assert _consume_error(base, None, ["ok-t"]) == (None, 1)
    code, _ = _consume_error({**base, "group.id": "bad-g"}, None, ["ok-t"])
    assert code == KafkaError.GROUP_AUTHORIZATION_FAILED


def test_admin_apis(secured: str) -> None:
    admin = AdminClient({"bootstrap.servers": secured})
    created = admin.create_topics([NewTopic("ok-new", 1, 1), NewTopic("other-new", 1, 1)])
    assert _error(created["ok-new"]) is None
    assert _error(created["other-new"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _error(admin.delete_topics(["secret"])["secret"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _error(admin.delete_topics(["ro"])["ro"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    topic_ok = ConfigResource(ConfigResource.Type.TOPIC, "ok-t")
    topic_secret = ConfigResource(ConfigResource.Type.TOPIC, "secret")
    described = admin.describe_configs([topic_ok, topic_secret])
    assert _error(described[topic_ok]) is None
    assert _error(described[topic_secret]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    assert _error(admin.describe_configs([broker])[broker]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    for name, expected in (("ro", KafkaError.TOPIC_AUTHORIZATION_FAILED), ("ok-t", None)):
        entry = ConfigEntry("retention.ms", "60000", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
        assert _error(admin.incremental_alter_configs([resource])[resource]) == expected

    offsets = admin.list_offsets(
        {TopicPartition("ro", 0): OffsetSpec.latest(), TopicPartition("secret", 0): OffsetSpec.latest()}
    )
    assert _error(offsets[TopicPartition("ro", 0)]) is None
    assert _error(offsets[TopicPartition("secret", 0)]) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    groups = admin.describe_consumer_groups(["ok-g", "bad-g"])
    assert _error(groups["ok-g"]) is None
    assert _error(groups["bad-g"]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    listed = admin.list_consumer_groups().result(15)
    assert {g.group_id for g in listed.valid} <= {"ok-g"}

    acl_filter = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert _error(admin.delete_acls([acl_filter])[acl_filter]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    new = _acl(
        ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, AclOperation.READ, AclPermissionType.ALLOW
    )
    assert _error(admin.create_acls([new])[new]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_authorized_operations(secured: str) -> None:
    """KIP-430: Metadata, DescribeCluster and DescribeGroups report the operations the ACLs
    allow User:ANONYMOUS (READ and WRITE imply DESCRIBE; nothing on the cluster gives 0)."""
    admin = AdminClient({"bootstrap.servers": secured})
    topics = admin.describe_topics(TopicCollection(["ok-t", "ro", "wo"]), include_authorized_operations=True)
    ops = {name: set(future.result(15).authorized_operations) for name, future in topics.items()}
    assert ops == {
        "ok-t": {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        },
        "ro": {AclOperation.READ, AclOperation.DESCRIBE},
        "wo": {AclOperation.WRITE, AclOperation.DESCRIBE},
    }
    cluster = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert not cluster.authorized_operations
    groups = admin.describe_consumer_groups(["ok-g"], include_authorized_operations=True)
    assert set(groups["ok-g"].result(15).authorized_operations) == {
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
    }
