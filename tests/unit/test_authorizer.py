"""StandardAuthorizer matching (Kafka's StandardAuthorizerData rules), ACL filters, AclControl
records, the image's ACL records and snapshots, and the single-node ACL file."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.controller import acl_control
from broker.controller.acl_store import load_acls, save_acls
from broker.controller.metadata_image import MetadataImage
from broker.controller.metadata_snapshot import image_to_records
from broker.security.authorizer import StandardAuthorizer, authorizer_for, parse_super_users
from spark_kafkalite.protocol.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.errors import InvalidRequestError

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = ALLOW,
    *,
    rtype: ResourceType = T,
    pattern: PatternType = LIT,
    principal: str = "User:alice",
    host: str = "*",
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(*acls: AclBinding, super_users: str = "", allow_if_none: bool = False) -> StandardAuthorizer:
    table = {uuid.uuid4(): a for a in acls}
    return StandardAuthorizer(lambda: table, parse_super_users(super_users), allow_if_none)


def allowed(auth: StandardAuthorizer, op: AclOperation, name: str = "orders", **kw: object) -> bool:
    principal = str(kw.get("principal", "User:alice"))
    host = str(kw.get("host", "10.0.0.1"))
    rtype = kw.get("rtype", T)
    assert isinstance(rtype, ResourceType)
    return auth.authorize(principal, host, op, rtype, name)


def test_no_acls_denies_unless_allow_everyone() -> None:
    assert not allowed(authorizer(), Op.READ)
    assert allowed(authorizer(allow_if_none=True), Op.READ)
    # an ACL on the resource for someone else: not "no ACL found" any more
    other = acl("orders", Op.READ, principal="User:bob")
    assert not allowed(authorizer(other, allow_if_none=True), Op.READ)
    assert allowed(authorizer(other, allow_if_none=True), Op.READ, "payments")


def test_super_users_bypass_deny() -> None:
    auth = authorizer(acl("*", Op.ALL, DENY, principal="User:*"), super_users="User:admin; User:broker")
    assert allowed(auth, Op.DELETE, principal="User:admin")
    assert allowed(auth, Op.WRITE, principal="User:broker")
    assert not allowed(auth, Op.READ)


def test_literal_wildcard_and_prefixed_patterns() -> None:
    auth = authorizer(
        acl("orders", Op.READ),
        acl("*", Op.WRITE),
        acl("pay-", Op.CREATE, pattern=PRE),
    )
    assert allowed(auth, Op.READ, "orders")
    assert not allowed(auth, Op.READ, "orders2")
    assert allowed(auth, Op.WRITE, "anything")
    assert allowed(auth, Op.CREATE, "pay-eu")
    assert allowed(auth, Op.CREATE, "pay-")
    assert not allowed(auth, Op.CREATE, "pay")
    assert not allowed(auth, Op.CREATE, "xpay-eu")
    # resource types are separate
    assert not allowed(auth, Op.WRITE, "anything", rtype=G)


def test_principal_and_host_matching() -> None:
    auth = authorizer(
        acl("orders", Op.READ, principal="User:*", host="10.0.0.1"),
        acl("orders", Op.WRITE, principal="User:bob"),
    )
    assert allowed(auth, Op.READ, principal="User:carol")
    assert not allowed(auth, Op.READ, host="10.0.0.2")
    assert allowed(auth, Op.WRITE, principal="User:bob")
    assert not allowed(auth, Op.WRITE, principal="User:alice")


def test_implied_operations_only_for_allow() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed(authorizer(acl("orders", op)), Op.DESCRIBE), op
    assert not allowed(authorizer(acl("orders", Op.CREATE)), Op.DESCRIBE)
    assert allowed(authorizer(acl("orders", Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not allowed(authorizer(acl("orders", Op.DESCRIBE)), Op.READ)
    # a DENY of READ does not deny DESCRIBE (implication is for ALLOW only)
    auth = authorizer(acl("orders", Op.DESCRIBE), acl("orders", Op.READ, DENY))
    assert allowed(auth, Op.DESCRIBE)
    assert not allowed(auth, Op.READ)
    # ALL covers everything, both ways
    assert allowed(authorizer(acl("orders", Op.ALL)), Op.ALTER_CONFIGS)
    assert not allowed(authorizer(acl("orders", Op.READ), acl("orders", Op.ALL, DENY)), Op.READ)


def test_deny_wins_across_patterns() -> None:
    auth = authorizer(acl("*", Op.READ), acl("secret-", Op.READ, DENY, pattern=PRE, principal="User:*"))
    assert allowed(auth, Op.READ, "public")
    assert not allowed(auth, Op.READ, "secret-1")


def test_authorize_any() -> None:
    assert not authorizer().authorize_any("User:alice", "h", Op.WRITE, T)
    assert authorizer(allow_if_none=True).authorize_any("User:alice", "h", Op.WRITE, T)
    assert authorizer(acl("orders", Op.WRITE)).authorize_any("User:alice", "h", Op.WRITE, T)
    assert not authorizer(acl("orders", Op.WRITE)).authorize_any("User:bob", "h", Op.WRITE, T)
    denied = authorizer(acl("pay-eu", Op.WRITE), acl("pay-", Op.WRITE, DENY, pattern=PRE))
    assert not denied.authorize_any("User:alice", "h", Op.WRITE, T)
    assert authorizer(acl("pay-eu", Op.WRITE), acl("x", Op.WRITE, DENY)).authorize_any(
        "User:alice", "h", Op.WRITE, T
    )


def test_authorizer_for_config() -> None:
    base = {"authorizer.class.name": "", "super.users": "", "allow.everyone.if.no.acl.found": False}
    assert authorizer_for(base, dict) is None
    auth = authorizer_for(
        {
            **base,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin",
        },
        dict,
    )
    assert auth is not None and auth.super_users == frozenset({"User:admin"})


def test_index_follows_the_acl_mapping() -> None:
    table: dict[uuid.UUID, AclBinding] = {}
    holder = {"acls": table}
    auth = StandardAuthorizer(lambda: holder["acls"])
    assert not auth.authorize("User:alice", "h", Op.READ, T, "orders")
    holder["acls"] = {uuid.uuid4(): acl("orders", Op.READ)}  # a new mapping, as the image makes
    assert auth.authorize("User:alice", "h", Op.READ, T, "orders")


names = st.text(alphabet="ab-*", min_size=1, max_size=4)


@given(
    acl_name=names,
    pattern=st.sampled_from([LIT, PRE]),
    resource=st.text(alphabet="ab-*", min_size=1, max_size=5),
)
def test_match_filter_agrees_with_the_authorizer(acl_name: str, pattern: PatternType, resource: str) -> None:
    """A MATCH filter for a name selects exactly the ACLs the authorizer applies to that name."""
    binding = acl(acl_name, Op.READ, pattern=pattern)
    applies = allowed(authorizer(binding), Op.READ, resource)
    assert AclBindingFilter(T, resource, PatternType.MATCH).matches(binding) == applies


def test_filters() -> None:
    a = acl("orders", Op.READ)
    assert AclBindingFilter().matches(a)
    assert AclBindingFilter(T, "orders", PatternType.ANY).matches(a)
    assert not AclBindingFilter(T, "orders", PRE).matches(a)
    assert not AclBindingFilter(principal="User:bob").matches(a)
    assert AclBindingFilter(host="*", operation=Op.READ, permission_type=ALLOW).matches(a)
    assert not AclBindingFilter(permission_type=DENY).matches(a)
    assert AclBindingFilter.of(2, None, 9, None, None, 1, 1).unknown_field() == "pattern_type"
    assert AclBinding.of(99, "x", 3, "User:a", "*", 3, 3).resource_type is ResourceType.UNKNOWN


@pytest.mark.parametrize("version", [1, 3])
def test_acls_and_filters_travel_in_the_request_fields(version: int) -> None:
    """What the client's admin puts in CreateAcls / DescribeAcls / DeleteAcls requests is what
    the broker's handlers read back (the kio request classes refuse unknown fields)."""
    binding = acl("g-", Op.DESCRIBE, DENY, rtype=G, pattern=PRE)
    create_cls = request_class(ApiKey.CREATE_ACLS, version)
    creation = nested(create_cls, "AclCreation")(**binding.creation_fields())
    assert AclBinding.from_creation(creation) == binding
    acl_filter = AclBindingFilter(T, None, PatternType.MATCH, "User:bob", None, Op.ANY, ALLOW)
    describe = build(request_class(ApiKey.DESCRIBE_ACLS, version), **acl_filter.request_fields())
    assert AclBindingFilter.from_request(describe) == acl_filter
    delete_cls = request_class(ApiKey.DELETE_ACLS, version)
    delete_filter = nested(delete_cls, "DeleteAclsFilter")(**acl_filter.request_fields())
    assert AclBindingFilter.from_request(delete_filter) == acl_filter


