"""``StandardAuthorizer``: Kafka's ACL authorizer over the ACLs of the metadata image.

Enabled by ``authorizer.class.name`` (Kafka's
``org.apache.kafka.metadata.authorizer.StandardAuthorizer``; empty = no authorization, every
request allowed). The rules are ``StandardAuthorizerData.authorize`` / ``findResult`` /
``MatchingRuleBuilder``:

* a principal in ``super.users`` (``User:admin;User:broker``) is allowed everything;
* an ACL applies to a request when its principal is the caller's or ``User:*``, its host is ``*``
  or the client's address, its resource pattern covers the resource (LITERAL equal, LITERAL ``*``,
  or a PREFIXED prefix of the name) and its operation is ALL or the requested one; an ALLOW ACL
  also applies through implication: READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS
  implies DESCRIBE_CONFIGS (a DENY never denies by implication);
* any applying DENY denies (deny wins); else any applying ALLOW allows; else, when no ACL at all
  covers the resource, ``allow.everyone.if.no.acl.found`` decides (default false); else deny.

The ACLs are read from the current :class:`~broker.controller.metadata_image.MetadataImage`
(they arrive as ``AccessControlEntryRecord`` s through the controller); an index by resource type
and name is rebuilt only when the image's ACL mapping is replaced.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from spark_kafkalite.protocol.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

__all__ = ["StandardAuthorizer", "STANDARD_AUTHORIZER_CLASS", "parse_super_users", "authorizer_for"]

#: The ``authorizer.class.name`` of Kafka's KRaft authorizer (the config also accepts the
#: ZooKeeper-era ``kafka.security.authorizer.AclAuthorizer``, whose ACL semantics are the same).
STANDARD_AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


def _op_applies(acl: AclBinding, operation: AclOperation) -> bool:
    """``StandardAuthorizerData.findResult``'s operation test (implication for ALLOW only)."""
    if acl.operation is AclOperation.ALL or acl.operation is operation:
        return True
    if acl.permission_type is not AclPermissionType.ALLOW:
        return False
    if operation is AclOperation.DESCRIBE:
        return acl.operation in _IMPLIES_DESCRIBE
    if operation is AclOperation.DESCRIBE_CONFIGS:
        return acl.operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


@dataclass(slots=True)
class _Index:
    """ACLs of one image by resource type: LITERAL name -> ACLs, PREFIXED ACLs."""

    literal: dict[tuple[ResourceType, str], list[AclBinding]] = field(default_factory=dict)
    prefixed: dict[ResourceType, list[AclBinding]] = field(default_factory=dict)
    allows: dict[ResourceType, list[AclBinding]] = field(default_factory=dict)
    denies: dict[ResourceType, list[AclBinding]] = field(default_factory=dict)

    @classmethod
    def build(cls, acls: Iterable[AclBinding]) -> _Index:
        index = cls()
        for acl in acls:
            if acl.pattern_type is PatternType.LITERAL:
                index.literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            else:
                index.prefixed.setdefault(acl.resource_type, []).append(acl)
            by_permission = index.allows if acl.permission_type is AclPermissionType.ALLOW else index.denies
            by_permission.setdefault(acl.resource_type, []).append(acl)
        return index

    def covering(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose resource pattern covers ``name``."""
        out = list(self.literal.get((resource_type, name), ()))
        if name != WILDCARD_RESOURCE:
            out.extend(self.literal.get((resource_type, WILDCARD_RESOURCE), ()))
        out.extend(a for a in self.prefixed.get(resource_type, ()) if name.startswith(a.resource_name))
        return out


class StandardAuthorizer:
    """Decides whether a principal may perform an operation on a resource (see the module
    docstring).

    Args:
        acls: returns the current ACLs (the metadata image's ``acls`` mapping; its identity
            changes whenever an ACL is added or removed).
        super_users: principals allowed everything (``super.users``).
        allow_everyone_if_no_acl_found: ``allow.everyone.if.no.acl.found``.
    """

    def __init__(
        self,
        acls: Callable[[], Mapping[uuid.UUID, AclBinding]],
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self._acls = acls
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._indexed: Mapping[uuid.UUID, AclBinding] | None = None
        self._index = _Index()

    def _current(self) -> _Index:
        acls = self._acls()
        if acls is not self._indexed:
            self._index = _Index.build(acls.values())
            self._indexed = acls
        return self._index

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        """True when ``principal`` connected from ``host`` may perform ``operation`` on the
        resource ``resource_type``/``name`` (``StandardAuthorizer.authorize``)."""
        if principal in self.super_users:
            return True
        allowed = False
        covered = False
        for acl in self._current().covering(resource_type, name):
            covered = True
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.host != WILDCARD_HOST and acl.host != host:
                continue
            if not _op_applies(acl, operation):
                continue
            if acl.permission_type is AclPermissionType.DENY:
                return False
            allowed = True
        return allowed or (not covered and self.allow_everyone_if_no_acl_found)

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """True when ``principal`` may perform ``operation`` on at least one resource of
        ``resource_type`` (Kafka's ``Authorizer.authorizeByResourceType``, used by
        InitProducerId for idempotent producers: WRITE on any topic). An ALLOW counts unless a
        DENY for the same principal covers its whole pattern (a LITERAL ``*`` DENY, a PREFIXED
        DENY that is a prefix of it, or an equal pattern)."""
        if principal in self.super_users:
            return True
        index = self._current()

        def applies(acl: AclBinding) -> bool:
            return (
                acl.principal in (principal, WILDCARD_PRINCIPAL)
                and acl.host in (WILDCARD_HOST, host)
                and _op_applies(acl, operation)
            )

        denies = [d for d in index.denies.get(resource_type, ()) if applies(d)]
        for allow in index.allows.get(resource_type, ()):
            if applies(allow) and not any(_pattern_covers(d, allow) for d in denies):
                return True
        if self.allow_everyone_if_no_acl_found and not index.allows.get(resource_type):
            return not denies
        return False


def authorizer_for(
    config: Mapping[str, object], acls: Callable[[], Mapping[uuid.UUID, AclBinding]]
) -> StandardAuthorizer | None:
    """The broker's authorizer from ``authorizer.class.name`` / ``super.users`` /
    ``allow.everyone.if.no.acl.found`` (``KafkaConfig.values``); None when no authorizer is
    configured."""
    if not config["authorizer.class.name"]:
        return None
    return StandardAuthorizer(
        acls, parse_super_users(str(config["super.users"])), bool(config["allow.everyone.if.no.acl.found"])
    )


def _pattern_covers(deny: AclBinding, allow: AclBinding) -> bool:
    if deny.pattern_type is PatternType.LITERAL:
        if deny.resource_name == WILDCARD_RESOURCE:
            return True
        return allow.pattern_type is PatternType.LITERAL and allow.resource_name == deny.resource_name
    return allow.resource_name.startswith(deny.resource_name)
