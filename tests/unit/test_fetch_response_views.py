"""``decode_fetch_response``: record sets are read-only views of the received frame (no copy),
everything else is exactly kio's decode, for every Fetch version the client negotiates; the
bounded scan (issue #14) still refuses hostile frames; a view keeps a connection's reusable
receive buffer from being overwritten."""

from __future__ import annotations

import dataclasses
import datetime
import socket
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from spark_kafkalite.client.connection import Connection, _unexported
from spark_kafkalite.client.requests import CLIENT_API_VERSIONS
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import InvalidRequestError
from spark_kafkalite.protocol.fetch_response import decode_fetch_response, records_spans
from spark_kafkalite.protocol.framing import decode_response, encode_response

FETCH_VERSIONS = range(CLIENT_API_VERSIONS[ApiKey.FETCH][0], CLIENT_API_VERSIONS[ApiKey.FETCH][1] + 1)
BIG = bytes(range(256)) * 400  # 100 KiB: encoded by reference (>= 64 KiB) by encode_response


def _partition(cls: type[Any], index: int, records: bytes | None, error_code: int = 0, **extra: Any) -> Any:
    pd_cls = nested(cls, "PartitionData")
    names = {f.name for f in dataclasses.fields(pd_cls)}
    fields: dict[str, Any] = {
        "partition_index": index,
        "error_code": ErrorCode(error_code),
        "high_watermark": 1000 + index,
        "last_stable_offset": 900 + index,
        "aborted_transactions": None,
        "records": records,
    }
    if "log_start_offset" in names:
        fields["log_start_offset"] = 5 + index
    replica = extra.pop("preferred_read_replica", -1)
    if "preferred_read_replica" in names:
        fields["preferred_read_replica"] = replica
    if "aborted_transactions" in extra:
        aborted = nested(cls, "AbortedTransaction")
        fields["aborted_transactions"] = tuple(
            aborted(producer_id=p, first_offset=o) for p, o in extra.pop("aborted_transactions")
        )
    for name in ("diverging_epoch", "current_leader", "snapshot_id"):
        if name in extra:
            value = extra.pop(name)
            if name in names:
                fields[name] = value(cls)
    assert not extra
    return pd_cls(**fields)


def _response(version: int) -> Any:
    cls = response_class(ApiKey.FETCH, version)
    topic_cls = nested(cls, "FetchableTopicResponse")
    topics = (
        topic_cls(
            topic="orders",
            partitions=(
                _partition(
                    cls,
                    0,
                    b"\x00\x00\x00\x07abc",
                    aborted_transactions=[(42, 7), (43, 9)],
                    preferred_read_replica=3,
                    diverging_epoch=lambda c: nested(c, "EpochEndOffset")(epoch=4, end_offset=77),
                    current_leader=lambda c: nested(c, "LeaderIdAndEpoch")(leader_id=2, leader_epoch=5),
                    snapshot_id=lambda c: nested(c, "SnapshotId")(end_offset=11, epoch=1),
                ),
                _partition(cls, 1, None),  # null records
                _partition(cls, 2, b""),  # empty records
                _partition(cls, 3, None, error_code=6, aborted_transactions=[]),  # not_leader
                _partition(cls, 4, BIG),
            ),
        ),
        topic_cls(topic="empty-topic", partitions=()),
        topic_cls(topic="t2", partitions=(_partition(cls, 0, b"\x01" * 3, preferred_read_replica=1),)),
    )
    names = {f.name for f in dataclasses.fields(cls)}
    fields: dict[str, Any] = {"throttle_time": datetime.timedelta(milliseconds=0), "responses": topics}
    if "session_id" in names:
        fields.update(error_code=ErrorCode(0), session_id=12345)
    return cls(**fields)


def _frame(version: int) -> tuple[bytearray, memoryview]:
    """A received frame as ``Connection.read_frames`` hands it out: a read-only view of a bytearray."""
    buf = bytearray(encode_response(_response(version), 99)[4:])
    return buf, memoryview(buf).toreadonly()


