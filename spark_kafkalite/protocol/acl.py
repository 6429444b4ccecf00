"""ACL vocabulary of CreateAcls / DescribeAcls / DeleteAcls, shared by the broker's authorizer
and controller and the client's admin.

The enum ids are Kafka's wire values (``org.apache.kafka.common.resource.ResourceType`` /
``PatternType``, ``org.apache.kafka.common.acl.AclOperation`` / ``AclPermissionType``).
:class:`AclBinding` is one ACL (``AclBinding`` = ``ResourcePattern`` + ``AccessControlEntry``);
:class:`AclBindingFilter` is what DescribeAcls / DeleteAcls select with, and
:meth:`AclBindingFilter.matches` is Kafka's ``ResourcePatternFilter.matches`` +
``AccessControlEntryFilter.matches``. Their ``*_fields`` / ``from_*`` methods hold the request
fields an ACL and a filter travel in (``CreateAclsRequest.AclCreation``,
``DescribeAclsRequest`` and ``DeleteAclsRequest.DeleteAclsFilter``), for the client's requests
and the broker's handlers alike.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "ResourceType",
    "PatternType",
    "AclOperation",
    "AclPermissionType",
    "AclBinding",
    "AclBindingFilter",
    "CLUSTER_NAME",
    "WILDCARD_RESOURCE",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_HOST",
    "ANONYMOUS_PRINCIPAL",
    "SUPPORTED_OPERATIONS",
    "operations_bitfield",
]

#: The cluster resource's only name (``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"
#: A LITERAL resource name matching every name (``ResourcePattern.WILDCARD_RESOURCE``).
WILDCARD_RESOURCE = "*"
#: The principal matching every user (``AclEntry.WILDCARD_PRINCIPAL_STRING``).
WILDCARD_PRINCIPAL = "User:*"
#: The host matching every client address (``AclEntry.WILDCARD_HOST``).
WILDCARD_HOST = "*"
#: The principal of an unauthenticated connection (``KafkaPrincipal.ANONYMOUS``).
ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` ids."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` ids (ANY and MATCH exist only in filters)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` ids."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType`` ids."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's ``AclBinding``).

    Attributes:
        resource_type / resource_name / pattern_type: the resource pattern (LITERAL name, the
            LITERAL wildcard ``*``, or a PREFIXED prefix).
        principal: ``User:<name>`` or ``User:*``.
        host: a client IP address or ``*``.
        operation / permission_type: what is allowed or denied.
    """

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission_type: int,
    ) -> AclBinding:
        """Build from wire ids; ids Kafka does not define become UNKNOWN (Kafka's
        ``fromCode``), which the controller then refuses."""
        return cls(
            _enum_or_unknown(ResourceType, resource_type),
            resource_name,
            _enum_or_unknown(PatternType, pattern_type),
            principal,
            host,
            _enum_or_unknown(AclOperation, operation),
            _enum_or_unknown(AclPermissionType, permission_type),
        )

    @classmethod
    def from_creation(cls, creation: Any) -> AclBinding:
        """From a CreateAclsRequest ``AclCreation`` (wire ids as in :meth:`of`)."""
        return cls.of(*(getattr(creation, name) for name in _CREATION_FIELDS))

    def creation_fields(self) -> dict[str, Any]:
        """The fields of a CreateAclsRequest ``AclCreation`` for this ACL."""
        return dict(zip(_CREATION_FIELDS, _wire_values(self), strict=True))

    def to_filter(self) -> AclBindingFilter:
        """The filter matching exactly this binding."""
        return AclBindingFilter(
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type,
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter (Kafka's ``AclBindingFilter``): ANY (or None for the
    strings) matches every value of a field; ``pattern_type`` MATCH selects the bindings that
    would apply to ``resource_name`` (LITERAL equal, LITERAL ``*``, PREFIXED prefixes of it)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def of(
        cls,
        resource_type: int,
        resource_name: str | None,
        pattern_type: int,
        principal: str | None,
        host: str | None,
        operation: int,
        permission_type: int,
    ) -> AclBindingFilter:
        """Build from wire ids (unknown ids become UNKNOWN, see :meth:`unknown_field`)."""
        return cls(
            _enum_or_unknown(ResourceType, resource_type),
            resource_name,
            _enum_or_unknown(PatternType, pattern_type),
            principal,
            host,
            _enum_or_unknown(AclOperation, operation),
            _enum_or_unknown(AclPermissionType, permission_type),
        )

    @classmethod
    def from_request(cls, entity: Any) -> AclBindingFilter:
        """From a DescribeAclsRequest or a DeleteAclsRequest ``DeleteAclsFilter`` (wire ids as in
        :meth:`of`)."""
        return cls.of(*(getattr(entity, name) for name in _FILTER_FIELDS))

    def request_fields(self) -> dict[str, Any]:
        """The filter fields of a DescribeAclsRequest / DeleteAclsRequest ``DeleteAclsFilter``."""
        return dict(zip(_FILTER_FIELDS, _wire_values(self), strict=True))

    def unknown_field(self) -> str | None:
        """The name of a field holding UNKNOWN (Kafka refuses such filters with
        INVALID_REQUEST: ``AclBindingFilter.findIndefiniteField``), else None."""
        for name in ("resource_type", "pattern_type", "operation", "permission_type"):
            if getattr(self, name).name == "UNKNOWN":
                return name
        return None

    def matches(self, acl: AclBinding) -> bool:
        """Whether ``acl`` is selected (``ResourcePatternFilter.matches`` and
        ``AccessControlEntryFilter.matches``)."""
        if self.resource_type is not ResourceType.ANY and self.resource_type is not acl.resource_type:
            return False
        if not self._pattern_matches(acl):
            return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation is not AclOperation.ANY and self.operation is not acl.operation:
            return False
        return self.permission_type is AclPermissionType.ANY or self.permission_type is acl.permission_type

    def _pattern_matches(self, acl: AclBinding) -> bool:
        wanted = self.pattern_type
        if wanted is PatternType.MATCH:
            if self.resource_name is None:
                return True
            if acl.pattern_type is PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD_RESOURCE)
            return acl.pattern_type is PatternType.PREFIXED and self.resource_name.startswith(
                acl.resource_name
            )
        if wanted is not PatternType.ANY and wanted is not acl.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name


