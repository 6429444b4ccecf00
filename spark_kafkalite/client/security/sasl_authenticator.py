"""One connection's SASL exchange (Java ``SaslClientAuthenticator``), after ApiVersions:
SaslHandshake v1 naming the mechanism, then SaslAuthenticate (v0-2, the highest both sides
speak) carrying each client token until the mechanism is complete, the order librdkafka 2.16
uses too (Kafka's ``SaslClientAuthenticator``, KIP-152; docs/security.md). SaslHandshake v0 (raw tokens without Kafka
headers, pre-1.0 brokers) is not spoken.

The ``NetworkClient`` sends the requests this returns and hands back each response frame; any
refusal raises an error naming the mechanism, the principal and the node, never the password:

* UnsupportedSaslMechanismError: the broker does not enable the mechanism (its list is named);
* SaslAuthenticationFailedError: the broker refused the credentials (its ErrorMessage is
  included), or the broker's token broke the mechanism (e.g. a wrong SCRAM server signature);
* IllegalSaslStateError: the broker answered with ILLEGAL_SASL_STATE;
* UnsupportedVersionError: the broker lacks SaslHandshake v1 or SaslAuthenticate.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from kio.schema.sasl_authenticate.v0.response import SaslAuthenticateResponse as SaslAuthenticateResponseV0

from spark_kafkalite.client.requests import negotiate_version
from spark_kafkalite.client.security.security_config import SaslCredentials
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    error_for_code,
)
from spark_kafkalite.protocol.framing import decode_response
from spark_kafkalite.protocol.sasl_client import SaslClientError

if TYPE_CHECKING:
    from kio.schema.sasl_authenticate.v1.response import (
        SaslAuthenticateResponse as SaslAuthenticateResponseV1,
    )
    from kio.schema.sasl_authenticate.v2.response import (
        SaslAuthenticateResponse as SaslAuthenticateResponseV2,
    )

_ONE_MS = datetime.timedelta(milliseconds=1)

__all__ = ["SaslClientAuthenticator"]


class SaslClientAuthenticator:
    """The exchange for one connection (see module docstring).

    Args:
        credentials: mechanism, user and password.
        node_id: the broker's node id (for messages).
        api_versions: the broker's ApiVersions ranges for this connection.

    Raises (constructor):
        UnsupportedVersionError: the broker lacks SaslHandshake v1 or SaslAuthenticate.
    """

    def __init__(
        self, credentials: SaslCredentials, node_id: int, api_versions: dict[int, tuple[int, int]]
    ) -> None:
        self._credentials = credentials
        self._node_id = node_id
        self._client = credentials.new_client()
        self.handshake_version = negotiate_version(node_id, api_versions, ApiKey.SASL_HANDSHAKE)
        self.authenticate_version = negotiate_version(node_id, api_versions, ApiKey.SASL_AUTHENTICATE)
        self.session_lifetime_ms = 0

    def _describe(self) -> str:
        return f"{self._credentials.mechanism} authentication of {self._credentials.principal} at node {self._node_id}"

    def handshake_request(self) -> Any:
        """The SaslHandshakeRequest naming the mechanism."""
        return build(
            request_class(ApiKey.SASL_HANDSHAKE, self.handshake_version),
            mechanism=self._credentials.mechanism,
        )

    def _authenticate_request(self, token: bytes) -> Any:
        return build(request_class(ApiKey.SASL_AUTHENTICATE, self.authenticate_version), auth_bytes=token)

    def on_handshake_response(self, frame: memoryview) -> Any:
        """Check the SaslHandshakeResponse; returns the first SaslAuthenticateRequest.

        Raises:
            UnsupportedSaslMechanismError / IllegalSaslStateError / KafkaError: the broker refused.
        """
        _, response = decode_response(ApiKey.SASL_HANDSHAKE, self.handshake_version, frame)
        code = int(response.error_code)
        if code == ErrorCode.unsupported_sasl_mechanism:
            enabled = ", ".join(str(m) for m in response.mechanisms) or "none"
            raise UnsupportedSaslMechanismError(
                f"{self._describe()}: the broker does not enable {self._credentials.mechanism} "
                f"(enabled: {enabled})"
            )
        if code != ErrorCode.none:
            raise self._error(code, None)
        return self._authenticate_request(self._client.initial_response())

    def on_authenticate_response(self, frame: memoryview) -> Any | None:
        """Take a SaslAuthenticateResponse; returns the next SaslAuthenticateRequest, or None
        when the exchange is complete (the connection is authenticated).

        Raises:
            SaslAuthenticationFailedError / IllegalSaslStateError / KafkaError: the broker refused
                the credentials, or its token broke the mechanism.
        """
        _, decoded = decode_response(ApiKey.SASL_AUTHENTICATE, self.authenticate_version, frame)
        response: SaslAuthenticateResponseV0 | SaslAuthenticateResponseV1 | SaslAuthenticateResponseV2 = (
            decoded
        )
        code = int(response.error_code)
        if code != ErrorCode.none:
            raise self._error(code, response.error_message)
        # v1+ carries the session lifetime (KIP-368), a timedelta in kio
        self.session_lifetime_ms = (
            0 if isinstance(response, SaslAuthenticateResponseV0) else response.session_lifetime // _ONE_MS
        )
        if self._client.is_complete:
            return None
        try:
            token = self._client.evaluate_challenge(bytes(response.auth_bytes))
        except SaslClientError as exc:
            raise SaslAuthenticationFailedError(
                f"{self._describe()} failed: invalid token from the broker: {exc}"
            ) from None
        if token is None:
            return None
        return self._authenticate_request(token)

    def _error(self, code: int, message: str | None) -> KafkaError:
        detail = f": {message}" if message else ""
        if code == ErrorCode.sasl_authentication_failed:
            return SaslAuthenticationFailedError(f"{self._describe()} failed{detail}")
        if code == ErrorCode.illegal_sasl_state:
            return IllegalSaslStateError(f"{self._describe()}: broker reports an illegal SASL state{detail}")
        return error_for_code(code, f"{self._describe()} failed{detail}")