def test_create_and_delete_records_roundtrip(tmp_path: Path) -> None:
    image = MetadataImage(cluster_id="c", controller_id=1)
    good = [acl("orders", Op.READ), acl("g-", Op.ALL, DENY, rtype=G, pattern=PRE)]
    bad = [
        acl("orders", Op.ANY),
        acl("orders", Op.READ, pattern=PatternType.MATCH),
        acl("", Op.READ),
        acl("x", Op.ALTER, rtype=C),
        acl("orders", Op.READ, principal="alice"),
        AclBinding(ResourceType.ANY, "x", LIT, "User:a", "*", Op.READ, ALLOW),
        acl("orders", Op.READ, AclPermissionType.ANY),
    ]
    ids = [uuid.uuid4() for _ in good + bad + good]
    records, results = acl_control.create_acls(image, good + bad + good, ids)
    assert results[:2] == [None, None] and results[-2:] == [None, None]  # duplicates succeed
    assert all(isinstance(e, InvalidRequestError) for e in results[2:-2])
    assert len(records) == 2
    image = image.apply(records)[0]
    assert sorted(image.acls.values(), key=str) == sorted(good, key=str)
    # snapshots carry the ACLs
    rebuilt = MetadataImage(cluster_id="c", controller_id=1).apply(image_to_records(image))[0]
    assert dict(rebuilt.acls) == dict(image.acls)
    # the single-node file too
    save_acls(tmp_path / "acls.json", image.acls)
    assert load_acls(tmp_path / "acls.json") == dict(image.acls)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="corrupt ACL file"):
        load_acls(tmp_path / "bad.json")
    assert load_acls(tmp_path / "missing.json") == {}
    # delete: each ACL once, under the first filter that matches it; bad filters are refused
    filters = [
        AclBindingFilter(T),
        AclBindingFilter(),
        AclBindingFilter.of(0, None, 1, None, None, 1, 1),
    ]
    records, deleted = acl_control.delete_acls(image, filters)
    assert deleted[0] == (None, [good[0]]) and deleted[1] == (None, [good[1]])
    assert isinstance(deleted[2][0], InvalidRequestError)
    assert image.apply(records)[0].acls == {}