#: ``CreateAclsRequest.AclCreation``'s fields, in :class:`AclBinding` field order.
_CREATION_FIELDS = (
    "resource_type",
    "resource_name",
    "resource_pattern_type",
    "principal",
    "host",
    "operation",
    "permission_type",
)
#: The filter fields of ``DescribeAclsRequest`` and ``DeleteAclsRequest.DeleteAclsFilter``, in
#: :class:`AclBindingFilter` field order.
_FILTER_FIELDS = (
    "resource_type_filter",
    "resource_name_filter",
    "pattern_type_filter",
    "principal_filter",
    "host_filter",
    "operation",
    "permission_type",
)

_E = TypeVar("_E", bound=enum.IntEnum)


def _enum_or_unknown(cls: type[_E], value: int) -> _E:
    try:
        return cls(value)
    except ValueError:
        return cls(0)


def _wire_values(acl: AclBinding | AclBindingFilter) -> tuple[Any, ...]:
    """The seven fields in wire form (enums as their ids), in field order."""
    return (
        int(acl.resource_type),
        acl.resource_name,
        int(acl.pattern_type),
        acl.principal,
        acl.host,
        int(acl.operation),
        int(acl.permission_type),
    )


#: The operations each resource type has (Kafka's ``AclEntry.supportedOperations``): what
#: KIP-430 ``*_authorized_operations`` fields report when no authorizer is configured.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def operations_bitfield(operations: Iterable[AclOperation]) -> int:
    """KIP-430's int32 bitfield of ``operations``: bit ``code`` set for each operation
    (Kafka's ``Utils.to32BitField``); e.g. READ and DESCRIBE -> ``1 << 3 | 1 << 8``."""
    field = 0
    for operation in operations:
        field |= 1 << int(operation)
    return field
