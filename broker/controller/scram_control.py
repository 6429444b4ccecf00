"""SCRAM credential changes and queries on the metadata image (Kafka's ``ScramControlManager``
and ``ScramImage.describe``, KIP-554), as pure functions so every Raft node computes the same
records.

AlterUserScramCredentials: the client sends SaltedPassword = Hi(password, salt, iterations);
the controller stores salt, StoredKey, ServerKey and iterations (never the salted password).
Per-user errors: UNSUPPORTED_SASL_MECHANISM (unknown mechanism), UNACCEPTABLE_CREDENTIAL (empty
name, iterations outside 4096..16384, empty salt or salted password), RESOURCE_NOT_FOUND
(deleting a credential that does not exist), DUPLICATE_RESOURCE (a user altered twice in one
request: that user's changes are all dropped).
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from broker.controller.metadata_image import (
    MetadataImage,
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.scram import (
    ScramCredential,
    ScramFormatter,
    ScramMechanism,
    scram_mechanism,
    scram_mechanism_for_type,
)

__all__ = [
    "ScramDeletion",
    "ScramUpsertion",
    "AlterResult",
    "DescribeResult",
    "alter_user_scram_credentials",
    "describe_user_scram_credentials",
    "parse_add_scram",
    "scram_credential",
]


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    """Remove ``name``'s credential for mechanism type ``mechanism``."""

    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    """Set ``name``'s credential for ``mechanism`` from a salted password."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # the salted password is a password equivalent
        return f"ScramUpsertion(name={self.name!r}, mechanism={self.mechanism}, iterations={self.iterations})"


AlterResult = tuple[str, ErrorCode, str | None]
"""(user, error code, error message)."""

DescribeResult = tuple[str, ErrorCode, str | None, tuple[tuple[int, int], ...]]
"""(user, error code, error message, ((mechanism, iterations), ...))."""

_DUPLICATE = "A user credential cannot be altered twice in the same request"


def _validate_deletion(image: MetadataImage, deletion: ScramDeletion) -> tuple[ErrorCode, str] | None:
    if scram_mechanism_for_type(deletion.mechanism) is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism."
    if (deletion.name, deletion.mechanism) not in image.scram_credentials:
        return ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"
    return None


def _validate_upsertion(upsertion: ScramUpsertion) -> tuple[ErrorCode, str] | None:
    mechanism = scram_mechanism_for_type(upsertion.mechanism)
    if mechanism is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism."
    if not upsertion.name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if upsertion.iterations < mechanism.min_iterations:
        return ErrorCode.unacceptable_credential, f"Too few iterations (minimum {mechanism.min_iterations})"
    if upsertion.iterations > mechanism.max_iterations:
        return ErrorCode.unacceptable_credential, f"Too many iterations (maximum {mechanism.max_iterations})"
    if not upsertion.salt or not upsertion.salted_password:
        return ErrorCode.unacceptable_credential, "Salt and salted password must not be empty"
    return None


def alter_user_scram_credentials(
    image: MetadataImage, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
) -> tuple[list[MetadataRecord], list[AlterResult]]:
    """Records for the valid changes and one result per user, in first-mentioned order
    (``ScramControlManager.alterCredentials``)."""
    errors: dict[str, tuple[ErrorCode, str]] = {}
    to_delete: dict[str, ScramDeletion] = {}
    to_upsert: dict[str, ScramUpsertion] = {}
    order: dict[str, None] = {}
    for deletion in deletions:
        order[deletion.name] = None
        if deletion.name in errors:
            continue
        if to_delete.pop(deletion.name, None) is not None:
            errors[deletion.name] = (ErrorCode.duplicate_resource, _DUPLICATE)
        elif (problem := _validate_deletion(image, deletion)) is not None:
            errors[deletion.name] = problem
        else:
            to_delete[deletion.name] = deletion
    for upsertion in upsertions:
        order[upsertion.name] = None
        if upsertion.name in errors:
            continue
        if to_delete.pop(upsertion.name, None) is not None or to_upsert.pop(upsertion.name, None) is not None:
            errors[upsertion.name] = (ErrorCode.duplicate_resource, _DUPLICATE)
        elif (problem := _validate_upsertion(upsertion)) is not None:
            errors[upsertion.name] = problem
        else:
            to_upsert[upsertion.name] = upsertion
    records: list[MetadataRecord] = [
        RemoveUserScramCredentialRecord(d.name, d.mechanism) for d in to_delete.values()
    ]
    for upsertion in to_upsert.values():
        mechanism = scram_mechanism_for_type(upsertion.mechanism)
        if mechanism is None:  # _validate_upsertion rejected unknown mechanisms
            raise RuntimeError(f"user {upsertion.name}: unknown SCRAM mechanism {upsertion.mechanism}")
        credential = ScramFormatter(mechanism).credential_from_salted_password(
            upsertion.salt, upsertion.salted_password, upsertion.iterations
        )
        records.append(UserScramCredentialRecord(upsertion.name, upsertion.mechanism, credential))
    results: list[AlterResult] = []
    for name in order:
        code, message = errors.get(name, (ErrorCode.none, None))
        results.append((name, code, message))
    return records, results


def describe_user_scram_credentials(
    image: MetadataImage, users: Sequence[str] | None
) -> list[DescribeResult]:
    """Per user its (mechanism, iterations) list (``ScramImage.describe``): every user with a
    credential when ``users`` is None or empty; RESOURCE_NOT_FOUND for a user without one,
    DUPLICATE_RESOURCE for a user asked twice."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (name, mechanism), credential in sorted(image.scram_credentials.items()):
        by_user.setdefault(name, []).append((mechanism, credential.iterations))
    if not users:
        return [(name, ErrorCode.none, None, tuple(infos)) for name, infos in by_user.items()]
    counts: dict[str, int] = {}
    for name in users:
        counts[name] = counts.get(name, 0) + 1
    results: list[DescribeResult] = []
    for name in counts:
        if counts[name] > 1:
            message = "Cannot describe SCRAM credentials for the same user twice in a single request"
            results.append((name, ErrorCode.duplicate_resource, message, ()))
        elif name not in by_user:
            message = f"Attempt to describe a user credential that does not exist: {name}"
            results.append((name, ErrorCode.resource_not_found, message, ()))
        else:
            results.append((name, ErrorCode.none, None, tuple(by_user[name])))
    return results


