"""isolation.level=read_committed in the Fetcher (pure logic: fetched data is built here with
``encode_batch`` and ``end_txn_marker_batch``; nothing is sent): aborted transactions (the
response's AbortedTransactions, Java ``CompletedFetch``'s per-producer rule) and control batches
never reach the caller and the position moves past them; read_uncommitted returns all data.

Every test runs on ``collect_fetch`` and on ``collect_columns`` (both decode paths; CI runs the
unit tests again with KAFKALITE_PURE_PYTHON=1 for the pure-Python twins)."""

from __future__ import annotations

import pytest

from spark_kafkalite.client.config import parse_config
from spark_kafkalite.client.consumer.completed_fetch import AbortedTransactions
from spark_kafkalite.client.consumer.fetcher import CompletedFetch, Fetcher
from spark_kafkalite.client.consumer.kafka_consumer import CONSUMER_DEFAULTS
from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from spark_kafkalite.client.metadata import Metadata
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.control_records import (
    ControlRecordType,
    control_record_type,
    end_txn_marker_batch,
)
from spark_kafkalite.protocol.errors import InvalidConfigError
from spark_kafkalite.protocol.record_batch import read_header
from spark_kafkalite.protocol.record_batch_writer import encode_batch

TP = TopicPartition("t", 0)


@pytest.fixture(params=["records", "columns"])
def collect(request):  # type: ignore[no-untyped-def]
    def run(fetcher: Fetcher, max_records: int | None = None) -> list[tuple[int, bytes]]:
        if request.param == "records":
            return [(r.offset, r.value) for r in fetcher.collect_fetch(max_records).get(TP, [])]
        cols = fetcher.collect_columns(max_records).get(TP)
        if cols is None:
            return []
        return list(zip(cols["offset"].to_pylist(), cols["value"].to_pylist(), strict=True))

    return run


def data(base_offset: int, count: int, pid: int = -1, txn: bool = False) -> bytes:
    records = [(None, f"v{base_offset + i}".encode(), 1000 + i, []) for i in range(count)]
    return encode_batch(
        records,
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=0 if pid >= 0 else -1,
        is_transactional=txn,
    )


def marker(offset: int, pid: int, commit: bool) -> bytes:
    return end_txn_marker_batch(pid, 0, commit, 0, 5000, base_offset=offset)


def make_fetcher(isolation: str) -> tuple[Fetcher, SubscriptionState]:
    cfg = parse_config({"bootstrap.servers": "h:1", "isolation.level": isolation}, CONSUMER_DEFAULTS, "test")
    subs = SubscriptionState(OffsetResetStrategy.EARLIEST)
    subs.assign([TP])
    return Fetcher(None, Metadata(cfg), subs, cfg), subs  # type: ignore[arg-type]


def add(
    fetcher: Fetcher, fetch_offset: int, records: bytes, aborted: list[tuple[int, int]] | None, hw: int
) -> None:
    filt = AbortedTransactions(aborted) if aborted is not None else None
    fetcher.buffer.add(CompletedFetch(TP, fetch_offset, 0, hw, 0, hw, records, filt))


def interleaved_log() -> bytes:
    """Offsets 0-1 plain; pid 7's transaction (2-3 and 6-7) aborted by the marker at 8; pid 9's
    (4-5) committed at 9; pid 7's next transaction (10-11) committed at 12; 13 plain."""
    return b"".join(
        [
            data(0, 2),
            data(2, 2, pid=7, txn=True),
            data(4, 2, pid=9, txn=True),
            data(6, 2, pid=7, txn=True),
            marker(8, 7, commit=False),
            marker(9, 9, commit=True),
            data(10, 2, pid=7, txn=True),
            marker(12, 7, commit=True),
            data(13, 1),
        ]
    )


def test_read_committed_skips_aborted_batches_and_markers(collect) -> None:  # type: ignore[no-untyped-def]
    fetcher, subs = make_fetcher("read_committed")
    subs.seek(TP, 0)
    add(fetcher, 0, interleaved_log(), aborted=[(7, 2)], hw=14)
    got = collect(fetcher)
    # pid 7's batches after its abort marker (txn C, 10-11) are committed data again
    assert [o for o, _ in got] == [0, 1, 4, 5, 10, 11, 13]
    assert got[2] == (4, b"v4")
    assert subs.position(TP) == 14


