"""ACL changes as the controller computes them (Kafka's ``AclControlManager``), pure functions.

:func:`create_acls` validates each new ACL (``AclControlManager.validateNewAcl`` plus the
broker-side checks of ``AclApis.handleCreateAcls``) and turns the valid, not yet present ones
into ``AccessControlEntryRecord`` s; :func:`delete_acls` turns each filter's matches into
``RemoveAccessControlEntryRecord`` s. Both take the ACL ids from the caller, so every Raft node
computes the same records.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from broker.controller.metadata_image import (
    AccessControlEntryRecord,
    MetadataImage,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from spark_kafkalite.protocol.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from spark_kafkalite.protocol.errors import InvalidRequestError, KafkaError

__all__ = ["validate_new_acl", "create_acls", "delete_acls", "AclDeleteResult"]

#: Per filter: the error (None = success) and the ACLs it deleted.
AclDeleteResult = tuple[KafkaError | None, list[AclBinding]]


def validate_new_acl(acl: AclBinding) -> KafkaError | None:
    """INVALID_REQUEST (naming the field) for an ACL Kafka refuses to create, else None."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return InvalidRequestError(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return InvalidRequestError(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return InvalidRequestError(f"Invalid operation {acl.operation.name}")
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return InvalidRequestError(f"Invalid permissionType {acl.permission_type.name}")
    if not acl.resource_name:
        return InvalidRequestError("Resource name should not be empty")
    if acl.resource_type is ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return InvalidRequestError(f"Could not parse principal {acl.principal!r}: expected <type>:<name>")
    if not acl.host:
        return InvalidRequestError("Host should not be empty (use * for every host)")
    return None


def create_acls(
    image: MetadataImage, acls: Sequence[AclBinding], acl_ids: Sequence[uuid.UUID]
) -> tuple[list[MetadataRecord], list[KafkaError | None]]:
    """Records adding ``acls`` (``acl_ids[i]`` for ``acls[i]``) and one error (or None) per ACL.
    An ACL equal to an existing one (or to an earlier one of the request) succeeds without a
    record, as in Kafka."""
    present = set(image.acls.values())
    records: list[MetadataRecord] = []
    results: list[KafkaError | None] = []
    for acl, acl_id in zip(acls, acl_ids, strict=True):
        error = validate_new_acl(acl)
        results.append(error)
        if error is None and acl not in present:
            present.add(acl)
            records.append(AccessControlEntryRecord(acl_id, acl))
    return records, results


def delete_acls(
    image: MetadataImage, filters: Sequence[AclBindingFilter]
) -> tuple[list[MetadataRecord], list[AclDeleteResult]]:
    """Records removing every ACL a filter matches, and per filter its error (INVALID_REQUEST
    for a filter with an UNKNOWN field) and the ACLs it deleted; an ACL matched by several
    filters is deleted (and reported) once, by the first."""
    removed: set[uuid.UUID] = set()
    records: list[MetadataRecord] = []
    results: list[AclDeleteResult] = []
    for acl_filter in filters:
        unknown = acl_filter.unknown_field()
        if unknown is not None:
            results.append((InvalidRequestError(f"The filter has an UNKNOWN {unknown}"), []))
            continue
        deleted: list[AclBinding] = []
        for acl_id, acl in image.acls.items():
            if acl_id not in removed and acl_filter.matches(acl):
                removed.add(acl_id)
                deleted.append(acl)
                records.append(RemoveAccessControlEntryRecord(acl_id))
        results.append((None, deleted))
    return records, results
