"""The hand-written ProduceResponse encoder is byte-identical to kio's generic encoder (v3-v9),
and the broker's Produce spec uses it for exactly those versions; KIP-467 ``record_errors`` and
``error_message`` round-trip through kio's decoder from v8 and are left out before."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.apis.supported_apis import SUPPORTED_APIS
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.errors import ErrorCode, RecordError
from spark_kafkalite.protocol.framing import decode_response, encode_response
from spark_kafkalite.protocol.produce_response import (
    ProducePartitionResult,
    ProduceResponseData,
    ProduceTopicResult,
    encode_produce_response,
)
from tests.unit._hypothesis_budget import examples

VERSIONS = range(3, 10)
_ERROR_CODES = [
    ErrorCode.none,
    ErrorCode.not_leader_or_follower,
    ErrorCode.duplicate_sequence_number,
    ErrorCode.invalid_record,
    ErrorCode.invalid_timestamp,
]
_names = st.text(alphabet="abcXYZ019._-é", min_size=1, max_size=20)
_messages = st.none() | st.text(max_size=40)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_append_times = st.none() | st.integers(0, 2**41).map(
    lambda ms: datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
)


def _response(data: st.DataObject, version: int) -> object:
    cls = response_class(ApiKey.PRODUCE, version)
    topic_cls = nested(cls, "TopicProduceResponse")
    partition_cls = nested(cls, "PartitionProduceResponse")
    extra: dict[str, object] = {}
    topics = []
    for _ in range(data.draw(st.integers(0, 3))):
        partitions = []
        for _ in range(data.draw(st.integers(0, 3))):
            if version >= 8:
                error_cls = nested(cls, "BatchIndexAndErrorMessage")
                errors = tuple(
                    build(
                        error_cls, batch_index=data.draw(_i32), batch_index_error_message=data.draw(_messages)
                    )
                    for _ in range(data.draw(st.integers(0, 2)))
                )
                extra = {"record_errors": errors, "error_message": data.draw(_messages)}
            elif "record_errors" in getattr(partition_cls, "__dataclass_fields__", {}):
                extra = {"record_errors": ()}
            partitions.append(
                build(
                    partition_cls,
                    index=data.draw(_i32),
                    error_code=data.draw(st.sampled_from(_ERROR_CODES)),
                    base_offset=data.draw(_i64),
                    log_append_time=data.draw(_append_times),
                    **({"log_start_offset": data.draw(_i64)} if version >= 5 else {}),
                    **extra,
                )
            )
        topics.append(topic_cls(name=data.draw(_names), partition_responses=tuple(partitions)))
    throttle = datetime.timedelta(milliseconds=data.draw(st.integers(0, 2**31 - 1)))
    return build(cls, responses=tuple(topics), throttle_time=throttle)


@settings(max_examples=examples(60), deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS), correlation_id=_i32)
def test_matches_kio(data: st.DataObject, version: int, correlation_id: int) -> None:
    response = _response(data, version)
    assert encode_produce_response(response, correlation_id) == encode_response(response, correlation_id)


def test_typical_single_partition_response() -> None:
    cls = response_class(ApiKey.PRODUCE, 9)
    partition = build(
        nested(cls, "PartitionProduceResponse"),
        index=3,
        error_code=ErrorCode.none,
        base_offset=1234,
        log_append_time=None,
        log_start_offset=0,
        record_errors=(),
        error_message=None,
    )
    topic = nested(cls, "TopicProduceResponse")(name="t", partition_responses=(partition,))
    response = build(cls, responses=(topic,), throttle_time=datetime.timedelta(0))
    assert encode_produce_response(response, 7) == encode_response(response, 7)


def test_other_versions_refused() -> None:
    response = build(response_class(ApiKey.PRODUCE, 10), responses=())
    with pytest.raises(ValueError, match="v10"):
        encode_produce_response(response, 1)


def test_broker_produce_spec_uses_it_for_every_served_version() -> None:
    spec = next(s for s in SUPPORTED_APIS if s.api_key == ApiKey.PRODUCE)
    assert spec.encoders is not None
    assert set(spec.encoders) == set(range(spec.min_version, spec.max_version + 1))
    assert all(encoder is encode_produce_response for encoder in spec.encoders.values())


_record_errors = st.lists(st.builds(RecordError, st.integers(0, 2**31 - 1), _messages), max_size=3).map(tuple)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=examples(40), deadline=None)
@given(data=st.data())
def test_light_response_encodes_like_the_kio_entity(version: int, data: st.DataObject) -> None:
    """ProduceResponseData (what handle_produce returns) gives the same bytes as kio's generic
    encoder of the entity built from the same fields (no log append time, throttle 0), record
    errors included from v8; kio's decoder reads the record errors and message back."""
    cls = response_class(ApiKey.PRODUCE, version)
    topic_cls = nested(cls, "TopicProduceResponse")
    partition_cls = nested(cls, "PartitionProduceResponse")
    error_cls = nested(cls, "BatchIndexAndErrorMessage") if version >= 8 else None
    rows = [
        (
            data.draw(_names),
            [
                (
                    data.draw(_i32),
                    data.draw(st.sampled_from(_ERROR_CODES)),
                    data.draw(_i64),
                    data.draw(_i64),
                    data.draw(_messages),
                    data.draw(_record_errors) if version >= 8 else (),
                )
                for _ in range(data.draw(st.integers(0, 3)))
            ],
        )
        for _ in range(data.draw(st.integers(0, 3)))
    ]
    light = ProduceResponseData(
        version,
        tuple(
            ProduceTopicResult(name, tuple(ProducePartitionResult(*p) for p in parts)) for name, parts in rows
        ),
    )
    entity = build(
        cls,
        responses=tuple(
            topic_cls(
                name=name,
                partition_responses=tuple(
                    build(
                        partition_cls,
                        index=index,
                        error_code=code,
                        base_offset=base,
                        log_append_time=None,
                        log_start_offset=start,
                        record_errors=tuple(
                            build(
                                error_cls,
                                batch_index=e.batch_index,
                                batch_index_error_message=e.batch_index_error_message,
                            )
                            for e in record_errors
                        ),
                        error_message=message,
                    )
                    for index, code, base, start, message, record_errors in parts
                ),
            )
            for name, parts in rows
        ),
        throttle_time=datetime.timedelta(0),
    )
    correlation_id = data.draw(_i32)
    frame = encode_produce_response(light, correlation_id)
    assert frame == encode_response(entity, correlation_id)
    decoded_correlation_id, decoded = decode_response(ApiKey.PRODUCE, version, frame[4:])
    assert decoded_correlation_id == correlation_id
    for (_name, parts), topic in zip(rows, decoded.responses, strict=True):
        for (_index, _code, _base, _start, message, record_errors), p in zip(
            parts, topic.partition_responses, strict=True
        ):
            if version >= 8:
                assert p.error_message == message
                assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == list(
                    record_errors
                )


