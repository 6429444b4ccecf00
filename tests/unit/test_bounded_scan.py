"""The bounded pre-scan that runs before kio's native decoder (issue #14 item 1).

Each crash frame below made kio's Rust decoder allocate tens of GB and abort the process
(SIGABRT); they must now be refused with InvalidRequestError. The scan must also agree with kio
on every well-formed body of every schema, or it would refuse valid requests.
"""

from __future__ import annotations

import datetime
import random
import struct

import kio.index
import pytest
from kio.schema.produce.v9 import request as produce_v9
from kio.serial import entity_reader
from kio.serial.errors import SerialError

from bench.fuzz.wire_gen import WireGen, request_versions
from spark_kafkalite.protocol.api_keys import ApiKey, request_class, response_class
from spark_kafkalite.protocol.bounded_scan import (
    NullInNonNullableFieldError,
    min_entity_bytes,
    replace_null_arrays,
    scan_entity,
)
from spark_kafkalite.protocol.errors import InvalidRequestError
from spark_kafkalite.protocol.framing import (
    decode_request_body,
    decode_request_body_with_nulls,
    decode_request_header,
    decode_response,
)

# Sizes without the 4-byte prefix: 93 (Fetch v12, partitions count 0xFFFFFFFE) and 54.
FETCH_V12_CRASH = bytes.fromhex(
    "0001000c6af2eb35000772646b61666b6100ffffffff000001f400000001032000000100000000ffffffff02"
    "0766757a7a6d65ffffffff0f"
).ljust(0x5D, b"\0")
LIST_OFFSETS_V7_CRASH = bytes.fromhex("0002000700000007000772646b61666b6100ffffffff00ffffffff0f").ljust(
    54, b"\0"
)
METADATA_V12_CRASH = bytes.fromhex("0003000c00000007000772646b61666b6100ffffffff0f").ljust(54, b"\0")
CRASH_FRAMES = {
    "fetch-v12": FETCH_V12_CRASH,
    "list-offsets-v7": LIST_OFFSETS_V7_CRASH,
    "metadata-v12": METADATA_V12_CRASH,
}


@pytest.mark.parametrize("name", sorted(CRASH_FRAMES))
def test_huge_counts_are_refused_before_kio(name: str) -> None:
    frame = CRASH_FRAMES[name]
    header, offset = decode_request_header(frame)
    with pytest.raises(InvalidRequestError, match="left"):
        decode_request_body(header.api_key, header.api_version, frame, offset)


def test_huge_count_in_a_response_is_refused() -> None:
    # Metadata v12 response: throttle, brokers count 0xFFFFFFFE (compact), then nothing.
    frame = struct.pack(">i", 9) + b"\x00" + struct.pack(">i", 0) + bytes.fromhex("ffffffff0f")
    with pytest.raises(InvalidRequestError, match="left"):
        decode_response(ApiKey.METADATA, 12, frame)


def test_huge_string_length_and_tagged_field_size_are_refused() -> None:
    cls = request_class(ApiKey.API_VERSIONS, 3)
    with pytest.raises(InvalidRequestError, match="claims"):
        scan_entity(cls, b"\xff\xff\xff\x0f" + b"a" * 20, 0)
    with pytest.raises(InvalidRequestError, match="tagged field"):
        scan_entity(cls, b"\x02a\x021" + b"\x01\x07\xff\xff\x03hi", 0)


def test_legacy_counts_and_negative_lengths() -> None:
    cls = request_class(ApiKey.METADATA, 4)  # topics: nullable legacy array, then a bool
    with pytest.raises(InvalidRequestError, match="left"):
        scan_entity(cls, struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 8, 0)
    with pytest.raises(InvalidRequestError, match="invalid count"):
        scan_entity(cls, struct.pack(">i", -7) + b"\x00", 0)
    assert scan_entity(cls, struct.pack(">i", -1) + b"\x00", 0) == 5  # null topics = all topics


def test_null_in_non_nullable_array() -> None:
    """ListOffsets v7 with topics = null: Kafka refuses it; kio would hand None to the handler."""
    frame = bytes.fromhex("0002000700000007000772646b61666b6100ffffffff000000")
    header, offset = decode_request_header(frame)
    with pytest.raises(NullInNonNullableFieldError) as info:
        decode_request_body(header.api_key, header.api_version, frame, offset)
    assert info.value.fields == ["ListOffsetsRequest.topics"]
    request = decode_request_body_with_nulls(header.api_key, header.api_version, frame, offset)
    assert request.topics == ()


def test_replace_null_arrays_in_nested_entities() -> None:
    request = produce_v9.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(0),
        topic_data=(produce_v9.TopicProduceData(name="t", partition_data=None),),  # type: ignore[arg-type]
    )
    fixed = replace_null_arrays(request)
    assert fixed.topic_data[0].partition_data == ()
    assert fixed.transactional_id is None  # nullable fields keep their null


def test_scan_agrees_with_kio_on_every_schema() -> None:
    rng = random.Random(14)
    gen = WireGen(rng, hostility=0.0)
    checked = 0
    for api_key in sorted(kio.index.api_key_map):
        for version in request_versions(api_key):
            for cls in (request_class(api_key, version), response_class(api_key, version)):
                assert min_entity_bytes(cls) >= 0
                reader = entity_reader(cls)
                for _ in range(2):
                    body = gen.entity(cls)
                    end = scan_entity(cls, body, 0)
                    try:
                        _entity, size = reader(body, 0)
                    except (ValueError, SerialError):  # a value kio rejects (a negative timestamp)
                        continue
                    assert end == size == len(body), cls
                    checked += 1
    assert checked > 1200


def test_hostile_bodies_never_escape_as_anything_but_invalid_request() -> None:
    rng = random.Random(5)
    gen = WireGen(rng, hostility=0.3)
    keys = [
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.METADATA,
        ApiKey.OFFSET_COMMIT,
        ApiKey.JOIN_GROUP,
    ]
    for _ in range(1500):
        api_key = rng.choice(keys)
        version = rng.choice(request_versions(api_key))
        frame = gen.request_frame(api_key, version, 1)[4:]
        header, offset = decode_request_header(frame)
        try:
            decode_request_body(api_key, version, frame, offset)
        except InvalidRequestError:
            pass
