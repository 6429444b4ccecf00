"""The light fetch results and the replica fetcher's codecs agree with kio: a FetchResponseData
(what the broker's fetch handler returns) encodes to the bytes of the kio entity with the same
fields (v4-v12: aborted transactions, null and large record sets, KIP-595 diverging epoch); the
fetcher's FetchRequest v12 encoder gives kio's bytes, and its FetchResponse v12 decoder kio's
fields (records as views of the frame) and refuses every truncated frame."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafkalite.protocol.api_keys import ApiKey, request_class, response_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.errors import ErrorCode, InvalidRequestError
from spark_kafkalite.protocol.fetch_response_encode import (
    NO_DIVERGING_EPOCH,
    AbortedTransaction,
    EpochEndOffset,
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
    encode_fetch_response,
)
from spark_kafkalite.protocol.framing import (
    decode_request_body,
    decode_response,
    encode_request,
    encode_response,
)
from spark_kafkalite.protocol.replica_fetch_codec import (
    REPLICA_FETCH_VERSION,
    ReplicaFetchPartition,
    decode_fetch_request_v12_fast,
    decode_replica_fetch_response,
    encode_replica_fetch_request,
)
from tests.unit._hypothesis_budget import examples

VERSIONS = range(4, 13)
_ERROR_CODES = [ErrorCode.none, ErrorCode.not_leader_or_follower, ErrorCode.offset_out_of_range]
_names = st.text(alphabet="abcXYZ019._-é", min_size=1, max_size=20)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)
_records = st.none() | st.binary(max_size=40) | st.just(b"r" * ((64 * 1024) + 3))


def _partition(data: st.DataObject, version: int) -> tuple[FetchPartitionResult, dict[str, object]]:
    """A light partition result and the kio keyword arguments of the same fields."""
    aborted = data.draw(st.none() | st.lists(st.tuples(_i64, _i64), max_size=2))
    diverging = data.draw(st.none() | st.tuples(st.integers(0, 2**31 - 1), _i64)) if version >= 12 else None
    fields: dict[str, object] = {
        "partition_index": data.draw(_i32),
        "error_code": data.draw(st.sampled_from(_ERROR_CODES)),
        "high_watermark": data.draw(_i64),
        "last_stable_offset": data.draw(_i64),
        "log_start_offset": data.draw(_i64) if version >= 5 else -1,
        "records": data.draw(_records),
    }
    light = FetchPartitionResult(
        fields["partition_index"],  # type: ignore[arg-type]
        fields["error_code"],  # type: ignore[arg-type]
        fields["high_watermark"],  # type: ignore[arg-type]
        fields["last_stable_offset"],  # type: ignore[arg-type]
        fields["log_start_offset"],  # type: ignore[arg-type]
        None if aborted is None else tuple(AbortedTransaction(*a) for a in aborted),
        fields["records"],
        NO_DIVERGING_EPOCH if diverging is None else EpochEndOffset(*diverging),
    )
    return light, {
        **fields,
        "aborted": aborted,
        "diverging": diverging,
    }


def _kio(
    version: int, error_code: int, session_id: int, rows: list[tuple[str, list[dict[str, object]]]]
) -> object:
    cls = response_class(ApiKey.FETCH, version)
    topic_cls = nested(cls, "FetchableTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    aborted_cls = nested(partition_cls, "AbortedTransaction")
    topics = []
    for name, parts in rows:
        partitions = []
        for f in parts:
            extra: dict[str, object] = {}
            if version >= 5:
                extra["log_start_offset"] = f["log_start_offset"]
            if version >= 11:
                extra["preferred_read_replica"] = -1
            if f["diverging"] is not None:
                epoch, end = f["diverging"]  # type: ignore[misc]
                extra["diverging_epoch"] = nested(partition_cls, "EpochEndOffset")(
                    epoch=epoch, end_offset=end
                )
            aborted = f["aborted"]
            partitions.append(
                build(
                    partition_cls,
                    partition_index=f["partition_index"],
                    error_code=f["error_code"],
                    high_watermark=f["high_watermark"],
                    last_stable_offset=f["last_stable_offset"],
                    aborted_transactions=None
                    if aborted is None
                    else tuple(aborted_cls(producer_id=p, first_offset=o) for p, o in aborted),  # type: ignore[attr-defined]
                    records=f["records"],
                    **extra,
                )
            )
        topics.append(topic_cls(topic=name, partitions=tuple(partitions)))
    top: dict[str, object] = {"error_code": error_code, "session_id": session_id} if version >= 7 else {}
    return build(cls, throttle_time=datetime.timedelta(0), responses=tuple(topics), **top)


@settings(max_examples=examples(30), deadline=None)
@given(data=st.data(), version=st.sampled_from(VERSIONS), correlation_id=_i32)
def test_light_response_encodes_like_kio(data: st.DataObject, version: int, correlation_id: int) -> None:
    error_code = (
        data.draw(st.sampled_from([ErrorCode.none, ErrorCode.fetch_session_id_not_found]))
        if version >= 7
        else ErrorCode.none
    )
    session_id = data.draw(_i32) if version >= 7 else 0
    light_topics = []
    rows = []
    for _ in range(data.draw(st.integers(0, 3))):
        name = data.draw(_names)
        drawn = [_partition(data, version) for _ in range(data.draw(st.integers(0, 3)))]
        light_topics.append(FetchTopicResult(name, tuple(p for p, _ in drawn)))
        rows.append((name, [f for _, f in drawn]))
    light = FetchResponseData(version, error_code, session_id, tuple(light_topics))
    chunks = encode_fetch_response(light, correlation_id)
    assert isinstance(chunks[0], bytearray)
    expected = encode_response(_kio(version, error_code, session_id, rows), correlation_id)
    assert b"".join(bytes(c) for c in chunks) == expected


def test_large_record_sets_are_sent_by_reference() -> None:
    records = memoryview(b"x" * (64 * 1024))
    small = b"y" * 10
    response = FetchResponseData(
        12,
        0,
        5,
        (
            FetchTopicResult(
                "t",
                (
                    FetchPartitionResult(0, 0, 1, 1, 0, None, records),
                    FetchPartitionResult(1, 0, 1, 1, 0, None, small),
                ),
            ),
        ),
    )
    chunks = encode_fetch_response(response, 3)
    assert any(c is records for c in chunks)
    assert not any(c is small for c in chunks)


# -- the replica fetcher's FetchRequest v12 and FetchResponse v12


def _kio_fetch_request(
    replica_id: int,
    session_id: int,
    epoch: int,
    topics: dict[str, list[tuple[int, ...]]],
    forgotten: dict[str, list[int]],
) -> object:
    cls = request_class(ApiKey.FETCH, REPLICA_FETCH_VERSION)
    topic_cls = nested(cls, "FetchTopic")
    part_cls = nested(cls, "FetchPartition")
    forgotten_cls = nested(cls, "ForgottenTopic")
    return build(
        cls,
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=10485760,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(
            topic_cls(
                topic=t,
                partitions=tuple(
                    part_cls(
                        partition=p[0],
                        current_leader_epoch=p[1],
                        fetch_offset=p[2],
                        last_fetched_epoch=p[3],
                        log_start_offset=p[4],
                        partition_max_bytes=p[5],
                    )
                    for p in ps
                ),
            )
            for t, ps in topics.items()
        ),
        forgotten_topics_data=tuple(
            forgotten_cls(topic=t, partitions=tuple(ps)) for t, ps in forgotten.items()
        ),
        rack_id="",
    )


_partition_rows = st.lists(st.tuples(_i32, _i32, _i64, _i32, _i64, _i32), max_size=3)


@settings(max_examples=examples(60), deadline=None)
@given(
    topics=st.dictionaries(_names, _partition_rows, max_size=3),
    forgotten=st.dictionaries(_names, st.lists(_i32, max_size=3), max_size=2),
    replica_id=st.integers(0, 2**31 - 1),
    session_id=_i32,
    epoch=_i32,
    correlation_id=_i32,
    client_id=st.text(max_size=20),
)
def test_replica_fetch_request_matches_kio(
    topics: dict[str, list[tuple[int, ...]]],
    forgotten: dict[str, list[int]],
    replica_id: int,
    session_id: int,
    epoch: int,
    correlation_id: int,
    client_id: str,
) -> None:
    frame = encode_replica_fetch_request(
        correlation_id,
        client_id,
        replica_id=replica_id,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=10485760,
        session_id=session_id,
        session_epoch=epoch,
        topics={t: [ReplicaFetchPartition(*p) for p in ps] for t, ps in topics.items()},
        forgotten=forgotten,
    )
    kio = encode_request(
        _kio_fetch_request(replica_id, session_id, epoch, topics, forgotten), correlation_id, client_id
    )
    assert frame == kio


@settings(max_examples=examples(30), deadline=None)
@given(data=st.data(), correlation_id=_i32)
def test_replica_fetch_response_decodes_like_kio(data: st.DataObject, correlation_id: int) -> None:
    """Every field kio decodes from a v12 frame, with records as views of the frame; every
    truncation of the frame raises InvalidRequestError."""
    rows = [
        (
            data.draw(_names),
            [_partition(data, REPLICA_FETCH_VERSION)[1] for _ in range(data.draw(st.integers(0, 3)))],
        )
        for _ in range(data.draw(st.integers(0, 3)))
    ]
    frame = encode_response(_kio(REPLICA_FETCH_VERSION, ErrorCode.none, 17, rows), correlation_id)[4:]
    got_id, light = decode_replica_fetch_response(frame)
    _, expected = decode_response(ApiKey.FETCH, REPLICA_FETCH_VERSION, frame)
    assert got_id == correlation_id
    assert (light.error_code, light.session_id, light.throttle_time) == (
        expected.error_code,  # type: ignore[attr-defined]
        expected.session_id,  # type: ignore[attr-defined]
        expected.throttle_time,  # type: ignore[attr-defined]
    )
    assert len(light.responses) == len(expected.responses)  # type: ignore[attr-defined]
    for lt, et in zip(light.responses, expected.responses, strict=True):  # type: ignore[attr-defined]
        assert lt.topic == et.topic
        assert len(lt.partitions) == len(et.partitions)
        for lp, ep in zip(lt.partitions, et.partitions, strict=True):
            assert (lp.partition_index, lp.error_code, lp.high_watermark, lp.last_stable_offset) == (
                ep.partition_index,
                ep.error_code,
                ep.high_watermark,
                ep.last_stable_offset,
            )
            assert (lp.log_start_offset, lp.preferred_read_replica) == (
                ep.log_start_offset,
                ep.preferred_read_replica,
            )
            assert (None if lp.records is None else bytes(lp.records)) == ep.records
            assert lp.aborted_transactions == (
                None
                if ep.aborted_transactions is None
                else tuple(AbortedTransaction(a.producer_id, a.first_offset) for a in ep.aborted_transactions)
            )
            if ep.diverging_epoch is None or ep.diverging_epoch == nested(type(ep), "EpochEndOffset")():
                assert lp.diverging_epoch is None or (
                    lp.diverging_epoch.epoch,
                    lp.diverging_epoch.end_offset,
                ) == (-1, -1)
            else:
                assert (lp.diverging_epoch.epoch, lp.diverging_epoch.end_offset) == (
                    ep.diverging_epoch.epoch,
                    ep.diverging_epoch.end_offset,
                )
    for cut in range(0, len(frame), max(1, len(frame) // 40)):
        with pytest.raises(InvalidRequestError):
            decode_replica_fetch_response(frame[:cut])


@settings(max_examples=examples(60), deadline=None)
@given(
    topics=st.dictionaries(_names, _partition_rows, max_size=3),
    forgotten=st.dictionaries(_names, st.lists(_i32, max_size=3), max_size=2),
    replica_id=st.integers(-1, 2**31 - 1),
    session_id=_i32,
    epoch=_i32,
)
def test_fetch_request_v12_decodes_like_kio(
    topics: dict[str, list[tuple[int, ...]]],
    forgotten: dict[str, list[int]],
    replica_id: int,
    session_id: int,
    epoch: int,
) -> None:
    """The leader's fast decoder reads kio's fields from a v12 body; any truncation, trailing
    byte or tagged field (``cluster_id``) makes it hand the body to the general decoder (None)."""
    entity = _kio_fetch_request(replica_id, session_id, epoch, topics, forgotten)
    frame = encode_request(entity, 1, "c")[4:]
    offset = 2 + 2 + 4 + 2 + 1 + 1  # api key, version, correlation id, client id "c", header tags
    expected = decode_request_body(ApiKey.FETCH, REPLICA_FETCH_VERSION, frame, offset)
    got = decode_fetch_request_v12_fast(frame, offset)
    assert got is not None
    for name in (
        "replica_id",
        "max_wait",
        "min_bytes",
        "max_bytes",
        "isolation_level",
        "session_id",
        "session_epoch",
        "rack_id",
    ):
        assert getattr(got, name) == getattr(expected, name), name
    assert [
        (
            t.topic,
            [
                (
                    p.partition,
                    p.current_leader_epoch,
                    p.fetch_offset,
                    p.last_fetched_epoch,
                    p.log_start_offset,
                    p.partition_max_bytes,
                )
                for p in t.partitions
            ],
        )
        for t in got.topics
    ] == [
        (
            t.topic,
            [
                (
                    p.partition,
                    p.current_leader_epoch,
                    p.fetch_offset,
                    p.last_fetched_epoch,
                    p.log_start_offset,
                    p.partition_max_bytes,
                )
                for p in t.partitions
            ],
        )
        for t in expected.topics  # type: ignore[attr-defined]
    ]
    assert [(t.topic, tuple(t.partitions)) for t in got.forgotten_topics_data] == [
        (t.topic, tuple(t.partitions))
        for t in expected.forgotten_topics_data  # type: ignore[attr-defined]
    ]
    assert decode_fetch_request_v12_fast(frame + b"\x00", offset) is None
    for cut in range(offset, len(frame), max(1, (len(frame) - offset) // 20)):
        assert decode_fetch_request_v12_fast(frame[:cut], offset) is None
    with_cluster_id = frame[:-1] + b"\x01\x00\x02\x01\x00"  # tag 0 (cluster_id), 2 bytes: ""
    assert decode_fetch_request_v12_fast(with_cluster_id, offset) is None
