"""Unit tests of the pure client-side KIP-227 FetchSessionHandler (protocol/fetch_session.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchMetadata,
    FetchSessionHandler,
    PartitionFetchData,
    next_epoch,
)


@dataclass
class _P:
    partition_index: int


@dataclass
class _T:
    topic: str
    partitions: list[_P]


@dataclass
class _Resp:
    session_id: int
    responses: list[_T] = field(default_factory=list)
    error_code: int = 0
    throttle_time: int = 0


def resp(session_id: int, *keys: tuple[str, int], error_code: int = 0) -> _Resp:
    by_topic: dict[str, list[_P]] = {}
    for t, p in keys:
        by_topic.setdefault(t, []).append(_P(p))
    return _Resp(session_id, [_T(t, ps) for t, ps in by_topic.items()], error_code)


def pd(offset: int, max_bytes: int = 1000, epoch: int = -1) -> PartitionFetchData:
    return PartitionFetchData(fetch_offset=offset, max_bytes=max_bytes, current_leader_epoch=epoch)


A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_next_epoch_wraps_and_final_stays() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(41) == 42
    assert next_epoch(2**31 - 1) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_metadata_is_full() -> None:
    assert FetchMetadata(0, INITIAL_EPOCH).is_full
    assert FetchMetadata(5, FINAL_EPOCH).is_full
    assert not FetchMetadata(5, 3).is_full
    assert FetchMetadata(5, 3).next_close_existing() == FetchMetadata(5, 0)
    assert FetchMetadata.new_incremental(9) == FetchMetadata(9, 1)


def test_full_then_incremental_then_forget_and_add() -> None:
    h = FetchSessionHandler(1)
    data = h.build({A0: pd(0), A1: pd(10)})
    assert (data.session_id, data.epoch) == (0, 0)
    assert data.is_full and list(data.to_send) == [A0, A1] and data.to_forget == []
    assert h.handle_response(resp(123, A0, A1))
    assert (h.session_id, h.next_epoch) == (123, 1)

    # nothing changed: empty incremental request, still a legal request
    data = h.build({A0: pd(0), A1: pd(10)})
    assert (data.session_id, data.epoch) == (123, 1)
    assert not data.is_full and data.to_send == {} and data.to_forget == []
    assert set(data.session_partitions) == {A0, A1}
    # incremental response with only A1 (it had data)
    assert h.handle_response(resp(123, A1))
    assert h.next_epoch == 2

    # A1 moved, A0 removed, B0 added
    data = h.build({A1: pd(15), B0: pd(7)})
    assert (data.session_id, data.epoch) == (123, 2)
    assert data.to_send == {B0: pd(7), A1: pd(15)}
    assert data.to_forget == [A0]
    assert set(data.session_partitions) == {A1, B0}
    assert h.handle_response(resp(123))
    assert h.next_epoch == 3


def test_altered_fields_other_than_offset_are_resent() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    h.handle_response(resp(5, A0))
    data = h.build({A0: pd(0, max_bytes=2000)})
    assert data.to_send == {A0: pd(0, max_bytes=2000)}
    h.handle_response(resp(5))
    data = h.build({A0: pd(0, max_bytes=2000, epoch=3)})
    assert list(data.to_send) == [A0]


def test_sessionless_broker_keeps_full_fetches() -> None:
    h = FetchSessionHandler(1)
    for _ in range(3):
        data = h.build({A0: pd(0)})
        assert (data.session_id, data.epoch) == (0, 0) and data.is_full
        assert h.handle_response(resp(0, A0))


def test_use_sessions_false_sends_legacy_full_fetches() -> None:
    h = FetchSessionHandler(1, use_sessions=False)
    data = h.build({A0: pd(0)})
    assert (data.session_id, data.epoch) == (0, FINAL_EPOCH)
    assert h.handle_response(resp(77, A0))  # even if the broker offered a session
    assert h.build({A0: pd(0)}).epoch == FINAL_EPOCH


def test_session_id_not_found_restarts_from_initial() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    h.handle_response(resp(9, A0))
    h.build({A0: pd(1)})
    assert not h.handle_response(resp(0, error_code=ErrorCode.fetch_session_id_not_found))
    data = h.build({A0: pd(1)})
    assert (data.session_id, data.epoch) == (0, 0) and data.to_send == {A0: pd(1)}


def test_invalid_epoch_closes_and_reopens() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0), A1: pd(0)})
    h.handle_response(resp(9, A0, A1))
    h.build({A0: pd(1), A1: pd(0)})
    assert not h.handle_response(resp(0, error_code=ErrorCode.invalid_fetch_session_epoch))
    data = h.build({A0: pd(1), A1: pd(0)})
    assert (data.session_id, data.epoch) == (9, 0)
    assert data.is_full and set(data.to_send) == {A0, A1}


def test_topic_id_error_closes_session() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    h.handle_response(resp(9, A0))
    h.build({A0: pd(0)})
    assert not h.handle_response(resp(0, error_code=ErrorCode.fetch_session_topic_id_error))
    assert h.next_metadata == FetchMetadata(9, 0)


def test_disconnect_resets_to_full_fetch() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    h.handle_response(resp(9, A0))
    h.build({A0: pd(3)})
    h.handle_error(ConnectionError("gone"))
    data = h.build({A0: pd(3)})
    assert (data.session_id, data.epoch) == (9, 0) and data.to_send == {A0: pd(3)}


def test_full_response_must_match_request_exactly() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0), A1: pd(0)})
    assert not h.handle_response(resp(9, A0))  # omitted A1
    assert h.next_metadata == FetchMetadata(0, 0)
    h.build({A0: pd(0)})
    assert not h.handle_response(resp(9, A0, B0))  # extra B0
    assert h.next_metadata == FetchMetadata(0, 0)


def test_incremental_response_with_unknown_partition_closes_session() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    h.handle_response(resp(9, A0))
    h.build({A0: pd(0)})
    assert not h.handle_response(resp(9, B0))
    assert h.next_metadata == FetchMetadata(9, 0)


def test_broker_closing_session_in_incremental_response() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    h.handle_response(resp(9, A0))
    data = h.build({})
    assert data.to_forget == [A0] and data.session_partitions == {}
    assert h.handle_response(resp(0))
    assert h.next_metadata == FetchMetadata(0, 0)


def test_close_request() -> None:
    h = FetchSessionHandler(1)
    assert h.close_request() is None
    h.build({A0: pd(0)})
    h.handle_response(resp(9, A0))
    close = h.close_request()
    assert close is not None and (close.session_id, close.epoch) == (9, FINAL_EPOCH) and close.to_send == {}
    assert h.next_metadata == FetchMetadata(0, 0)


def test_epoch_wraps_in_long_session() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    h.handle_response(resp(9, A0))
    h._next_metadata = FetchMetadata(9, 2**31 - 1)
    data = h.build({A0: pd(0)})
    assert data.epoch == 2**31 - 1
    h.handle_response(resp(9))
    assert h.next_epoch == 1


def test_topic_partition_namedtuple_keys_match_response_keys() -> None:
    from spark_kafkalite.client.types import TopicPartition

    h = FetchSessionHandler(1)
    h.build({TopicPartition("a", 0): pd(0)})
    assert h.handle_response(resp(4, ("a", 0)))


def test_throttled_empty_full_response_is_dropped() -> None:
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    r: Any = resp(4)
    r.throttle_time = 100
    assert not h.handle_response(r)
    assert h.next_metadata == FetchMetadata(0, 0)


def test_kio_response_entity() -> None:
    import datetime

    from spark_kafkalite.protocol.api_keys import ApiKey, response_class

    cls = response_class(ApiKey.FETCH, 12)
    mod = __import__(cls.__module__, fromlist=["x"])
    part = mod.PartitionData(
        partition_index=0,
        error_code=ErrorCode.none,
        high_watermark=5,
        last_stable_offset=5,
        log_start_offset=0,
        diverging_epoch=mod.EpochEndOffset(epoch=-1, end_offset=-1),
        current_leader=mod.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
        snapshot_id=mod.SnapshotId(end_offset=-1, epoch=-1),
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=None,
    )
    entity = cls(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=33,
        responses=(mod.FetchableTopicResponse(topic="a", partitions=(part,)),),
    )
    h = FetchSessionHandler(1)
    h.build({A0: pd(0)})
    assert h.handle_response(entity)
    assert h.next_metadata == FetchMetadata(33, 1)


def test_topic_id_responses_resolve_names_from_the_session() -> None:
    import uuid

    from spark_kafkalite.protocol.fetch_session import response_partition_keys

    tid = uuid.uuid4()
    h = FetchSessionHandler(1)
    h.build({A0: PartitionFetchData(0, 100, topic_id=tid)})

    @dataclass
    class _IdTopic:
        topic_id: uuid.UUID
        partitions: list[_P]

    r = _Resp(8, [_IdTopic(tid, [_P(0)])])  # type: ignore[list-item]
    assert list(response_partition_keys(r, h.session_topic_names)) == [A0]
    assert h.handle_response(r)
    assert h.build({A0: PartitionFetchData(0, 100, topic_id=tid)}).can_use_topic_ids
