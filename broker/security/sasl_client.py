"""The client side of SASL for this broker's own connections to other brokers (Kafka's
``SaslClientAuthenticator`` as used by inter-broker channels): SaslHandshake v1, then PLAIN
(one ``\\0user\\0password`` token) or SCRAM-SHA-256/512 (client-first, client-final, and the
server signature checked) in SaslAuthenticate v2 requests. The SCRAM math and messages are the
shared ones of :mod:`spark_kafkalite.protocol.scram`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.scram import (
    ClientFirstMessage,
    ScramError,
    ScramFormatter,
    ServerFinalMessage,
    ServerFirstMessage,
    client_final_message,
    scram_mechanism,
)

__all__ = ["SaslClientError", "sasl_client_authenticate"]

Exchange = Callable[[Any], Awaitable[Any]]
"""Sends one kio request on the connection and returns the decoded response."""


class SaslClientError(Exception):
    """The other broker refused the authentication (its message, never our password)."""


async def sasl_client_authenticate(exchange: Exchange, mechanism: str, username: str, password: str) -> None:
    """Authenticate a fresh connection as ``username``.

    Raises:
        SaslClientError: the mechanism is not enabled there, the credentials were refused, or
            the server's SCRAM signature is wrong.
    """
    handshake = await exchange(build(request_class(ApiKey.SASL_HANDSHAKE, 1), mechanism=mechanism))
    if handshake.error_code != ErrorCode.none:
        raise SaslClientError(
            f"SaslHandshake for {mechanism} failed: {ErrorCode(handshake.error_code).name.upper()} "
            f"(enabled: {', '.join(handshake.mechanisms)})"
        )

    async def authenticate(token: bytes) -> bytes:
        response = await exchange(build(request_class(ApiKey.SASL_AUTHENTICATE, 2), auth_bytes=token))
        if response.error_code != ErrorCode.none:
            raise SaslClientError(
                f"SaslAuthenticate as {username} with {mechanism}: {response.error_message}"
            )
        return bytes(response.auth_bytes)

    scram = scram_mechanism(mechanism)
    if scram is None:  # PLAIN (RFC 4616), empty authzid
        await authenticate(b"\0" + username.encode() + b"\0" + password.encode())
        return
    try:
        first = ClientFirstMessage.build(username)
        server_first = ServerFirstMessage.parse(await authenticate(first.to_bytes()))
        final, expected = client_final_message(ScramFormatter(scram), password, first, server_first)
        server_final = ServerFinalMessage.parse(await authenticate(final.to_bytes()))
    except ScramError as exc:
        raise SaslClientError(f"SCRAM exchange with the other broker failed: {exc}") from None
    if server_final.server_signature != expected:
        raise SaslClientError("invalid SCRAM server signature: the other broker does not know our credential")
