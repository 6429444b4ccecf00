"""Fetcher.collect_fetch on fetched record data (pure logic: the responses are built here with
``encode_batch``; nothing is sent): positions, skipping, control batches, stale data, errors.

Every test runs twice: on ``collect_fetch`` (ConsumerRecord lists) and on ``collect_columns``
(Arrow columns decoded straight from the batches, converted back to records for the checks)."""

from __future__ import annotations

import struct

import crc32c
import pyarrow as pa
import pytest
from kio.schema.errors import ErrorCode

from spark_kafkalite.client.config import parse_config
from spark_kafkalite.client.consumer.fetcher import CompletedFetch, Fetcher
from spark_kafkalite.client.consumer.kafka_consumer import CONSUMER_DEFAULTS
from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from spark_kafkalite.client.metadata import Metadata
from spark_kafkalite.client.types import ConsumerRecord, TopicPartition
from spark_kafkalite.protocol.errors import KafkaError, OffsetOutOfRangeError
from spark_kafkalite.protocol.record_batch_writer import encode_batch

TP = TopicPartition("t", 0)

_collect_records = Fetcher.collect_fetch


def _collect_via_columns(self: Fetcher, max_records: int | None = None) -> dict:
    out = {}
    for tp, cols in self.collect_columns(max_records, include_headers=True).items():
        rows = zip(
            cols["offset"].to_pylist(),
            [t // 1000 for t in cols["timestamp"].cast(pa.int64()).to_pylist()],
            cols["timestampType"].to_pylist(),
            cols["key"].to_pylist(),
            cols["value"].to_pylist(),
            cols["headers"].to_pylist(),
            strict=True,
        )
        out[tp] = [
            ConsumerRecord(
                tp.topic, tp.partition, o, ts, tt, k, v, [(h["key"], h["value"]) for h in hs or []]
            )
            for o, ts, tt, k, v, hs in rows
        ]
    return out


@pytest.fixture(autouse=True, params=["records", "columns"])
def collect_mode(request, monkeypatch):  # type: ignore[no-untyped-def]
    if request.param == "columns":
        monkeypatch.setattr(Fetcher, "collect_fetch", _collect_via_columns)
    return request.param


def batch(base_offset: int, count: int, ts: int = 1000) -> bytes:
    records = [
        (f"k{base_offset + i}".encode(), f"v{base_offset + i}".encode(), ts + i, [("h", b"1")])
        for i in range(count)
    ]
    return encode_batch(records, base_offset=base_offset)


def control_batch(base_offset: int) -> bytes:
    raw = bytearray(encode_batch([(b"\x00\x00\x00\x01", b"", 0, [])], base_offset=base_offset))
    struct.pack_into(">h", raw, 21, struct.unpack_from(">h", raw, 21)[0] | 0x20)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return bytes(raw)


def make_fetcher(
    reset: OffsetResetStrategy = OffsetResetStrategy.EARLIEST, **config: object
) -> tuple[Fetcher, SubscriptionState, Metadata]:
    cfg = parse_config({"bootstrap.servers": "h:1", **config}, CONSUMER_DEFAULTS, "test")
    subs = SubscriptionState(reset)
    subs.assign([TP])
    md = Metadata(cfg)
    return Fetcher(None, md, subs, cfg), subs, md  # type: ignore[arg-type]


def add(fetcher: Fetcher, fetch_offset: int, records: bytes | None, error: int = 0, hw: int = 100) -> None:
    fetcher.buffer.add(CompletedFetch(TP, fetch_offset, error, hw, 0, hw, records))


def offsets(result: dict[TopicPartition, list[ConsumerRecord]]) -> list[int]:
    return [r.offset for r in result.get(TP, [])]


def test_records_below_the_position_in_the_first_batch_are_skipped() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 3)
    add(fetcher, 3, batch(0, 5) + batch(5, 2))
    result = fetcher.collect_fetch()
    assert offsets(result) == [3, 4, 5, 6]
    first = result[TP][0]
    assert first == ConsumerRecord("t", 0, 3, 1003, 0, b"k3", b"v3", [("h", b"1")])
    assert subs.position(TP) == 7
    assert subs.state(TP).high_watermark == 100


def test_max_records_splits_across_polls() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    add(fetcher, 0, batch(0, 4) + batch(4, 4))
    assert offsets(fetcher.collect_fetch(3)) == [0, 1, 2]
    assert subs.position(TP) == 3
    assert offsets(fetcher.collect_fetch(3)) == [3, 4, 5]
    assert offsets(fetcher.collect_fetch(3)) == [6, 7]
    assert fetcher.collect_fetch(3) == {}
    assert subs.position(TP) == 8


def test_partial_trailing_batch_is_ignored() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    add(fetcher, 0, batch(0, 2) + batch(2, 2)[:-5])
    assert offsets(fetcher.collect_fetch()) == [0, 1]
    assert subs.position(TP) == 2


def test_control_batches_are_skipped_and_passed() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    add(fetcher, 0, batch(0, 2) + control_batch(2) + batch(3, 1))
    assert offsets(fetcher.collect_fetch()) == [0, 1, 3]
    subs.seek(TP, 2)
    add(fetcher, 2, control_batch(2))
    assert fetcher.collect_fetch() == {}
    assert subs.position(TP) == 3


def test_stale_fetch_is_discarded_and_seek_drops_the_rest() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 10)
    add(fetcher, 0, batch(0, 3))  # fetched before a seek to 10
    assert fetcher.collect_fetch() == {}
    assert subs.position(TP) == 10
    add(fetcher, 10, batch(10, 4))
    assert offsets(fetcher.collect_fetch(2)) == [10, 11]
    subs.seek(TP, 0)
    assert fetcher.collect_fetch() == {}  # the remaining 12, 13 belong to the old position
    assert subs.position(TP) == 0


