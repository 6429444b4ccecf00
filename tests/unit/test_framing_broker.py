"""KafkaApis request pipeline (pure logic, no sockets): version checks, ApiVersions fallback,
error responses for handler failures, connection closing rules."""

from __future__ import annotations

import asyncio
import datetime
import struct
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.produce.v9 import request as produce_v9

from broker.apis.kafka_apis import KafkaApis
from broker.apis.metadata import metadata_error_response
from broker.apis.produce import produce_answered, produce_error_response
from broker.apis.supported_apis import SUPPORTED_APIS, ApiSpec
from broker.network.request_context import CloseConnection, RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import KafkaError, NotLeaderOrFollowerError
from spark_kafkalite.protocol.framing import decode_request_header, decode_response, encode_request


def call(apis: KafkaApis, frame_with_size: bytes) -> bytes | None:
    frame = frame_with_size[4:]
    try:
        header, offset = decode_request_header(frame)
    except KafkaError as exc:  # the socket server closes on a bad header
        raise CloseConnection(str(exc)) from exc
    rctx = RequestContext(header, "test-conn", "127.0.0.1", "PLAINTEXT", 0.0)
    return asyncio.run(apis(rctx, frame, offset))


def raw_frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, 42, -1) + body
    return struct.pack(">i", len(payload)) + payload


async def failing_handler(ctx: Any, rctx: RequestContext, request: Any) -> Any:
    raise RuntimeError("boom")


async def kafka_error_handler(ctx: Any, rctx: RequestContext, request: Any) -> Any:
    raise NotLeaderOrFollowerError("moved")


def apis_with(handler: Any, api_key: ApiKey = ApiKey.METADATA) -> KafkaApis:
    specs = [s for s in SUPPORTED_APIS if s.api_key != api_key]
    error_response = metadata_error_response if api_key == ApiKey.METADATA else produce_error_response
    low, high = (0, 12) if api_key == ApiKey.METADATA else (3, 9)
    answered = None if api_key == ApiKey.METADATA else produce_answered  # acks=0: no response
    specs.append(ApiSpec(api_key, low, high, handler, error_response, answered=answered))
    return KafkaApis(None, tuple(specs))  # type: ignore[arg-type]


def metadata_request() -> Any:
    return metadata_v12.MetadataRequest(
        topics=(metadata_v12.MetadataRequestTopic(topic_id=None, name="t"),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def produce_request(acks: int) -> Any:
    return produce_v9.ProduceRequest(
        acks=acks,
        timeout=datetime.timedelta(seconds=1),
        topic_data=(
            produce_v9.TopicProduceData(
                name="t", partition_data=(produce_v9.PartitionProduceData(index=0, records=b"x"),)
            ),
        ),
    )


def test_unexpected_handler_error_becomes_unknown_server_error() -> None:
    response = call(apis_with(failing_handler), encode_request(metadata_request(), 7, "c"))
    assert response is not None
    cid, entity = decode_response(3, 12, response[4:])
    assert cid == 7
    assert [(t.name, int(t.error_code)) for t in entity.topics] == [("t", -1)]


def test_kafka_error_keeps_its_code() -> None:
    response = call(
        apis_with(kafka_error_handler, ApiKey.PRODUCE), encode_request(produce_request(1), 8, "c")
    )
    assert response is not None
    _, entity = decode_response(0, 9, response[4:])
    assert int(entity.responses[0].partition_responses[0].error_code) == 6


def test_acks_zero_failure_closes_instead_of_answering() -> None:
    with pytest.raises(CloseConnection):
        call(apis_with(failing_handler, ApiKey.PRODUCE), encode_request(produce_request(0), 9, "c"))


def test_unknown_key_and_versions_close() -> None:
    apis = apis_with(failing_handler)
    for api_key, version in [(999, 0), (3, 13), (0, 0), (0, 2), (1, 3), (1, 13), (19, 1), (23, 1)]:
        with pytest.raises(CloseConnection):
            call(apis, raw_frame(api_key, version))


def test_malformed_body_closes() -> None:
    with pytest.raises(CloseConnection):
        call(apis_with(failing_handler), raw_frame(3, 1, b"\x00\x00\x00\x05\x00"))


def test_api_versions_fallback_and_table() -> None:
    apis = apis_with(failing_handler)
    response = call(apis, raw_frame(18, 7))
    assert response is not None
    assert response[4:] == struct.pack(">ihihhh", 42, 35, 1, 18, 0, 3)
    response = call(
        apis,
        encode_request(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3, None),
    )
    assert response is not None
    _, entity = decode_response(18, 3, response[4:])
    ranges = {k.api_key: (k.min_version, k.max_version) for k in entity.api_keys}
    assert ranges == {
        0: (0, 9),
        1: (4, 12),
        2: (0, 7),
        3: (0, 12),
        8: (0, 9),
        9: (0, 9),
        10: (0, 6),
        11: (0, 9),
        12: (0, 4),
        13: (0, 5),
        14: (0, 5),
        15: (0, 5),
        16: (0, 5),
        17: (0, 1),
        18: (0, 3),
        19: (2, 7),
        20: (1, 6),
        21: (0, 2),
        22: (0, 5),
        23: (2, 4),
        24: (0, 3),
        25: (0, 4),
        26: (0, 4),
        27: (1, 1),
        28: (0, 4),
        29: (1, 3),
        30: (1, 3),
        31: (1, 3),
        32: (1, 4),
        33: (0, 2),
        35: (1, 4),
        36: (0, 2),
        37: (0, 3),
        42: (0, 2),
        43: (0, 2),
        44: (0, 1),
        47: (0, 0),
        50: (0, 0),
        51: (0, 0),
        60: (0, 1),
        65: (0, 0),
        66: (0, 2),
        68: (0, 1),
        69: (0, 1),
        76: (1, 1),
        77: (1, 1),
        78: (1, 2),
        79: (1, 2),
    }
    # KIP-584 features: group.version 1 (KIP-848) and share.version 1 (KIP-932) supported and finalized
    assert [(f.name, f.min_version, f.max_version) for f in entity.supported_features] == [
        ("group.version", 0, 1),
        ("share.version", 0, 1),
    ]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in entity.finalized_features] == [
        ("group.version", 1, 1),
        ("share.version", 1, 1),
    ]
    assert apis.advertised_versions()[0] == (0, 0, 9)