def _as_bytes(response: Any) -> Any:
    topics = []
    for topic in response.responses:
        parts = tuple(
            dataclasses.replace(pd, records=bytes(pd.records)) if isinstance(pd.records, memoryview) else pd
            for pd in topic.partitions
        )
        topics.append(dataclasses.replace(topic, partitions=parts))
    return dataclasses.replace(response, responses=tuple(topics))


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_records_are_views_of_the_frame_and_all_else_is_kio_decode(version: int) -> None:
    buf, frame = _frame(version)
    expected_id, expected = decode_response(ApiKey.FETCH, version, frame)
    correlation_id, response = decode_fetch_response(version, frame)
    assert correlation_id == expected_id == 99
    assert _as_bytes(response) == expected
    parts = response.responses[0].partitions
    for pd in (parts[0], parts[4], response.responses[2].partitions[0]):
        assert isinstance(pd.records, memoryview) and pd.records.readonly
        assert pd.records.obj is buf  # a view of the received bytes, not a copy
    assert bytes(parts[0].records) == b"\x00\x00\x00\x07abc" and bytes(parts[4].records) == BIG
    assert parts[1].records is None and parts[3].records is None and parts[3].error_code == 6
    assert parts[2].records == b"" and not isinstance(parts[2].records, memoryview)
    assert parts[0].aborted_transactions == expected.responses[0].partitions[0].aborted_transactions
    if version >= 11:
        assert parts[0].preferred_read_replica == 3
    if version >= 12:
        assert parts[0].diverging_epoch.end_offset == 77 and parts[0].current_leader.leader_id == 2
        assert parts[0].snapshot_id.end_offset == 11
    if version >= 7:
        assert response.session_id == 12345


@pytest.mark.parametrize("version", [4, 12])
def test_a_response_without_record_bytes_is_decoded_as_is(version: int) -> None:
    cls = response_class(ApiKey.FETCH, version)
    response = dataclasses.replace(
        _response(version),
        responses=(nested(cls, "FetchableTopicResponse")(topic="t", partitions=(_partition(cls, 0, None),)),),
    )
    frame = encode_response(response, 5)[4:]
    assert decode_fetch_response(version, frame) == decode_response(ApiKey.FETCH, version, frame)


@pytest.mark.parametrize("version", [4, 11, 12])
def test_hostile_lengths_and_counts_are_refused_before_decoding(version: int) -> None:
    _buf, frame = _frame(version)
    spans = records_spans(version, frame)
    assert [n for _f, _d, n in spans] == [7, -1, 0, -1, len(BIG), 3]
    field = spans[0][0]
    bad = bytearray(frame)
    if version >= 12:  # compact length: uvarint 0x7FFFFFFF + 1
        bad[field : field + 1] = b"\x80\x80\x80\x80\x08"
    else:
        struct.pack_into(">i", bad, field, 0x7FFFFFF0)
    with pytest.raises(InvalidRequestError, match="records"):
        decode_fetch_response(version, bytes(bad))
    huge_count = bytearray(frame)
    # the responses array count follows throttle_time (+ error_code, session_id from v7)
    pos = 4 + (1 if version >= 12 else 0) + 4 + (6 if version >= 7 else 0)
    if version >= 12:
        huge_count[pos : pos + 1] = b"\xff\xff\xff\xff\x0f"
    else:
        struct.pack_into(">i", huge_count, pos, 0x7FFFFFFE)
    with pytest.raises(InvalidRequestError):
        decode_fetch_response(version, bytes(huge_count))
    with pytest.raises(InvalidRequestError):
        decode_fetch_response(version, bytes(frame)[:-3])  # truncated


def test_a_records_view_keeps_the_connections_buffer_from_reuse() -> None:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    conn = Connection(1, "127.0.0.1", 0)
    conn.sock = ours

    def read_one(payload: bytes) -> memoryview:
        peer.sendall(struct.pack(">i", len(payload)) + payload)
        frames: list[memoryview] = []
        while not frames:
            frames = conn.read_frames()
        return frames[0]

    try:
        payload = encode_response(_response(12), 7)[4:]
        frame = read_one(payload)
        first_buf = frame.obj
        _, response = decode_fetch_response(12, frame)
        records = response.responses[0].partitions[4].records
        del frame, response  # only the records view is left
        assert records.obj is first_buf and not _unexported(first_buf)
        other = encode_response(_response(11), 8)[4:]
        second = read_one(other + b"\x00" * (len(payload) - len(other)))  # same size class
        assert second.obj is not first_buf  # the buffer with live records was not reused
        assert bytes(records) == BIG
        spare = second.obj
        del records
        assert _unexported(first_buf)  # the last view released the export
        _, held = decode_fetch_response(11, second)
        del second
        third = read_one(payload)
        assert third.obj is not spare  # held's records still view the spare
        assert bytes(held.responses[0].partitions[4].records) == BIG
        spare = third.obj
        del held, third
        fourth = read_one(payload)
        assert fourth.obj is spare  # no view alive: reused
        _, again = decode_fetch_response(12, fourth)
        assert bytes(again.responses[0].partitions[4].records) == BIG
    finally:
        peer.close()
        ours.close()
