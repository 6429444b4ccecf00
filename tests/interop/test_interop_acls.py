"""CreateAcls / DescribeAcls / DeleteAcls through confluent-kafka's AdminClient (AclBinding,
AclBindingFilter) against one broker with the StandardAuthorizer (User:ANONYMOUS a super user);
the ACLs survive a broker restart (acls.json); without an authorizer the ACL APIs answer
SECURITY_DISABLED."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(90)

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin;User:ANONYMOUS",
}
ANY = AclBindingFilter(
    ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


@pytest.fixture(scope="module")
def secured() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=1, config_overrides=AUTHORIZER) as cluster:
        yield cluster


def _key(b: AclBinding) -> tuple[object, ...]:
    return (
        b.restype.name,
        b.name,
        b.resource_pattern_type.name,
        b.principal,
        b.host,
        b.operation.name,
        b.permission_type.name,
    )


def test_create_describe_delete_and_restart(secured: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap_servers})
    read_orders = AclBinding(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.READ,
        AclPermissionType.ALLOW,
    )
    deny_group = AclBinding(
        ResourceType.GROUP,
        "g-",
        ResourcePatternType.PREFIXED,
        "User:bob",
        "10.0.0.1",
        AclOperation.ALL,
        AclPermissionType.DENY,
    )
    write_any = AclBinding(
        ResourceType.TOPIC,
        "*",
        ResourcePatternType.LITERAL,
        "User:*",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    bad_cluster = AclBinding(
        ResourceType.BROKER,
        "not-kafka-cluster",
        ResourcePatternType.LITERAL,
        "User:alice",
        "*",
        AclOperation.ALTER,
        AclPermissionType.ALLOW,
    )
    futures = admin.create_acls([read_orders, deny_group, write_any, bad_cluster])
    for binding in (read_orders, deny_group, write_any):
        assert futures[binding].result(15) is None
    with pytest.raises(confluent_kafka.KafkaException) as info:
        futures[bad_cluster].result(15)
    assert info.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST
    # creating an existing ACL again succeeds without a duplicate
    assert admin.create_acls([read_orders])[read_orders].result(15) is None

    everything = sorted(map(_key, admin.describe_acls(ANY).result(15)))
    assert everything == sorted(map(_key, [read_orders, deny_group, write_any]))
    # MATCH: what applies to topic "orders" (its LITERAL ACL and the LITERAL "*")
    match_orders = AclBindingFilter(
        ResourceType.TOPIC,
        "orders",
        ResourcePatternType.MATCH,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert sorted(map(_key, admin.describe_acls(match_orders).result(15))) == sorted(
        map(_key, [read_orders, write_any])
    )
    by_principal = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        "User:bob",
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert list(map(_key, admin.describe_acls(by_principal).result(15))) == [_key(deny_group)]

    # survives a restart (single node: acls.json in the metadata dir)
    secured.restart(1)
    admin = AdminClient({"bootstrap.servers": secured.bootstrap_servers})
    assert sorted(map(_key, admin.describe_acls(ANY).result(15))) == everything

    deleted = admin.delete_acls([match_orders])[match_orders].result(15)
    assert sorted(map(_key, deleted)) == sorted(map(_key, [read_orders, write_any]))
    assert list(map(_key, admin.describe_acls(ANY).result(15))) == [_key(deny_group)]
    admin.delete_acls([ANY])[ANY].result(15)
    assert admin.describe_acls(ANY).result(15) == []


def test_acl_apis_without_authorizer_are_security_disabled(bootstrap_servers: str) -> None:
    """(librdkafka 2.16 drops DescribeAcls' top-level error and returns [], so our admin checks
    the code.)"""
    from spark_kafkalite.client.admin import KafkaAdminClient
    from spark_kafkalite.protocol import acl
    from spark_kafkalite.protocol.errors import SecurityDisabledError

    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        with pytest.raises(SecurityDisabledError, match="No Authorizer"):
            admin.describe_acls(acl.AclBindingFilter())
        with pytest.raises(SecurityDisabledError):
            admin.delete_acls([acl.AclBindingFilter()])
        binding = acl.AclBinding(
            acl.ResourceType.TOPIC,
            "t",
            acl.PatternType.LITERAL,
            "User:a",
            "*",
            acl.AclOperation.READ,
            acl.AclPermissionType.ALLOW,
        )
        with pytest.raises(SecurityDisabledError):
            admin.create_acls([binding])
