"""``KafkaApis``: the request pipeline over the supported-API table (``broker.apis.supported_apis``).

For each frame (from the socket server): look up the API and check the version against the
table (unknown key or version -> close the connection, as Kafka's ``SocketServer`` does; except
ApiVersions, answered v0 + UNSUPPORTED_VERSION per KIP-511), decode the body with kio (malformed
-> close; for ApiVersions -> INVALID_REQUEST), run the handler, and encode the response. A handler
exception becomes the API's error response with the mapped error code (UNKNOWN_SERVER_ERROR for
unexpected ones, logged with the request); the broker keeps serving.

The ApiVersions response is generated from the same table, so what is advertised is what is served.
Produce is advertised from v0 but v0-v2 are refused at request time (Kafka 4.0, KAFKA-18659:
librdkafka <= 2.11.0 only enables compression when Produce v0 is advertised).
"""

from __future__ import annotations

import logging
import time

from broker.apis import api_versions as api_versions_api
from broker.apis.context import BrokerContext
from broker.apis.fetch import FETCH_REQUEST_CLASSES
from broker.apis.supported_apis import SUPPORTED_APIS, ApiSpec
from broker.errors import error_code_for
from broker.metrics.meters import RequestMetrics, error_counts, request_name
from broker.network.request_context import CloseConnection, RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.bounded_scan import NullInNonNullableFieldError
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError
from spark_kafkalite.protocol.framing import (
    FrameChunks,
    decode_request_body,
    decode_request_body_with_nulls,
    encode_response,
)

__all__ = ["KafkaApis"]

logger = logging.getLogger(__name__)


