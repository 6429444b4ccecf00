"""SASL server mechanisms (Kafka's ``PlainSaslServer`` and ``ScramSaslServer``).

A mechanism server takes the client's tokens one by one (:meth:`evaluate_response`) and returns
the server's tokens until :attr:`complete`; then :attr:`authorization_id` is the user name.
Failures raise :class:`SaslAuthenticationError` whose message is what the client is told: a
generic text for bad credentials (user existence does not leak), as Kafka does.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Protocol

from spark_kafkalite.protocol.scram import (
    ClientFinalMessage,
    ClientFirstMessage,
    ScramCredential,
    ScramError,
    ScramFormatter,
    ScramMechanism,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    secure_random_nonce,
)

__all__ = ["SaslAuthenticationError", "SaslServer", "PlainSaslServer", "ScramSaslServer", "CredentialLookup"]

CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]
"""``lookup(username, mechanism)`` -> the stored SCRAM credential or None."""


class SaslAuthenticationError(Exception):
    """Authentication failed; ``str(exc)`` is the message sent to the client (no secrets)."""


class SaslServer(Protocol):
    """What the authenticator needs from a mechanism."""

    mechanism_name: str

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    def evaluate_response(self, response: bytes) -> bytes: ...


class PlainSaslServer:
    """RFC 4616 PLAIN: one message ``[authzid] NUL authcid NUL passwd`` (UTF-8), checked against
    the JAAS ``user_<name>`` accounts (``PlainSaslServer`` + ``PlainServerCallbackHandler``).

    Args:
        users: user name -> password.
    """

    mechanism_name = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("authentication has not completed")
        return self._authorization_id

    def evaluate_response(self, response: bytes) -> bytes:
        """Check the one PLAIN message; returns b"" (nothing more to send).

        Raises:
            SaslAuthenticationError: malformed message (not 3 NUL-separated UTF-8 tokens, empty
                user or password), authzid other than the user, or wrong user/password.
        """
        if self.complete:
            raise SaslAuthenticationError("PLAIN authentication has already completed")
        try:
            tokens = bytes(response).decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}"
            )
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self._users.get(username)
        # compare even for unknown users so timing does not tell which users exist
        matches = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        self._authorization_id = username
        return b""


class ScramSaslServer:
    """SCRAM-SHA-256/512 server (``ScramSaslServer``): client-first -> server-first,
    client-final -> server-final.

    Checks: the client-first grammar (gs2 ``n`` only), the ``tokenauth`` extension refused
    (no delegation tokens here), authzid equal to the user if given, the stored iterations at
    least the mechanism minimum (4096), the client-final nonce equal to the server-first nonce,
    the channel binding equal to the gs2 header, and the proof (constant time). Any failure is
    the generic "invalid credentials" message except the authzid one, as in Kafka.

    Args:
        mechanism: SCRAM_SHA_256 or SCRAM_SHA_512.
        lookup: the credential store.
    """

    def __init__(self, mechanism: ScramMechanism, lookup: CredentialLookup) -> None:
        self.mechanism_name = mechanism.mechanism_name
        self._mechanism = mechanism
        self._formatter = ScramFormatter(mechanism)
        self._lookup = lookup
        self._client_first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None
        self._authorization_id: str | None = None
        self._failed = False

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("authentication has not completed")
        return self._authorization_id

    def _generic_failure(self) -> SaslAuthenticationError:
        return SaslAuthenticationError(
            f"Authentication failed during authentication due to invalid credentials with SASL mechanism {self.mechanism_name}"
        )

    def evaluate_response(self, response: bytes) -> bytes:
        """One step of the exchange.

        Raises:
            SaslAuthenticationError: any failure (then the server is finished).
        """
        if self._failed or self.complete:
            raise SaslAuthenticationError(
                f"Unexpected SASL/{self.mechanism_name} message after the exchange ended"
            )
        try:
            if self._client_first is None:
                return self._first(response)
            return self._final(response)
        except SaslAuthenticationError:
            self._failed = True
            self._credential = None
            raise

    def _first(self, response: bytes) -> bytes:
        try:
            client_first = ClientFirstMessage.parse(response)
        except ScramError:
            raise self._generic_failure() from None
        if client_first.extensions.get("tokenauth", "").lower() == "true":
            raise SaslAuthenticationError(
                "Authentication failed: delegation tokens (tokenauth) are not supported"
            )
        if client_first.authorization_id and client_first.authorization_id != client_first.username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        credential = self._lookup(client_first.username, self._mechanism)
        if credential is None or credential.iterations < self._mechanism.min_iterations:
            raise self._generic_failure()
        self._client_first, self._credential = client_first, credential
        self._server_first = ServerFirstMessage.build(
            client_first.nonce, secure_random_nonce(), credential.salt, credential.iterations
        )
        return self._server_first.to_bytes()

    def _final(self, response: bytes) -> bytes:
        client_first, server_first, credential = self._client_first, self._server_first, self._credential
        if client_first is None or server_first is None or credential is None:  # set by _first
            raise RuntimeError(f"SASL/{self.mechanism_name} final message before the first")
        try:
            client_final = ClientFinalMessage.parse(response)
        except ScramError:
            raise self._generic_failure() from None
        if client_final.nonce != server_first.nonce:
            raise self._generic_failure()
        if client_final.channel_binding != client_first.gs2_header.encode():
            raise self._generic_failure()
        message = auth_message(client_first.bare, server_first.text, client_final.without_proof)
        if not self._formatter.verify_client_proof(credential.stored_key, message, client_final.proof):
            raise self._generic_failure()
        signature = self._formatter.server_signature(credential.server_key, message)
        self._authorization_id = client_first.username
        self._credential = None
        return ServerFinalMessage(signature).to_bytes()
