"""``ConnectionSetup``: bring a new broker connection from TCP connected to READY.

The steps Java runs in ``KafkaChannel.prepare`` (transport handshake, then
``SaslClientAuthenticator``) and ``NetworkClient.handleApiVersionsResponse``, driven by
``NetworkClient.poll``: after the TCP connect, SSL and SASL_SSL run a TLS handshake
(``security.protocol``, Java ``ChannelBuilders``; ``client/security/``); every connection then
negotiates ApiVersions (v3 first, stepping down per KIP-511 when the broker answers
UNSUPPORTED_VERSION); SASL_PLAINTEXT and SASL_SSL then run a SASL exchange (SaslHandshake v1 +
SaslAuthenticate). Only then is the connection READY for requests. A refusal (untrusted
certificate, wrong password, mechanism not enabled) fails the connection with an error of
``client.errors.AUTHENTICATION_ERRORS`` (Java's ``AuthenticationException``).
"""

from __future__ import annotations

import logging
import selectors
from collections.abc import Callable
from typing import Any

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.connection import Connection, ConnectionState, InFlightRequest
from spark_kafkalite.client.requests import (
    CLIENT_API_VERSIONS,
    api_versions_request,
    parse_api_versions_response,
)
from spark_kafkalite.client.security.sasl_authenticator import SaslClientAuthenticator
from spark_kafkalite.client.security.security_config import ClientSecurity
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import ErrorCode, KafkaConnectionError, KafkaError, error_for_code
from spark_kafkalite.protocol.framing import encode_request

__all__ = ["ConnectionSetup"]

log = logging.getLogger(__name__)


class ConnectionSetup:
    """Runs the set-up exchange of each connection for a ``NetworkClient`` (same thread).

    Args:
        selector: the client's selector (TLS and writes re-register the socket on it).
        security: ``security.protocol`` with its SSL context and SASL credentials.
        client_id: ``client.id`` written in each request header.
        request_timeout_ms: deadline of each set-up request.
        next_correlation_id: the client's correlation id counter (shared with its requests).
        on_ready: called once ``conn`` is READY (the client flushes its queued requests).
        on_failure: called to fail ``conn`` with an error (the client closes it, backs off and
            fails its requests).
    """

    def __init__(
        self,
        selector: selectors.BaseSelector,
        security: ClientSecurity,
        client_id: str,
        request_timeout_ms: int,
        next_correlation_id: Callable[[], int],
        on_ready: Callable[[Connection], None],
        on_failure: Callable[[Connection, KafkaError], Any],
    ) -> None:
        self._selector = selector
        self._security = security
        self._client_id = client_id
        self._request_timeout_ms = request_timeout_ms
        self._next_correlation_id = next_correlation_id
        self._on_ready = on_ready
        self._on_failure = on_failure

    def on_connected(self, conn: Connection) -> None:
        """TCP is up: start TLS (SSL, SASL_SSL), else negotiate versions (ApiVersions).

        Raises:
            KafkaError: the TLS handshake refused the broker's certificate at once.
            OSError: the socket failed (the caller fails the connection).
        """
        context = self._security.ssl_context
        if context is None:
            self._check_api_versions(conn)
            return
        conn.start_tls(self._selector, context, conn.host)
        if conn.tls_handshake_step(self._selector):
            self._check_api_versions(conn)

    def on_tls_progress(self, conn: Connection) -> None:
        """The socket of ``conn`` (in TLS_HANDSHAKE) is ready: take the next handshake step and
        negotiate versions once TLS is up.

        Raises:
            KafkaError: the handshake refused the broker's certificate.
            OSError / ValueError: the socket failed (the caller fails the connection).
        """
        if conn.tls_handshake_step(self._selector):
            self._check_api_versions(conn)

    def _check_api_versions(self, conn: Connection) -> None:
        conn.state = ConnectionState.CHECKING_API_VERSIONS
        self._send_internal(conn, api_versions_request(CLIENT_API_VERSIONS[ApiKey.API_VERSIONS][1]))

    def _send_internal(self, conn: Connection, entity: Any) -> None:
        """Write a connection set-up request (ApiVersions, SaslHandshake, SaslAuthenticate)."""
        correlation_id = self._next_correlation_id()
        frame = encode_request(entity, correlation_id, self._client_id)
        conn.in_flight.append(
            InFlightRequest(
                correlation_id,
                int(entity.__api_key__),
                int(entity.__version__),
                None,
                now_ms() + self._request_timeout_ms,
                True,
            )
        )
        conn.write(frame, self._selector)

    def handle_response(self, conn: Connection, request: InFlightRequest, frame: memoryview) -> None:
        """Handle the response ``frame`` (header included) to a set-up ``request``: ApiVersions
        (stepping down per KIP-511 on UNSUPPORTED_VERSION), SaslHandshake or SaslAuthenticate;
        sends the next set-up request, or marks ``conn`` ready through ``on_ready``, or fails
        it through ``on_failure`` (an authentication error for a SASL refusal)."""
        if request.api_key == ApiKey.API_VERSIONS:
            self._handle_api_versions(conn, request, frame)
            return
        authenticator = conn.authenticator
        if authenticator is None:  # only ApiVersions and the authenticator send internal requests
            raise RuntimeError(
                f"internal {request.api_key!r} response from node {conn.node_id} without an authenticator"
            )
        try:
            if request.api_key == ApiKey.SASL_HANDSHAKE:
                next_request = authenticator.on_handshake_response(frame)
            else:
                next_request = authenticator.on_authenticate_response(frame)
        except KafkaError as exc:
            self._on_failure(conn, exc)
            return
        if next_request is not None:
            self._send_internal(conn, next_request)
            return
        log.debug("node %s: SASL authentication complete", conn.node_id)
        conn.authenticator = None
        self._on_ready(conn)

    def _handle_api_versions(self, conn: Connection, request: InFlightRequest, frame: memoryview) -> None:
        version = request.api_version
        try:
            error_code, ranges = parse_api_versions_response(frame, version)
        except KafkaError as exc:
            self._on_failure(conn, KafkaConnectionError(f"bad ApiVersions response: {exc}"))
            return
        if error_code == ErrorCode.unsupported_version and version > 0:  # KIP-511: step down
            broker_max = ranges.get(int(ApiKey.API_VERSIONS), (0, 0))[1]
            self._send_internal(conn, api_versions_request(max(0, min(version - 1, broker_max))))
            return
        if error_code != ErrorCode.none:
            self._on_failure(conn, KafkaConnectionError(f"ApiVersions failed: {error_for_code(error_code)}"))
            return
        conn.api_versions = ranges
        log.debug("node %s: ApiVersions v%s done", conn.node_id, version)
        credentials = self._security.sasl
        if credentials is None:
            self._on_ready(conn)
            return
        try:
            conn.authenticator = SaslClientAuthenticator(credentials, conn.node_id, ranges)
        except KafkaError as exc:
            self._on_failure(conn, exc)
            return
        conn.state = ConnectionState.AUTHENTICATING
        self._send_internal(conn, conn.authenticator.handshake_request())
