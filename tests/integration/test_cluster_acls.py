"""ACLs and dynamic configs through the Raft controller quorum of a three-node LocalCluster: an
ACL, a cluster-wide dynamic broker config, a per-broker one and a group config created through
one broker reach every broker's metadata image (DescribeAcls / DescribeConfigs sent to each node),
survive a broker restart (journal / snapshot replay), and a deletion reaches every broker too."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from spark_kafkalite.client.admin import KafkaAdminClient
from spark_kafkalite.client.admin_configs import ConfigResource as OurResource
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

pytestmark = pytest.mark.timeout(120)


def _on_every_node(admin: KafkaAdminClient, expected: list[AclBinding], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    seen: dict[int, list[AclBinding]] = {}
    while time.monotonic() < deadline:
        seen = {n: admin.describe_acls(AclBindingFilter(), node_id=n) for n in (1, 2, 3)}
        if all(sorted(v, key=str) == sorted(expected, key=str) for v in seen.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"ACLs per node {seen}, expected {expected}")


def _retention_on_every_node(
    bootstrap: str, expected: dict[int, tuple[str, int]], timeout_s: float = 15.0
) -> None:
    """The (value, source) of ``log.retention.ms`` on each broker of ``expected``, asked of it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout_s
    seen: dict[int, tuple[str, int]] = {}
    while time.monotonic() < deadline:
        for n in expected:  # one BROKER resource per call (librdkafka sends it to that broker)
            resource = ConfigResource("broker", str(n))
            entry = admin.describe_configs([resource])[resource].result(15)["log.retention.ms"]
            seen[n] = (entry.value, int(entry.source))
        if seen == expected:
            return
        time.sleep(0.1)
    raise AssertionError(f"log.retention.ms per node {seen}, expected {expected}")


def test_acls_and_configs_reach_every_broker_and_survive_a_restart() -> None:
    overrides = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    binding = AclBinding(
        ResourceType.TOPIC,
        "orders-",
        PatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    with LocalCluster(brokers=3, config_overrides=overrides) as cluster:
        with KafkaAdminClient({"bootstrap.servers": cluster.broker_address(2)}) as admin:
            admin.create_acls([binding])
            admin.incremental_alter_configs({OurResource(4, ""): {"log.retention.ms": "7200000"}})
            admin.incremental_alter_configs({OurResource(32, "g"): {"consumer.session.timeout.ms": "50000"}})
            _on_every_node(admin, [binding])
        per_broker = ConfigResource(
            "broker",
            "3",
            incremental_configs=[
                ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        ck_admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        ck_admin.incremental_alter_configs([per_broker])[per_broker].result(15)
        dynamic = (
            ("7200000", 3),
            ("7200000", 3),
            ("3600000", 2),
        )  # DYNAMIC_DEFAULT_BROKER_CONFIG, DYNAMIC_BROKER_CONFIG
        _retention_on_every_node(cluster.bootstrap_servers, dict(zip((1, 2, 3), dynamic, strict=True)))
        cluster.restart(3)  # replays its configs from the quorum
        _retention_on_every_node(cluster.bootstrap_servers, {3: dynamic[2]})
        with KafkaAdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            group = admin.describe_configs(OurResource(32, "g"))["consumer.session.timeout.ms"]
            assert (group.value, int(group.source)) == ("50000", 8)
            _on_every_node(admin, [binding])
            assert admin.delete_acls([AclBindingFilter(principal="User:alice")]) == [binding]
            _on_every_node(admin, [])
