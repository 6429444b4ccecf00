"""The hand-written ProduceRequest decoder (v3-v9) agrees with the bounded scan + kio decoder on
generated requests, returns the records as views into the frame, and hands every body it does
not accept (truncated, null arrays, tagged fields, trailing bytes, byte flips) back to that
path, so malformed input keeps its errors (issue #14)."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.apis.produce import PRODUCE_DECODERS
from broker.apis.supported_apis import SUPPORTED_APIS
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.errors import KafkaError
from spark_kafkalite.protocol.framing import decode_request_body, decode_request_header, encode_request
from spark_kafkalite.protocol.produce_request import decode_produce_request_fast
from tests.unit._hypothesis_budget import examples

VERSIONS = range(3, 10)
_names = st.text(alphabet="abcXYZ019._-é", min_size=0, max_size=20)
_i32 = st.integers(-(2**31), 2**31 - 1)
_records = st.none() | st.binary(max_size=300)


def _frame(data: st.DataObject, version: int) -> tuple[bytes, int]:
    cls = request_class(ApiKey.PRODUCE, version)
    topic_cls = nested(cls, "TopicProduceData")
    partition_cls = nested(cls, "PartitionProduceData")
    topics = tuple(
        build(
            topic_cls,
            name=data.draw(_names),
            partition_data=tuple(
                build(partition_cls, index=data.draw(_i32), records=data.draw(_records))
                for _ in range(data.draw(st.integers(0, 3)))
            ),
        )
        for _ in range(data.draw(st.integers(0, 3)))
    )
    request = build(
        cls,
        transactional_id=data.draw(st.none() | _names),
        acks=data.draw(st.sampled_from([-1, 0, 1, 7, -32768])),
        timeout=datetime.timedelta(milliseconds=data.draw(st.integers(0, 2**31 - 1))),
        topic_data=topics,
    )
    frame = encode_request(request, 1, "client")[4:]
    _header, body_offset = decode_request_header(frame)
    return frame, body_offset


def _plain(request: object) -> tuple[object, ...]:
    """The fields the broker reads, timeout in ms, records as bytes."""
    timeout = request.timeout  # type: ignore[attr-defined]
    timeout_ms = (
        timeout // datetime.timedelta(milliseconds=1) if hasattr(timeout, "total_seconds") else timeout
    )
    return (
        request.transactional_id,  # type: ignore[attr-defined]
        request.acks,  # type: ignore[attr-defined]
        timeout_ms,
        [
            (t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in request.topic_data  # type: ignore[attr-defined]
        ],
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fast_decoder_matches_kio(version: int, data: st.DataObject) -> None:
    frame, offset = _frame(data, version)
    fast = decode_produce_request_fast(frame, offset, version)
    assert fast is not None
    assert _plain(fast) == _plain(decode_request_body(ApiKey.PRODUCE, version, frame, offset))
    for topic in fast.topic_data:
        for p in topic.partition_data:
            assert p.records is None or isinstance(p.records, memoryview)  # no copy of the batch


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_bodies_accepted_only_when_kio_agrees(version: int, data: st.DataObject) -> None:
    """Truncations, byte flips and appended bytes: whenever the fast decoder accepts the body,
    kio decodes the same request; otherwise the broker's decoder raises kio's error."""
    frame, offset = _frame(data, version)
    body = bytearray(frame)
    kind = data.draw(st.sampled_from(["truncate", "flip", "append"]))
    if kind == "truncate":
        del body[data.draw(st.integers(offset, len(body) - 1)) :]
    elif kind == "flip":
        at = data.draw(st.integers(offset, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    else:
        body += data.draw(st.binary(min_size=1, max_size=4))
    mutated = bytes(body)
    fast = decode_produce_request_fast(mutated, offset, version)
    try:
        reference = decode_request_body(ApiKey.PRODUCE, version, mutated, offset)
    except KafkaError as exc:
        assert fast is None
        with pytest.raises(type(exc)):
            PRODUCE_DECODERS[version](mutated, offset)
        return
    if fast is not None:
        assert _plain(fast) == _plain(reference)
    assert _plain(PRODUCE_DECODERS[version](mutated, offset)) == _plain(reference)


def test_null_topic_array_goes_to_the_kio_path() -> None:
    """A null topic_data (v3 classic array length -1) is left to the scan, which raises the
    NullInNonNullableFieldError that KafkaApis answers with INVALID_REQUEST."""
    from spark_kafkalite.protocol.bounded_scan import NullInNonNullableFieldError

    body = b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x75\x30" + b"\xff\xff\xff\xff"
    assert decode_produce_request_fast(body, 0, 3) is None
    with pytest.raises(NullInNonNullableFieldError):
        PRODUCE_DECODERS[3](body, 0)


def test_produce_spec_uses_the_fast_decoder_for_v3_to_v9() -> None:
    spec = next(s for s in SUPPORTED_APIS if s.api_key == ApiKey.PRODUCE)
    assert spec.decoders is not None and sorted(spec.decoders) == list(VERSIONS)
