"""The SASL state machine of one connection before it is authenticated (Kafka's
``SaslServerAuthenticator``).

States: HANDSHAKE_OR_VERSIONS (ApiVersions, once, or SaslHandshake) -> HANDSHAKE (SaslHandshake)
-> AUTHENTICATE (SaslAuthenticate v0-2 frames after a v1 handshake; raw length-prefixed tokens
after a v0 handshake) -> COMPLETE, or FAILED.

- Any other request before authentication closes the connection with no response, except
  during SaslAuthenticate (after a v1 handshake): that request is first answered with its API's
  error response carrying ILLEGAL_SASL_STATE, as Kafka's ``handleSaslToken`` does.
- An unknown mechanism: SaslHandshake answers UNSUPPORTED_SASL_MECHANISM with the enabled list,
  then the connection is closed.
- Bad credentials: SaslAuthenticate answers SASL_AUTHENTICATION_FAILED with the mechanism's
  message, then the connection is closed (the socket server delays both by
  ``connection.failed.authentication.delay.ms``); after a v0 handshake the connection is just
  closed (that protocol has no error frame).
- SessionLifetimeMs is 0: re-authentication (KIP-368) is not offered.
The frame size bound before authentication (``sasl.server.max.receive.size``) is enforced by the
socket server, which reads the frames.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.security.principal import sasl_principal
from broker.security.sasl_server import (
    CredentialLookup,
    PlainSaslServer,
    SaslAuthenticationError,
    SaslServer,
    ScramSaslServer,
)
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import build
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError
from spark_kafkalite.protocol.framing import (
    SIZE_PREFIX,
    RequestHeaderInfo,
    decode_request_body,
    decode_request_header,
    encode_response,
)
from spark_kafkalite.protocol.scram import scram_mechanism

__all__ = ["SaslServerAuthenticator", "SaslReply", "SaslAuthenticationFailed", "IllegalSaslState"]

logger = logging.getLogger(__name__)

_HANDSHAKE_VERSIONS = (0, 1)
_AUTHENTICATE_VERSIONS = (0, 1, 2)


class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = 1
    HANDSHAKE = 2
    AUTHENTICATE = 3  # SaslAuthenticate requests (after a v1 handshake)
    AUTHENTICATE_RAW = 4  # raw tokens (after a v0 handshake)
    COMPLETE = 5
    FAILED = 6


@dataclass(frozen=True, slots=True)
class SaslReply:
    """What the socket server does with one pre-authentication frame.

    Attributes:
        response: a full response frame to write (size prefix included), or None.
        delegate: the header and body offset of an ApiVersions request the socket server passes
            to the normal request handler instead, or None.
    """

    response: bytes | None = None
    delegate: tuple[RequestHeaderInfo, int] | None = None


class SaslAuthenticationFailed(Exception):
    """Authentication failed: write ``response`` (if any), wait
    ``connection.failed.authentication.delay.ms``, close. ``str(exc)`` is loggable."""

    def __init__(self, message: str, response: bytes | None) -> None:
        super().__init__(message)
        self.response = response


class IllegalSaslState(Exception):
    """A request that is not allowed at this point: close the connection. ``request`` is the
    (header, body offset) of a request of another API sent during SaslAuthenticate, which is
    first answered with that API's error response carrying ILLEGAL_SASL_STATE; None: close
    without a response."""

    def __init__(self, message: str, request: tuple[RequestHeaderInfo, int] | None = None) -> None:
        super().__init__(message)
        self.request = request


class SaslServerAuthenticator:
    """One connection's SASL authentication.

    Args:
        mechanisms: enabled mechanisms of the listener (``sasl.enabled.mechanisms``).
        plain_users: PLAIN accounts (user -> password).
        credentials: SCRAM credential lookup.
    """

    def __init__(
        self, mechanisms: tuple[str, ...], plain_users: Mapping[str, str], credentials: CredentialLookup
    ) -> None:
        self._mechanisms = mechanisms
        self._plain_users = plain_users
        self._credentials = credentials
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._server: SaslServer | None = None
        self.principal: str | None = None

    @property
    def complete(self) -> bool:
        """True once the client authenticated (``principal`` is then set)."""
        return self._state is _State.COMPLETE

    def receive(self, frame: bytes | bytearray) -> SaslReply:
        """Handle one frame (without its size prefix).

        Raises:
            SaslAuthenticationFailed: answer (maybe), delay, close.
            IllegalSaslState: close now.
        """
        if self._state is _State.AUTHENTICATE_RAW:
            return self._raw_token(frame)
        try:
            header, body_offset = decode_request_header(frame)
        except KafkaError as exc:
            self._state = _State.FAILED
            raise IllegalSaslState(f"invalid request header before authentication: {exc}") from None
        api_key = header.api_key
        if api_key == ApiKey.API_VERSIONS and self._state is _State.HANDSHAKE_OR_VERSIONS:
            self._state = _State.HANDSHAKE
            return SaslReply(delegate=(header, body_offset))
        if api_key == ApiKey.SASL_HANDSHAKE and self._state in (
            _State.HANDSHAKE_OR_VERSIONS,
            _State.HANDSHAKE,
        ):
            return self._handshake(header, frame, body_offset)
        if api_key == ApiKey.SASL_AUTHENTICATE and self._state is _State.AUTHENTICATE:
            return self._authenticate(header, frame, body_offset)
        state, self._state = self._state, _State.FAILED
        answer = (header, body_offset) if state is _State.AUTHENTICATE else None
        raise IllegalSaslState(f"unexpected request (api key {api_key}) in SASL state {state.name}", answer)

    def _decode(
        self, header: RequestHeaderInfo, frame: bytes | bytearray, body_offset: int, versions: tuple[int, ...]
    ) -> Any:
        if header.api_version not in versions:
            self._state = _State.FAILED
            raise IllegalSaslState(f"unsupported version {header.api_version} of api key {header.api_key}")
        try:
            return decode_request_body(header.api_key, header.api_version, frame, body_offset)
        except KafkaError as exc:
            self._state = _State.FAILED
            raise IllegalSaslState(f"malformed SASL request: {exc}") from None

    def _handshake(self, header: RequestHeaderInfo, frame: bytes | bytearray, body_offset: int) -> SaslReply:
        request = self._decode(header, frame, body_offset, _HANDSHAKE_VERSIONS)
        cls = response_class(ApiKey.SASL_HANDSHAKE, header.api_version)
        mechanism = request.mechanism
        if mechanism not in self._mechanisms:
            self._state = _State.FAILED
            response = build(
                cls, error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=self._mechanisms
            )
            raise SaslAuthenticationFailed(
                f"unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(self._mechanisms)})",
                encode_response(response, header.correlation_id),
            )
        scram = scram_mechanism(mechanism)
        if scram is not None:
            self._server = ScramSaslServer(scram, self._credentials)
        else:
            self._server = PlainSaslServer(self._plain_users)
        self._state = _State.AUTHENTICATE if header.api_version >= 1 else _State.AUTHENTICATE_RAW
        response = build(cls, error_code=ErrorCode.none, mechanisms=self._mechanisms)
        return SaslReply(encode_response(response, header.correlation_id))

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        if server is None:  # the handshake creates it; the state machine admits no token before
            raise RuntimeError("SASL token evaluated before the handshake chose a mechanism")
        challenge = server.evaluate_response(token)
        if server.complete:
            self.principal = sasl_principal(server.authorization_id)
            self._state = _State.COMPLETE
        return challenge

    def _authenticate(
        self, header: RequestHeaderInfo, frame: bytes | bytearray, body_offset: int
    ) -> SaslReply:
        request = self._decode(header, frame, body_offset, _AUTHENTICATE_VERSIONS)
        cls = response_class(ApiKey.SASL_AUTHENTICATE, header.api_version)
        try:
            challenge = self._evaluate(bytes(request.auth_bytes))
        except SaslAuthenticationError as exc:
            self._state = _State.FAILED
            response = build(
                cls, error_code=ErrorCode.sasl_authentication_failed, error_message=str(exc), auth_bytes=b""
            )
            raise SaslAuthenticationFailed(
                str(exc), encode_response(response, header.correlation_id)
            ) from None
        response = build(cls, error_code=ErrorCode.none, error_message=None, auth_bytes=challenge)
        return SaslReply(encode_response(response, header.correlation_id))

    def _raw_token(self, frame: bytes | bytearray) -> SaslReply:
        try:
            challenge = self._evaluate(bytes(frame))
        except SaslAuthenticationError as exc:
            self._state = _State.FAILED
            raise SaslAuthenticationFailed(str(exc), None) from None
        return SaslReply(SIZE_PREFIX.pack(len(challenge)) + challenge)
