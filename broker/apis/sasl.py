"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2) once a connection is past
authentication, or on a listener without SASL: both answer ILLEGAL_SASL_STATE
(``KafkaApis.handleSaslHandshakeRequest`` / ``handleSaslAuthenticateRequest``). The real
exchange happens before a request reaches ``KafkaApis``, in
:class:`~broker.security.sasl_server_authenticator.SaslServerAuthenticator`; these table entries
make ApiVersions advertise the versions that authenticator serves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.apis.context import BrokerContext
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import build
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.apis.kio_types import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

__all__ = [
    "handle_sasl_handshake",
    "sasl_handshake_error_response",
    "handle_sasl_authenticate",
    "sasl_authenticate_error_response",
]


async def handle_sasl_handshake(
    ctx: BrokerContext, rctx: RequestContext, request: SaslHandshakeRequest
) -> SaslHandshakeResponse:
    """ILLEGAL_SASL_STATE (no mechanisms): no SASL exchange is possible on this connection now."""
    return sasl_handshake_error_response(request, rctx.api_version, ErrorCode.illegal_sasl_state)


def sasl_handshake_error_response(
    request: SaslHandshakeRequest, version: int, code: ErrorCode
) -> SaslHandshakeResponse:
    return build(response_class(ApiKey.SASL_HANDSHAKE, version), error_code=code, mechanisms=())


async def handle_sasl_authenticate(
    ctx: BrokerContext, rctx: RequestContext, request: SaslAuthenticateRequest
) -> SaslAuthenticateResponse:
    """ILLEGAL_SASL_STATE: the connection is not in a SASL exchange."""
    return build(
        response_class(ApiKey.SASL_AUTHENTICATE, rctx.api_version),
        error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication or on a non-SASL listener",
        auth_bytes=b"",
    )


def sasl_authenticate_error_response(
    request: SaslAuthenticateRequest, version: int, code: ErrorCode
) -> SaslAuthenticateResponse:
    return build(
        response_class(ApiKey.SASL_AUTHENTICATE, version), error_code=code, error_message=None, auth_bytes=b""
    )