class KafkaApis:
    """The request handler the socket server calls for every frame.

    Args:
        ctx: broker state for handlers.
        apis: the supported APIs (default: :data:`SUPPORTED_APIS`).
    """

    def __init__(self, ctx: BrokerContext, apis: tuple[ApiSpec, ...] = SUPPORTED_APIS) -> None:
        self.ctx = ctx
        self.apis: dict[int, ApiSpec] = {int(spec.api_key): spec for spec in apis}
        self._api_versions_range = self.apis[ApiKey.API_VERSIONS].advertised_range
        #: RequestsPerSec, ErrorsPerSec and request times (Kafka's ``RequestChannel.Metrics``)
        self.request_metrics = RequestMetrics()

    def advertised_versions(self) -> list[tuple[int, int, int]]:
        """[(api_key, min, max)] as advertised in ApiVersions."""
        return [(key, *spec.advertised_range) for key, spec in sorted(self.apis.items())]

    async def __call__(
        self, rctx: RequestContext, frame: bytes | bytearray, body_offset: int
    ) -> bytes | FrameChunks | None:
        """Serve one request frame; returns the response frame, or None (no response).

        Raises:
            CloseConnection: the connection must be closed (bad request, unsupported version).
        """
        api_key, version = rctx.api_key, rctx.api_version
        spec = self.apis.get(api_key)
        if api_key == ApiKey.API_VERSIONS:
            return self._api_versions(rctx, frame, body_offset)
        if spec is None:
            logger.warning(
                "closing %s: unsupported api key %d (client %s)",
                rctx.connection_id,
                api_key,
                rctx.header.client_id,
            )
            raise CloseConnection(f"unknown api key {api_key}")
        if not spec.min_version <= version <= spec.max_version:
            logger.warning(
                "closing %s: unsupported version %d of %s (supported %d-%d, client %s)",
                rctx.connection_id,
                version,
                spec.api_key.name,
                spec.min_version,
                spec.max_version,
                rctx.header.client_id,
            )
            raise CloseConnection(f"unsupported version {version} of api key {api_key}")
        try:
            decoder = spec.decoders.get(version) if spec.decoders else None
            if decoder is not None:
                request = decoder(frame, body_offset)
            else:
                request = decode_request_body(api_key, version, frame, body_offset)
        except NullInNonNullableFieldError as exc:
            # In bounds but a non-nullable array is null (Kafka's generated readers refuse it):
            # answer INVALID_REQUEST through the API's error response instead of letting a
            # handler iterate None.
            logger.warning(
                "invalid %s v%d request from %s: %s", spec.api_key.name, version, rctx.connection_id, exc
            )
            try:
                request = decode_request_body_with_nulls(api_key, version, frame, body_offset)
            except KafkaError as also:  # malformed beyond the nulls: close, as for any bad body
                raise CloseConnection(str(also)) from None
            return self._error_response(spec, rctx, request, ErrorCode.invalid_request)
        except KafkaError as exc:
            logger.warning(
                "closing %s: cannot parse %s v%d request: %s",
                rctx.connection_id,
                spec.api_key.name,
                version,
                exc,
            )
            raise CloseConnection(str(exc)) from None
        started_s = time.monotonic()
        try:
            response = await spec.handler(self.ctx, rctx, request)
        except CloseConnection:
            raise
        except Exception as exc:  # noqa: BLE001 - becomes the API's error response
            code = error_code_for(
                exc, f"{spec.api_key.name} v{version} request {request!r:.2000} from {rctx.connection_id}"
            )
            answer = self._error_response(spec, rctx, request, code)
            self._record(rctx, request, started_s, {int(code): 1}, answered=True)
            return answer
        if response is None:
            self._record(rctx, request, started_s, {}, answered=False)
            return None
        try:
            answer = self._encode(spec, rctx, response)
        except Exception as exc:  # noqa: BLE001 - a response we cannot encode is our bug
            code = error_code_for(
                exc, f"encoding the {spec.api_key.name} v{version} response to {rctx.connection_id}"
            )
            return self._error_response(spec, rctx, request, code)
        self._record(rctx, request, started_s, error_counts(response), answered=True)
        return answer

    def _record(
        self,
        rctx: RequestContext,
        request: object,
        started_s: float,
        codes: dict[int, int],
        *,
        answered: bool,
    ) -> None:
        """Count one request (Kafka's ``RequestChannel.Request.updateRequestMetrics``): its
        queue time runs from its frame's arrival to its handler's start, its local time from
        there to its response being encoded or to its parking in a purgatory, its remote time
        from that parking to the response being encoded. An ``answered`` request is counted
        when the socket server has written its response (``rctx.timeline.sent``), adding its
        response queue and send times; one without a response (acks=0) at once. Fetch times go
        under ``Fetch`` and under ``FetchConsumer`` or ``FetchFollower`` (Kafka's
        ``RequestMetrics``)."""
        api_key = rctx.api_key
        name = request_name(api_key)
        if api_key == ApiKey.FETCH and isinstance(request, FETCH_REQUEST_CLASSES):
            names: tuple[str, ...] = (name, "FetchFollower" if request.replica_id >= 0 else "FetchConsumer")
        else:
            names = (name,)
        ready_s = time.monotonic()
        timeline = rctx.timeline
        parked_s = timeline.parked_s or ready_s
        record = self.request_metrics.record
        version = rctx.api_version
        queue_ms = (started_s - rctx.received_time_s) * 1000.0
        local_ms = (parked_s - started_s) * 1000.0
        remote_ms = (ready_s - parked_s) * 1000.0
        if not answered:
            record(api_key, version, names, codes, queue_ms, local_ms, remote_ms)
            return

        def sent(written_s: float, done_s: float) -> None:
            record(
                api_key,
                version,
                names,
                codes,
                queue_ms,
                local_ms,
                remote_ms,
                (written_s - ready_s) * 1000.0,
                (done_s - written_s) * 1000.0,
            )

        timeline.on_sent = sent

    @staticmethod
    def _encode(spec: ApiSpec, rctx: RequestContext, response: object) -> bytes | FrameChunks:
        encoder = spec.encoders.get(rctx.api_version) if spec.encoders else None
        if encoder is not None:  # (Fetch's keeps record sets by reference: FrameChunks)
            return encoder(response, rctx.correlation_id)
        return encode_response(response, rctx.correlation_id)

    def error_response_frame(
        self, rctx: RequestContext, frame: bytes | bytearray, body_offset: int, code: ErrorCode
    ) -> bytes | FrameChunks | None:
        """The request's API error response with ``code`` (the socket server answers a request
        sent during SaslAuthenticate with ILLEGAL_SASL_STATE this way, as Kafka's
        ``SaslServerAuthenticator``); None when the API, its version or the body is not one we
        can parse (the connection is then closed without a response).

        Raises:
            CloseConnection: an acks=0 produce request (no response), or no error response.
        """
        spec = self.apis.get(rctx.api_key)
        if spec is None or not spec.min_version <= rctx.api_version <= spec.max_version:
            return None
        try:
            decoder = spec.decoders.get(rctx.api_version) if spec.decoders else None
            if decoder is not None:
                request = decoder(frame, body_offset)
            else:
                request = decode_request_body(rctx.api_key, rctx.api_version, frame, body_offset)
        except KafkaError:
            return None
        return self._error_response(spec, rctx, request, code)

    def _error_response(
        self, spec: ApiSpec, rctx: RequestContext, request: object, code: ErrorCode
    ) -> bytes | FrameChunks:
        """The API's request-level error response with ``code`` (Kafka's
        ``AbstractRequest.getErrorResponse`` via ``RequestHandlerHelper``). acks=0 produce
        requests get no response: their connection is closed, as in Kafka."""
        if spec.answered is not None and not spec.answered(request):
            raise CloseConnection(f"{spec.api_key.name} request without a response failed")
        try:
            return self._encode(spec, rctx, spec.error_response(request, rctx.api_version, code))
        except Exception as exc:  # noqa: BLE001 - never let one request take the connection's task down
            logger.error(
                "cannot build the %s v%d error response for %s; closing the connection",
                spec.api_key.name,
                rctx.api_version,
                rctx.connection_id,
                exc_info=exc,
            )
            raise CloseConnection("no error response") from None

    def _api_versions(self, rctx: RequestContext, frame: bytes | bytearray, body_offset: int) -> bytes:
        version = rctx.api_version
        low, high = self._api_versions_range
        if not low <= version <= high:
            # KIP-511: answer v0 with UNSUPPORTED_VERSION and our ApiVersions range, body unparsed.
            return encode_response(
                api_versions_api.unsupported_version_response((low, high)), rctx.correlation_id
            )
        try:
            request = decode_request_body(ApiKey.API_VERSIONS, version, frame, body_offset)
        except KafkaError as exc:
            logger.info("invalid ApiVersions v%d request from %s: %s", version, rctx.connection_id, exc)
            return encode_response(
                api_versions_api.api_versions_response(version, ErrorCode.invalid_request, []),
                rctx.correlation_id,
            )
        if not api_versions_api.valid_client_software(request):
            return encode_response(
                api_versions_api.api_versions_response(version, ErrorCode.invalid_request, []),
                rctx.correlation_id,
            )
        response = api_versions_api.api_versions_response(version, ErrorCode.none, self.advertised_versions())
        return encode_response(response, rctx.correlation_id)
