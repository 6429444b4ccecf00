"""SCRAM credentials by mechanism and user (Kafka's ``CredentialCache``), kept in step with the
cluster metadata (``UserScramCredentialRecord``s) and read by the SCRAM SASL servers."""

from __future__ import annotations

from collections.abc import Iterable

from spark_kafkalite.protocol.scram import ScramCredential, ScramMechanism

__all__ = ["CredentialCache"]


class CredentialCache:
    """``(mechanism name, user) -> ScramCredential``; holds salted keys only, never passwords."""

    def __init__(self) -> None:
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    def get(self, username: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """The credential of ``username`` for ``mechanism``, or None."""
        return self._credentials.get((mechanism.mechanism_name, username))

    def replace_all(self, credentials: Iterable[tuple[str, ScramMechanism, ScramCredential]]) -> None:
        """Replace the whole content with ``(user, mechanism, credential)`` triples."""
        self._credentials = {(m.mechanism_name, user): c for user, m, c in credentials}

    def __len__(self) -> int:
        return len(self._credentials)