def test_read_uncommitted_returns_aborted_data_but_no_markers(collect) -> None:  # type: ignore[no-untyped-def]
    fetcher, subs = make_fetcher("read_uncommitted")
    subs.seek(TP, 0)
    add(fetcher, 0, interleaved_log(), aborted=None, hw=14)
    assert [o for o, _ in collect(fetcher)] == [0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 13]
    assert subs.position(TP) == 14


def test_position_moves_past_a_fetch_of_only_aborted_data_and_markers(collect) -> None:  # type: ignore[no-untyped-def]
    fetcher, subs = make_fetcher("read_committed")
    subs.seek(TP, 2)
    records = data(2, 3, pid=4, txn=True) + marker(5, 4, commit=False) + marker(6, 5, commit=True)
    add(fetcher, 2, records, aborted=[(4, 2)], hw=7)
    assert collect(fetcher) == []
    assert subs.position(TP) == 7


def test_aborted_transactions_from_a_later_first_offset_do_not_hide_earlier_batches(collect) -> None:  # type: ignore[no-untyped-def]
    # pid 3 committed a transaction at 0-1 (marker 2), then an aborted one starts at 3.
    fetcher, subs = make_fetcher("read_committed")
    subs.seek(TP, 0)
    records = (
        data(0, 2, pid=3, txn=True)
        + marker(2, 3, commit=True)
        + data(3, 2, pid=3, txn=True)
        + marker(5, 3, commit=False)
    )
    add(fetcher, 0, records, aborted=[(3, 3)], hw=6)
    assert [o for o, _ in collect(fetcher)] == [0, 1]
    assert subs.position(TP) == 6


def test_fetch_starting_inside_an_aborted_transaction_and_max_records(collect) -> None:  # type: ignore[no-untyped-def]
    # The fetch starts at 3 inside pid 8's aborted transaction (first offset 1): the entry's
    # first offset is below the fetch offset, it still applies; records are handed out 2 at a time.
    fetcher, subs = make_fetcher("read_committed")
    subs.seek(TP, 3)
    records = (
        data(1, 3, pid=8, txn=True)
        + data(4, 3)
        + data(7, 2, pid=8, txn=True)
        + marker(9, 8, commit=False)
        + data(10, 1, pid=8, txn=True)
    )
    add(fetcher, 3, records, aborted=[(8, 1)], hw=11)
    assert [o for o, _ in collect(fetcher, 2)] == [4, 5]
    assert [o for o, _ in collect(fetcher, 2)] == [6, 10]
    assert subs.position(TP) == 11


def test_non_transactional_batches_of_an_aborted_producer_id_are_kept() -> None:
    filt = AbortedTransactions([(5, 0)])
    plain = data(0, 2, pid=5, txn=False)  # idempotent, not transactional
    assert not filt.is_aborted(plain, 0, read_header(plain))
    txn = data(2, 2, pid=5, txn=True)
    assert filt.is_aborted(txn, 0, read_header(txn))


def test_marker_batch_layout() -> None:
    raw = marker(42, 11, commit=True)
    header = read_header(raw)
    assert header.is_control and header.is_transactional
    assert (header.base_offset, header.producer_id, header.base_sequence, header.records_count) == (
        42,
        11,
        -1,
        1,
    )
    assert control_record_type(raw, 0, header) == ControlRecordType.COMMIT
    abort = marker(0, 1, commit=False)
    assert control_record_type(abort, 0, read_header(abort)) == ControlRecordType.ABORT


def test_unknown_isolation_level_is_a_config_error() -> None:
    with pytest.raises(InvalidConfigError, match="isolation.level"):
        make_fetcher("read_most")


def test_fetch_ahead_stops_at_the_last_stable_offset_under_read_committed() -> None:
    fetcher, subs = make_fetcher("read_committed")
    subs.seek(TP, 0)
    fetcher.buffer.add(CompletedFetch(TP, 0, 0, 10, 0, 3, data(0, 3), AbortedTransactions([])))
    assert fetcher._fetch_ahead_offset(fetcher.buffer.by_partition()[TP]) is None  # 3 = LSO < HW 10
