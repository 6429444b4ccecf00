"""Request/response framing with header v1/v2 and the error tree."""

from __future__ import annotations

import datetime
import struct

import pytest

from spark_kafkalite.protocol.api_keys import ApiKey, request_class, response_class
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    NotLeaderOrFollowerError,
    UnsupportedVersionError,
    error_for_code,
    raise_for_error_code,
)
from spark_kafkalite.protocol.framing import (
    decode_request_body,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)


@pytest.mark.parametrize("version", [0, 4, 9, 12])
def test_metadata_request_round_trip(version: int) -> None:
    cls = request_class(ApiKey.METADATA, version)
    kwargs = {"topics": None} if version >= 1 else {"topics": ()}
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = False
    if 8 <= version <= 10:
        kwargs["include_cluster_authorized_operations"] = False
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = False
    frame = encode_request(cls(**kwargs), correlation_id=42, client_id="me")
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header, offset = decode_request_header(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        3,
        version,
        42,
        "me",
    )
    assert header.header_version == (2 if version >= 9 else 1)
    assert decode_request_body(3, version, frame[4:], offset) == cls(**kwargs)


def test_api_versions_response_uses_header_v0() -> None:
    cls = response_class(ApiKey.API_VERSIONS, 3)
    entity = cls(error_code=ErrorCode.none, api_keys=(), throttle_time=datetime.timedelta(0))
    frame = encode_response(entity, 7)
    # header v0: correlation id then directly the body (error code 0 as int16)
    assert frame[4:8] == struct.pack(">i", 7)
    assert frame[8:10] == b"\x00\x00"
    cid, decoded = decode_response(ApiKey.API_VERSIONS, 3, frame[4:])
    assert cid == 7 and decoded.error_code == 0


def test_truncated_header_and_body_raise_invalid_request() -> None:
    with pytest.raises(InvalidRequestError):
        decode_request_header(b"\x00\x03\x00")
    frame = encode_request(
        request_class(3, 12)(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
        1,
        "c",
    )
    header, offset = decode_request_header(frame[4:])
    with pytest.raises(InvalidRequestError):
        decode_request_body(3, 12, frame[4:-2], offset)


def test_unknown_tagged_field_is_invalid_request_not_key_error() -> None:
    frame = bytearray(
        encode_request(request_class(18, 3)(client_software_name="a", client_software_version="1"), 1, None)
    )
    frame[-1:] = b"\x01\x05\x01\x00"  # one unknown tagged field (tag 5) in the body
    header, offset = decode_request_header(bytes(frame[4:]))
    with pytest.raises(InvalidRequestError):
        decode_request_body(18, 3, bytes(frame[4:]), offset)


def test_unknown_version_is_unsupported() -> None:
    with pytest.raises(UnsupportedVersionError):
        request_class(ApiKey.PRODUCE, 99)


def test_error_tree() -> None:
    err = error_for_code(6, "partition t-0")
    assert isinstance(err, NotLeaderOrFollowerError)
    assert err.retriable and err.error_code == 6
    assert "NOT_LEADER_OR_FOLLOWER" in str(err) and "t-0" in str(err)
    with pytest.raises(NotLeaderOrFollowerError):
        raise_for_error_code(6, "x")
    raise_for_error_code(0, "fine")
    assert error_for_code(30000).error_code == 30000


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_response_chunks_keep_large_record_sets_by_reference(version: int) -> None:
    """encode_response_chunks: the chunks concatenate to encode_response's frame, and a record set
    of >= 64 KiB is the caller's own buffer (a view of the log read), not a copy."""
    from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
    from spark_kafkalite.protocol.framing import encode_response_chunks

    cls = response_class(ApiKey.FETCH, version)
    big = memoryview(bytes(range(256)) * 1024)[: 200 * 1024 + 7]
    small = b"x" * 100

    def part(index: int, records: bytes | memoryview) -> object:
        return build(
            nested(cls, "PartitionData"),
            partition_index=index,
            error_code=ErrorCode.none,
            high_watermark=10,
            last_stable_offset=10,
            log_start_offset=0,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=records,
        )

    topic = nested(cls, "FetchableTopicResponse")(topic="t", partitions=(part(0, big), part(1, small)))
    response = build(
        cls, throttle_time=ZERO_DURATION, error_code=ErrorCode.none, session_id=0, responses=(topic,)
    )
    chunks = encode_response_chunks(response, 42)
    frame = encode_response(response, 42)
    assert b"".join(chunks) == frame
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert any(chunk is big for chunk in chunks)
    correlation_id, decoded = decode_response(ApiKey.FETCH, version, memoryview(frame)[4:])
    assert correlation_id == 42
    assert bytes(decoded.responses[0].partitions[0].records) == bytes(big)
    assert bytes(decoded.responses[0].partitions[1].records) == small
