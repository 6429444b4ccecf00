"""The hand-written FetchResponse encoder is byte-identical to kio's generic encoder (v4-v12),
keeps large record sets by reference, and the broker's Fetch spec uses it for every served
version."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.apis.supported_apis import SUPPORTED_APIS
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_response_encode import encode_fetch_response
from spark_kafkalite.protocol.framing import encode_response_chunks
from tests.unit._hypothesis_budget import examples

VERSIONS = range(4, 13)
_ERROR_CODES = [ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.offset_out_of_range]
_names = st.text(alphabet="abcXYZ019._-é", min_size=1, max_size=20)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_records = st.none() | st.binary(max_size=64) | st.sampled_from([b"r" * (64 * 1024), b"s" * (64 * 1024 + 7)])


def _response(data: st.DataObject, version: int) -> object:
    cls = response_class(ApiKey.FETCH, version)
    topic_cls = nested(cls, "FetchableTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    aborted_cls = nested(partition_cls, "AbortedTransaction")
    topics = []
    for _ in range(data.draw(st.integers(0, 3))):
        partitions = []
        for _ in range(data.draw(st.integers(0, 3))):
            aborted = data.draw(st.none() | st.lists(st.tuples(_i64, _i64), max_size=2))
            tags: dict[str, object] = {}
            if version >= 12:
                for name, nested_name, fields in (
                    ("diverging_epoch", "EpochEndOffset", ("epoch", "end_offset")),
                    ("current_leader", "LeaderIdAndEpoch", ("leader_id", "leader_epoch")),
                    ("snapshot_id", "SnapshotId", ("end_offset", "epoch")),
                ):
                    if data.draw(st.booleans()):
                        width = {"end_offset": _i64}
                        tags[name] = nested(cls, nested_name)(
                            **{f: data.draw(width.get(f, _i32)) for f in fields}
                        )
            partitions.append(
                build(
                    partition_cls,
                    partition_index=data.draw(_i32),
                    error_code=data.draw(st.sampled_from(_ERROR_CODES)),
                    high_watermark=data.draw(_i64),
                    last_stable_offset=data.draw(_i64),
                    log_start_offset=data.draw(_i64),
                    aborted_transactions=None
                    if aborted is None
                    else tuple(aborted_cls(producer_id=p, first_offset=f) for p, f in aborted),
                    preferred_read_replica=data.draw(_i32),
                    records=data.draw(_records),
                    **tags,
                )
            )
        topics.append(topic_cls(topic=data.draw(_names), partitions=tuple(partitions)))
    return build(
        cls,
        throttle_time=datetime.timedelta(milliseconds=data.draw(st.integers(0, 2**31 - 1))),
        error_code=data.draw(st.sampled_from(_ERROR_CODES)),
        session_id=data.draw(_i32),
        responses=tuple(topics),
    )


@settings(max_examples=examples(80), deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS), correlation_id=_i32)
def test_matches_kio(data: st.DataObject, version: int, correlation_id: int) -> None:
    response = _response(data, version)
    ours = encode_fetch_response(response, correlation_id)
    assert b"".join(ours) == b"".join(encode_response_chunks(response, correlation_id))
    # record sets of 64 KiB or more are the response's own buffers, not copies
    by_reference = [
        p.records
        for t in response.responses  # type: ignore[attr-defined]
        for p in t.partitions
        if p.records is not None and len(p.records) >= 64 * 1024
    ]
    assert [c for c in ours if any(c is r for r in by_reference)] == by_reference
    assert isinstance(ours[0], bytearray)


def test_other_versions_refused() -> None:
    response = build(response_class(ApiKey.FETCH, 13), throttle_time=0, error_code=0, responses=())
    with pytest.raises(ValueError, match="v13"):
        encode_fetch_response(response, 1)


def test_broker_fetch_spec_uses_it_for_every_served_version() -> None:
    spec = next(s for s in SUPPORTED_APIS if s.api_key == ApiKey.FETCH)
    assert spec.encoders is not None
    assert set(spec.encoders) == set(range(spec.min_version, spec.max_version + 1))
    assert all(encoder is encode_fetch_response for encoder in spec.encoders.values())