def test_offset_out_of_range_resets_per_policy() -> None:
    fetcher, subs, _ = make_fetcher(OffsetResetStrategy.LATEST)
    subs.seek(TP, 50)
    add(fetcher, 50, None, error=ErrorCode.offset_out_of_range)
    assert fetcher.collect_fetch() == {}
    assert subs.state(TP).reset_strategy is OffsetResetStrategy.LATEST


def test_offset_out_of_range_raises_without_reset_policy() -> None:
    fetcher, subs, _ = make_fetcher(OffsetResetStrategy.NONE)
    subs.seek(TP, 50)
    add(fetcher, 50, None, error=ErrorCode.offset_out_of_range)
    with pytest.raises(OffsetOutOfRangeError) as info:
        fetcher.collect_fetch()
    assert info.value.partitions == {TP: 50}


def test_records_before_an_error_are_returned_first() -> None:
    fetcher, subs, _ = make_fetcher(OffsetResetStrategy.NONE)
    other = TopicPartition("t", 1)
    subs.assign([TP, other])
    subs.seek(TP, 0)
    subs.seek(other, 5)
    add(fetcher, 0, batch(0, 2))
    fetcher.buffer.add(CompletedFetch(other, 5, ErrorCode.offset_out_of_range, 3, 0, 3, None))
    assert offsets(fetcher.collect_fetch()) == [0, 1]
    with pytest.raises(OffsetOutOfRangeError):
        fetcher.collect_fetch()


def test_leader_errors_request_a_metadata_update() -> None:
    fetcher, subs, md = make_fetcher()
    subs.seek(TP, 0)
    md.build_request()
    md.update(_empty_metadata(), 0.0)
    assert not md.update_requested()
    add(fetcher, 0, None, error=ErrorCode.not_leader_or_follower)
    assert fetcher.collect_fetch() == {}
    assert md.update_requested()
    assert subs.position(TP) == 0


def test_fetch_ahead_offset_is_the_end_of_buffered_data() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    add(fetcher, 0, batch(0, 3) + batch(3, 3)[:-1])
    buffered = fetcher.buffer.by_partition()
    assert fetcher._fetch_ahead_offset(buffered[TP]) == 3
    add(fetcher, 3, batch(3, 3), hw=6)
    assert fetcher._fetch_ahead_offset(fetcher.buffer.by_partition()[TP]) is None  # one fetch ahead at most
    assert offsets(fetcher.collect_fetch(4)) == [0, 1, 2, 3]
    # the remaining buffered data ends at the high watermark: no fetch ahead
    assert fetcher._fetch_ahead_offset(fetcher.buffer.by_partition()[TP]) is None
    assert offsets(fetcher.collect_fetch()) == [4, 5]


def _empty_metadata():  # type: ignore[no-untyped-def]
    import datetime

    from kio.schema.metadata.v12 import response as m12

    return m12.MetadataResponse(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id=None, controller_id=-1, topics=()
    )


def garbage_records_batch(base_offset: int) -> bytes:
    """A batch whose header and CRC are valid but whose record bytes cannot be decoded."""
    raw = bytearray(encode_batch([(b"k", b"xxxxxxxxxx", 0, [])], base_offset=base_offset))
    raw[61:] = b"\xff" * (len(raw) - 61)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    return bytes(raw)


def test_corrupt_batch_returns_records_before_it_then_raises_at_its_offset_on_every_poll() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    add(fetcher, 0, batch(0, 1) + garbage_records_batch(1) + batch(2, 1))
    assert offsets(fetcher.collect_fetch()) == [0]
    assert subs.position(TP) == 1
    for _ in range(2):  # the bad batch stays next: no skipping past it
        with pytest.raises(KafkaError, match="CORRUPT"):
            fetcher.collect_fetch()
        assert subs.position(TP) == 1
    subs.seek(TP, 2)  # the application skips the bad batch explicitly
    add(fetcher, 2, batch(2, 1))
    assert offsets(fetcher.collect_fetch()) == [2]


def test_corrupt_batch_keeps_records_of_other_partitions_collected_in_the_same_poll() -> None:
    tp1 = TopicPartition("t", 1)
    fetcher, subs, _ = make_fetcher()
    subs.assign([TP, tp1])
    subs.seek(TP, 0)
    subs.seek(tp1, 0)
    add(fetcher, 0, batch(0, 2))
    fetcher.buffer.add(CompletedFetch(tp1, 0, 0, 100, 0, 100, garbage_records_batch(0)))
    assert offsets(fetcher.collect_fetch()) == [0, 1]
    assert subs.position(TP) == 2
    with pytest.raises(KafkaError, match="CORRUPT"):
        fetcher.collect_fetch()
    assert subs.position(tp1) == 0


def test_switching_between_records_and_columns_mid_batch_keeps_the_position() -> None:
    fetcher, subs, _ = make_fetcher()
    subs.seek(TP, 0)
    add(fetcher, 0, batch(0, 5) + control_batch(5) + batch(6, 4))
    assert offsets(_collect_records(fetcher, 2)) == [0, 1]
    cols = fetcher.collect_columns(4)
    assert cols[TP]["offset"].to_pylist() == [2, 3, 4, 6]
    assert cols[TP]["key"].to_pylist() == [b"k2", b"k3", b"k4", b"k6"]
    assert offsets(_collect_records(fetcher, 1)) == [7]
    assert fetcher.collect_columns()[TP]["offset"].to_pylist() == [8, 9]
    assert subs.position(TP) == 10
