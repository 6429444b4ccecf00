"""Client side of the SASL mechanisms (Java ``PlainSaslClient`` and ``ScramSaslClient``), pure
and I/O-free: shared by our client's connections (``client/security/sasl_authenticator.py``) and
the broker's own connections to other brokers (``broker/security/sasl_client.py``).

Each client is one exchange: :meth:`initial_response` gives the first token, then
:meth:`evaluate_challenge` takes each server token and returns the next client token, or None once
:attr:`is_complete`. The SCRAM math and message grammar live in :mod:`.scram`.

Errors: :class:`SaslClientError` (a ``ValueError``) for a server token that breaks the mechanism
(bad grammar, a nonce that does not extend ours, iterations out of range, a wrong server
signature); its text never contains the password.
"""

from __future__ import annotations

from typing import Protocol

from spark_kafkalite.protocol.scram import (
    ClientFirstMessage,
    ScramError,
    ScramFormatter,
    ServerFinalMessage,
    ServerFirstMessage,
    client_final_message,
    scram_mechanism,
)

__all__ = [
    "PLAIN",
    "SUPPORTED_MECHANISMS",
    "PlainSaslClient",
    "SaslClient",
    "SaslClientError",
    "ScramSaslClient",
    "create_sasl_client",
]

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

SCRAM_MAX_ITERATIONS = 1_000_000
"""librdkafka refuses server-first messages above this (``rdkafka_sasl_scram.c``): a hostile
server could otherwise make the client burn CPU in PBKDF2."""


class SaslClientError(ValueError):
    """The server's SASL token breaks the mechanism's rules."""


class SaslClient(Protocol):
    """One client-side SASL exchange (``javax.security.sasl.SaslClient``)."""

    mechanism: str

    @property
    def is_complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None: ...


class PlainSaslClient:
    """RFC 4616 PLAIN: one message ``authzid NUL authcid NUL passwd`` with an empty authzid (as
    Java's ``PlainSaslClient`` and librdkafka send it); complete once sent."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self._sent = False

    @property
    def is_complete(self) -> bool:
        return self._sent

    def initial_response(self) -> bytes:
        self._sent = True
        return b"\x00" + self._username.encode() + b"\x00" + self._password.encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """PLAIN has no challenge; the server's (empty) answer ends the exchange."""
        if not self._sent:
            raise SaslClientError("PLAIN: a server token arrived before the client's message")
        return None

    def __repr__(self) -> str:
        return f"PlainSaslClient(username={self._username!r})"


class ScramSaslClient:
    """RFC 5802 / 7677 SCRAM-SHA-256 and SCRAM-SHA-512 as Kafka's ``ScramSaslClient``:
    client-first (``n,,n=<user>,r=<nonce>``), client-final with the proof after the server-first,
    then the server-final's signature is checked (``v=``; ``e=`` is a failure).

    Args:
        mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        username / password: the credentials (password plain UTF-8, no SASLprep, as Kafka).
        nonce: the client nonce (tests pin it; default a fresh secure random one).
    """

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        scram = scram_mechanism(mechanism)
        if scram is None:
            raise SaslClientError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._formatter = ScramFormatter(scram)
        self._username = username
        self._password = password
        self._nonce = nonce
        self._client_first: ClientFirstMessage | None = None
        self._expected_signature: bytes | None = None
        self._complete = False

    @property
    def is_complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        self._client_first = ClientFirstMessage.build(self._username, self._nonce)
        return self._client_first.to_bytes()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """server-first -> client-final; server-final -> None (signature verified).

        Raises:
            SaslClientError: a malformed or unexpected token, iterations outside
                4096..1000000, a nonce that does not extend ours, or a wrong server signature.
        """
        if self._complete or self._client_first is None:
            raise SaslClientError(f"{self.mechanism}: unexpected server token")
        try:
            if self._expected_signature is None:
                server_first = ServerFirstMessage.parse(challenge)
                if server_first.iterations > SCRAM_MAX_ITERATIONS:
                    raise SaslClientError(
                        f"{self.mechanism}: server asked for {server_first.iterations} iterations "
                        f"(at most {SCRAM_MAX_ITERATIONS})"
                    )
                final, self._expected_signature = client_final_message(
                    self._formatter, self._password, self._client_first, server_first
                )
                return final.to_bytes()
            server_final = ServerFinalMessage.parse(challenge)
        except ScramError as exc:
            raise SaslClientError(f"{self.mechanism}: {exc}") from None
        if server_final.error is not None:
            raise SaslClientError(f"{self.mechanism}: server error {server_final.error!r}")
        if server_final.server_signature != self._expected_signature:
            raise SaslClientError(f"{self.mechanism}: invalid server signature in the server final message")
        self._complete = True
        return None

    def __repr__(self) -> str:
        return f"ScramSaslClient({self.mechanism}, username={self._username!r})"


def create_sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A fresh client for one exchange with ``mechanism`` (one of :data:`SUPPORTED_MECHANISMS`).

    Raises:
        SaslClientError: an unsupported mechanism.
    """
    if mechanism == PLAIN:
        return PlainSaslClient(username, password)
    if scram_mechanism(mechanism) is not None:
        return ScramSaslClient(mechanism, username, password)
    raise SaslClientError(
        f"SASL mechanism {mechanism} is not supported: use {', '.join(SUPPORTED_MECHANISMS)}"
    )