def test_record_errors_on_the_wire_v9() -> None:
    """KIP-467 fields laid out by hand (v9, flexible): a partition refused for records 0 and 10."""
    errors = (RecordError(0, "no key"), RecordError(10, None))
    light = ProduceResponseData(
        9, (ProduceTopicResult("t", (ProducePartitionResult(0, 87, -1, -1, "two records", errors),)),)
    )
    frame = encode_produce_response(light, 5)
    body = frame[4 + 4 + 1 :]  # size, correlation id, header tagged fields
    expected = (
        b"\x02"
        + b"\x02t"  # one topic "t"
        + b"\x02"
        + (0).to_bytes(4, "big")
        + (87).to_bytes(2, "big", signed=True)  # partition 0 INVALID_RECORD
        + (-1).to_bytes(8, "big", signed=True) * 3  # base offset, log append time, log start offset
        + b"\x03"  # two record errors
        + (0).to_bytes(4, "big")
        + b"\x07no key"
        + b"\x00"
        + (10).to_bytes(4, "big")
        + b"\x00"
        + b"\x00"  # null message
        + b"\x0ctwo records"
        + b"\x00"  # error_message, partition tags
        + b"\x00"  # topic tags
        + (0).to_bytes(4, "big")
        + b"\x00"  # throttle time, response tags
    )
    assert body == expected