def scram_credential(
    image: MetadataImage, username: str, mechanism: ScramMechanism
) -> ScramCredential | None:
    """The stored credential of ``username`` for ``mechanism`` (what the SCRAM server looks up)."""
    return image.scram_credentials.get((username, mechanism.type_id))


_ADD_SCRAM = re.compile(r"^(?P<mechanism>[A-Z0-9-]+)=\[(?P<body>.*)\]$", re.DOTALL)


def parse_add_scram(text: str, *, default_iterations: int = 4096) -> ScramUpsertion:
    """Parse Kafka's ``kafka-storage format --add-scram`` value (KIP-900), e.g.
    ``SCRAM-SHA-512=[name=alice,password=alice-secret]`` with optional ``iterations=8192`` and
    ``salt=<base64>``; values may be double-quoted. The salted password is computed here.

    Raises:
        ValueError: unknown mechanism, missing name or password, bad iterations or salt (the
            message never contains the password).
    """
    match = _ADD_SCRAM.match(text.strip())
    if match is None:
        raise ValueError("expected MECHANISM=[name=<user>,password=<password>]")
    mechanism = scram_mechanism(match.group("mechanism"))
    if mechanism is None:
        raise ValueError(f"unknown SCRAM mechanism {match.group('mechanism')!r}")
    fields: dict[str, str] = {}
    for item in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,]*)', match.group("body")):
        key, value = item
        fields[key] = value[1:-1].replace('\\"', '"') if value.startswith('"') else value
    unknown = set(fields) - {"name", "password", "iterations", "salt"}
    if unknown:
        raise ValueError(f"unknown --add-scram fields {sorted(unknown)}")
    if not fields.get("name") or not fields.get("password"):
        raise ValueError("--add-scram needs name= and password=")
    try:
        iterations = int(fields.get("iterations", default_iterations))
        salt = (
            base64.b64decode(fields["salt"], validate=True) if "salt" in fields else secrets.token_bytes(32)
        )
    except (ValueError, binascii.Error):
        raise ValueError("invalid iterations or salt in --add-scram") from None
    salted = ScramFormatter(mechanism).salted_password(fields["password"], salt, max(iterations, 1))
    return ScramUpsertion(fields["name"], mechanism.type_id, iterations, salt, salted)
