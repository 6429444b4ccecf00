"""SCRAM credential administration for ``KafkaAdminClient`` (KIP-554; Java
``Admin.alterUserScramCredentials`` / ``describeUserScramCredentials``): AlterUserScramCredentials
(51) and DescribeUserScramCredentials (50), v0 (Kafka 4.0's range), sent to the least loaded
broker as Java's admin does.

An upsertion carries no password: the client draws a random salt and sends
SaltedPassword = Hi(password, salt, iterations) (``protocol/scram.py``), from which the
controller derives the stored and server keys (``ScramControlManager``). Iterations are
4096..16384 (``ScramMechanism``); Java's default for an upsertion is 4096.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode, InvalidRequestError, error_for_code
from spark_kafkalite.protocol.scram import (
    ScramFormatter,
    ScramMechanism,
    scram_mechanism,
    scram_mechanism_for_type,
)

__all__ = [
    "AdminScram",
    "ScramCredentialInfo",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
]


#: ``send(builder, node_id, timeout_ms) -> response`` (``KafkaAdminClient._send_any``).
Send = Callable[[RequestBuilder, "int | None", "float | None"], Any]


@dataclass(frozen=True)
class ScramCredentialInfo:
    """A mechanism (``SCRAM-SHA-256`` / ``SCRAM-SHA-512``) and its iteration count."""

    mechanism: str
    iterations: int = 4096


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Create or replace ``user``'s credential for a mechanism (``repr`` shows no password)."""

    user: str
    info: ScramCredentialInfo
    password: str = field(repr=False)


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    """Delete ``user``'s credential for ``mechanism``."""

    user: str
    mechanism: str


def _mechanism(name: str) -> ScramMechanism:
    scram = scram_mechanism(name.upper())
    if scram is None:
        raise InvalidRequestError(f"unknown SCRAM mechanism {name!r}: use SCRAM-SHA-256 or SCRAM-SHA-512")
    return scram


class AdminScram:
    """The SCRAM calls of the admin client.

    Args:
        send: sends a request to a node (None: the least loaded one) and returns the response,
            retrying connection errors until the timeout.
    """

    def __init__(self, send: Send) -> None:
        self._send = send

    def alter_user_scram_credentials(
        self,
        alterations: Iterable[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        timeout_ms: float | None = None,
    ) -> None:
        """Apply ``alterations`` (all in one request).

        Raises:
            InvalidRequestError: an unknown mechanism (before sending).
            UnacceptableCredentialError / ResourceNotFoundError / DuplicateResourceError /
            UnsupportedSaslMechanismError / ClusterAuthorizationFailedError: the first user the
            broker refused (the message names the user).
            KafkaTimeoutError: no answer in time.
        """
        upsertions: list[tuple[str, int, int, bytes, bytes]] = []
        deletions: list[tuple[str, int]] = []
        for alteration in alterations:
            if isinstance(alteration, UserScramCredentialUpsertion):
                scram = _mechanism(alteration.info.mechanism)
                salt = secrets.token_bytes(32)
                salted = ScramFormatter(scram).salted_password(
                    alteration.password, salt, alteration.info.iterations
                )
                upsertions.append((alteration.user, scram.type_id, alteration.info.iterations, salt, salted))
            else:
                deletions.append((alteration.user, _mechanism(alteration.mechanism).type_id))
        if not upsertions and not deletions:
            return

        def build(version: int) -> Any:
            cls = request_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, version)
            upsert_cls = nested(cls, "ScramCredentialUpsertion")
            delete_cls = nested(cls, "ScramCredentialDeletion")
            return make(
                cls,
                deletions=tuple(delete_cls(name=n, mechanism=m) for n, m in deletions),
                upsertions=tuple(
                    upsert_cls(name=n, mechanism=m, iterations=i, salt=s, salted_password=p)
                    for n, m, i, s, p in upsertions
                ),
            )

        response = self._send(RequestBuilder(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, build), None, timeout_ms)
        for result in response.results:
            if int(result.error_code) != ErrorCode.none:
                detail = f": {result.error_message}" if result.error_message else ""
                raise error_for_code(int(result.error_code), f"user {result.user}{detail}")

    def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None, timeout_ms: float | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """``{user: [ScramCredentialInfo, ...]}`` for ``users`` (None: every user with one).

        Raises:
            ResourceNotFoundError: a named user has no credential.
            ClusterAuthorizationFailedError: no DESCRIBE permission on the cluster.
            KafkaTimeoutError: no answer in time.
        """
        names = None if users is None else sorted(set(users))

        def build(version: int) -> Any:
            cls = request_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, version)
            if names is None:
                return make(cls, users=None)
            return make(cls, users=tuple(nested(cls, "UserName")(name=n) for n in names))

        response = self._send(RequestBuilder(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, build), None, timeout_ms)
        if int(response.error_code) != ErrorCode.none:
            raise error_for_code(int(response.error_code), response.error_message)
        out: dict[str, list[ScramCredentialInfo]] = {}
        for result in response.results:
            if int(result.error_code) != ErrorCode.none:
                detail = f": {result.error_message}" if result.error_message else ""
                raise error_for_code(int(result.error_code), f"user {result.user}{detail}")
            out[str(result.user)] = [
                ScramCredentialInfo(_mechanism_name(int(c.mechanism)), int(c.iterations))
                for c in result.credential_infos
            ]
        return out


def _mechanism_name(type_id: int) -> str:
    scram = scram_mechanism_for_type(type_id)
    return scram.mechanism_name if scram is not None else f"UNKNOWN({type_id})"
