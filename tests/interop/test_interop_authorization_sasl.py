"""Authorization per SASL user: confluent-kafka clients authenticated as alice, bob and admin
(SASL_PLAINTEXT, PLAIN) against one in-process broker with the StandardAuthorizer and
``super.users=User:admin``. The admin grants alice a prefix; alice gets exactly it, bob nothing:
topics, groups and transactional ids."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.integration.inprocess_broker import InProcessBroker

pytestmark = pytest.mark.timeout(120)

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
)


@pytest.fixture(scope="module")
def sasl_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = InProcessBroker(
        Path(tmp_path_factory.mktemp("sasl-acl")),
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        },
    )
    broker.start()
    try:
        yield f"127.0.0.1:{broker.server.bound['SASL_PLAINTEXT'][1]}"
    finally:
        broker.stop()


def _as(address: str, user: str, **extra: object) -> dict[str, object]:
    return {
        "bootstrap.servers": address,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
        **extra,
    }


def _produce(config: dict[str, object], topic: str) -> int | None:
    outcome: list[int | None] = []
    producer = confluent_kafka.Producer({**config, "message.timeout.ms": 10000})
    producer.produce(
        topic, b"v", on_delivery=lambda err, _msg: outcome.append(None if err is None else err.code())
    )
    producer.flush(15)
    return outcome[0]


def _init_transactions(config: dict[str, object], transactional_id: str) -> int | None:
    producer = confluent_kafka.Producer({**config, "transactional.id": transactional_id})
    try:
        producer.init_transactions(20)
    except confluent_kafka.KafkaException as exc:
        return int(exc.args[0].code())
    producer.begin_transaction()
    producer.produce("alice-t", b"in a transaction")
    producer.commit_transaction(20)
    return None


def test_each_user_gets_exactly_its_grants(sasl_address: str) -> None:
    admin = AdminClient(_as(sasl_address, "admin"))
    for future in admin.create_topics([NewTopic("alice-t", 1, 1), NewTopic("bob-t", 1, 1)]).values():
        future.result(15)
    grants = [
        AclBinding(
            rtype,
            "alice-",
            ResourcePatternType.PREFIXED,
            "User:alice",
            "*",
            AclOperation.ALL,
            AclPermissionType.ALLOW,
        )
        for rtype in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
    ]
    for future in admin.create_acls(grants).values():
        future.result(15)

    alice, bob = _as(sasl_address, "alice"), _as(sasl_address, "bob")
    assert _produce(alice, "alice-t") is None
    assert _produce(alice, "bob-t") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(bob, "alice-t") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _produce(_as(sasl_address, "admin"), "bob-t") is None  # super user

    consumer = confluent_kafka.Consumer({**alice, "group.id": "alice-g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["alice-t"])
    deadline = time.monotonic() + 20
    message = None
    while message is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
    consumer.close()
    assert message is not None and message.error() is None and message.value() == b"v"

    assert _init_transactions(alice, "alice-tx") is None
    assert _init_transactions(bob, "bob-tx") == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    bob_admin = AdminClient(bob)
    with pytest.raises(confluent_kafka.KafkaException) as info:
        bob_admin.delete_acls([everything])[everything].result(15)
    assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert len(admin.describe_acls(everything).result(15)) == 3
