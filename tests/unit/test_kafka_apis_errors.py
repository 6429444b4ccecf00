"""KafkaApis turns a failing handler into the API's error response and keeps the connection
(issue #14 item 1); only when even the error response cannot be built is the connection closed."""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

import pytest
from kio.schema.heartbeat.v4.request import HeartbeatRequest

from broker.apis.heartbeat import heartbeat_error_response
from broker.apis.kafka_apis import KafkaApis
from broker.apis.supported_apis import SUPPORTED_APIS, ApiSpec
from broker.network.request_context import CloseConnection, RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.framing import decode_request_header, decode_response, encode_request


async def _boom(ctx: Any, rctx: Any, request: Any) -> Any:
    raise RuntimeError("handler bug")


def _broken_error_response(request: Any, version: int, code: Any) -> Any:
    raise AttributeError("error-response bug")


def _apis(error_response: Any) -> KafkaApis:
    versions = next(s for s in SUPPORTED_APIS if s.api_key == ApiKey.API_VERSIONS)
    return KafkaApis(None, (versions, ApiSpec(ApiKey.HEARTBEAT, 0, 4, _boom, error_response)))  # type: ignore[arg-type]


def _call(apis: KafkaApis) -> bytes | None:
    request = HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    frame = encode_request(request, 77, "unit")[4:]
    header, offset = decode_request_header(frame)
    rctx = RequestContext(header, "conn-1", "127.0.0.1", "PLAINTEXT", 0.0)
    return asyncio.run(apis(rctx, frame, offset))


def test_handler_exception_answers_unknown_server_error() -> None:
    frame = _call(_apis(heartbeat_error_response))
    assert frame is not None
    correlation_id, response = decode_response(ApiKey.HEARTBEAT, 4, frame[4:])
    assert correlation_id == 77
    assert int(response.error_code) == -1  # UNKNOWN_SERVER_ERROR
    assert response.throttle_time == datetime.timedelta(0)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4


def test_failing_error_response_closes_only_that_connection() -> None:
    with pytest.raises(CloseConnection):
        _call(_apis(_broken_error_response))
