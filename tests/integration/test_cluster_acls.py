"""ACLs through the Raft controller quorum of a three-node LocalCluster: an ACL created through
one broker reaches every broker's metadata image (DescribeAcls sent to each node), survives a
broker restart (journal / snapshot replay) and a deletion reaches every broker too."""

from __future__ import annotations

import time

import pytest

from spark_kafkalite.client.admin import KafkaAdminClient
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


def test_acls_reach_every_broker_and_survive_a_restart() -> None:
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
            _on_every_node(admin, [binding])
        cluster.restart(3)
        with KafkaAdminClient({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            _on_every_node(admin, [binding])
            assert admin.delete_acls([AclBindingFilter(principal="User:alice")]) == [binding]
            _on_every_node(admin, [])
