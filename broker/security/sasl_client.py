"""The client side of SASL for this broker's own connections to other brokers (Kafka's
``SaslClientAuthenticator`` as used by inter-broker channels): SaslHandshake v1, then PLAIN
(one ``\\0user\\0password`` token) or SCRAM-SHA-256/512 (client-first, client-final, and the
server signature checked) in SaslAuthenticate v2 requests. The mechanism steps are the pure
ones our client uses too (:mod:`spark_kafkalite.protocol.sasl_client`); this module adds the
requests around them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.sasl_client import SaslClientError as SaslMechanismError
from spark_kafkalite.protocol.sasl_client import create_sasl_client

__all__ = ["SaslClientError", "sasl_client_authenticate"]

Exchange = Callable[[Any], Awaitable[Any]]
"""Sends one kio request on the connection and returns the decoded response."""


class SaslClientError(Exception):
    """The other broker refused the authentication (its message, never our password)."""


async def sasl_client_authenticate(exchange: Exchange, mechanism: str, username: str, password: str) -> None:
    """Authenticate a fresh connection as ``username``.

    Raises:
        SaslClientError: the mechanism is not enabled there (or not supported here), the
            credentials were refused, or the server's token breaks the mechanism (e.g. a wrong
            SCRAM server signature).
    """
    handshake = await exchange(build(request_class(ApiKey.SASL_HANDSHAKE, 1), mechanism=mechanism))
    if handshake.error_code != ErrorCode.none:
        raise SaslClientError(
            f"SaslHandshake for {mechanism} failed: {ErrorCode(handshake.error_code).name.upper()} "
            f"(enabled: {', '.join(handshake.mechanisms)})"
        )
    try:
        client = create_sasl_client(mechanism, username, password)
        token: bytes | None = client.initial_response()
        while token is not None:
            request = build(request_class(ApiKey.SASL_AUTHENTICATE, 2), auth_bytes=token)
            response = await exchange(request)
            if response.error_code != ErrorCode.none:
                raise SaslClientError(
                    f"SaslAuthenticate as {username} with {mechanism}: {response.error_message}"
                )
            token = None if client.is_complete else client.evaluate_challenge(bytes(response.auth_bytes))
    except SaslMechanismError as exc:
        raise SaslClientError(
            f"{mechanism} exchange with the other broker as {username} failed: {exc}"
        ) from None
