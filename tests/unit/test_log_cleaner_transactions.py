"""Compaction of transactional logs (KIP-98, KIP-534; Kafka's ``CleanedTransactionMetadata`` and
``Cleaner.cleanInto``): the decisions over a corpus of batch shapes, then a log cleaned pass
after pass by an injected clock (aborted data dropped, markers given a delete horizon once their
transaction is gone and removed after it, ``.txnindex`` entries dropped with their data, the
producer's last batch kept as an empty batch that restores its state after a restart)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.log.cleaner_batches import empty_batch, rewrite_batch
from broker.log.cleaner_transactions import (
    BatchRetention,
    CleanedTransactionMetadata,
    LastRecord,
    check_batch_retention,
)
from broker.log.log_cleaner import LogCleaner
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.producer_state_entry import AppendOrigin
from broker.log.segment_files import headers_in, validate_stored_batch
from broker.log.transaction_index import AbortedTxn
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.client.consumer.completed_fetch import AbortedTransactions
from spark_kafkalite.protocol.control_records import (
    ControlRecordType,
    control_record_type,
    end_txn_marker_batch,
)
from spark_kafkalite.protocol.errors import InvalidRecordError
from spark_kafkalite.protocol.record_batch import BatchHeader, decode_batch, read_header, validate_batch
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)

HOUR_MS = 3_600_000
COORD = AppendOrigin.COORDINATOR
NOW = 1000 * HOUR_MS


def data(
    pid: int, seq: int, items: list[tuple[bytes, bytes]], *, txn: bool = True, base: int = 0, ts: int = NOW
) -> bytearray:
    raw = bytearray(
        encode_batch(
            [(k, v, ts, []) for k, v in items],
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq,
            is_transactional=txn,
        )
    )
    raw[0:8] = base.to_bytes(8, "big")
    return raw


def marker(pid: int, commit: bool, epoch: int = 0, base: int = 0, ts: int = NOW) -> bytes:
    return end_txn_marker_batch(pid, epoch, commit, 0, ts, base_offset=base)


def with_horizon(raw: bytes, horizon_ms: int) -> bytes:
    return rewrite_batch(decode_batch(raw), [0], delete_horizon_ms=horizon_ms)


# -- the decisions ---------------------------------------------------------------------------


def test_transaction_metadata_over_a_corpus_of_batch_shapes() -> None:
    aborted_1 = AbortedTxn(1, 0, 3, 5)  # data at 0, ABORT at 3: data still in the log
    aborted_3 = AbortedTxn(3, 2, 5, 6)  # data already dropped by an earlier pass
    txns = CleanedTransactionMetadata([aborted_3, aborted_1])
    txns.cleaned_index = kept = []
    emptied = read_header(empty_batch(read_header(marker(5, True, base=7))))
    corpus: list[tuple[bytes, bool]] = [
        (data(1, 0, [(b"a", b"1")], base=0), True),  # aborted data: discard
        (data(2, 0, [(b"b", b"1")], base=1), False),  # committed data
        (data(-1, -1, [(b"c", b"1")], txn=False, base=2), False),  # plain data
        (marker(1, False, base=3), False),  # ABORT whose data was seen: kept, index entry kept
        (marker(2, True, base=4), False),  # COMMIT whose data was seen: kept
        (marker(3, False, base=5), True),  # ABORT whose data is gone: removable, entry dropped
        (marker(4, True, base=6), True),  # COMMIT with no data left: removable
        (empty_batch(read_header(marker(5, True, base=7))), True),  # emptied control batch
        (data(1, 1, [(b"a", b"2")], base=8), False),  # pid 1's next transaction is not aborted
        (marker(1, True, base=9), False),
        (data(-1, -1, [(b"c", b"2")], txn=False, base=10), False),
    ]
    assert emptied.records_count == 0 and emptied.is_control
    got = []
    for raw, _ in corpus:
        header = read_header(raw)
        if header.is_control:
            got.append(txns.on_control_batch_read(header, control_record_type(raw, 0, header)))
        else:
            got.append(txns.on_batch_read(header))
    assert got == [discard for _, discard in corpus]
    assert kept == [aborted_1]


def _marker_header(*, horizon: int | None = None, epoch: int = 0) -> BatchHeader:
    raw = marker(7, True, epoch=epoch, base=40)
    return read_header(with_horizon(raw, horizon) if horizon is not None else raw)


@pytest.mark.parametrize(
    ("header", "can_discard", "last", "expected"),
    [
        # a removable marker: first pass stores a delete horizon, the batch stays
        (_marker_header(), True, None, (BatchRetention.DELETE_EMPTY, False, True)),
        (_marker_header(horizon=NOW + 1), True, None, (BatchRetention.DELETE_EMPTY, False, True)),
        # ... removed once the horizon has passed
        (_marker_header(horizon=NOW), True, None, (BatchRetention.DELETE, True, True)),
        # a marker still covering data stays whatever its horizon
        (_marker_header(horizon=NOW - 1), False, None, (BatchRetention.DELETE_EMPTY, False, False)),
        # the producer's last record: its current-epoch marker (no data since the epoch bump)
        (
            _marker_header(horizon=NOW - 1, epoch=2),
            True,
            LastRecord(None, 2),
            (BatchRetention.RETAIN_EMPTY, True, True),
        ),
        (
            _marker_header(horizon=NOW - 1, epoch=1),
            True,
            LastRecord(None, 2),
            (BatchRetention.DELETE, True, True),
        ),
        (_marker_header(horizon=NOW - 1), True, LastRecord(99, 0), (BatchRetention.DELETE, True, True)),
        # aborted data: dropped, unless it holds the producer's last data offset
        (read_header(data(7, 0, [(b"k", b"v")], base=40)), True, None, (BatchRetention.DELETE, True, False)),
        (
            read_header(data(7, 0, [(b"k", b"v")], base=40)),
            True,
            LastRecord(40, 0),
            (BatchRetention.RETAIN_EMPTY, True, False),
        ),
        (
            read_header(data(7, 0, [(b"k", b"v")], base=40)),
            False,
            LastRecord(41, 0),
            (BatchRetention.DELETE_EMPTY, False, False),
        ),
        # no producer id: never kept for producer state
        (
            read_header(data(-1, -1, [(b"k", b"v")], txn=False, base=40)),
            False,
            LastRecord(40, 0),
            (BatchRetention.DELETE_EMPTY, False, False),
        ),
    ],
)
def test_batch_retention(
    header: BatchHeader,
    can_discard: bool,
    last: LastRecord | None,
    expected: tuple[BatchRetention, bool, bool],
) -> None:
    last_records = {} if last is None else {header.producer_id: last}
    result = check_batch_retention(header, can_discard, last_records, NOW)
    assert (result.retention, result.discard_records, result.set_delete_horizon) == expected


def test_delete_horizon_and_empty_batches_on_the_wire() -> None:
    raw = marker(7, False, base=40, ts=NOW - 5)
    marked = with_horizon(raw, NOW + HOUR_MS)
    header = validate_stored_batch(marked)
    assert header.delete_horizon_ms == NOW + HOUR_MS and header.base_timestamp == NOW + HOUR_MS
    assert read_header(raw).delete_horizon_ms is None
    assert decode_batch(marked).timestamps_ms == [NOW - 5]  # the record keeps its timestamp
    assert control_record_type(marked, 0, header) == ControlRecordType.ABORT
    # a later rewrite keeps the horizon
    assert read_header(rewrite_batch(decode_batch(marked), [0])).delete_horizon_ms == NOW + HOUR_MS
    # a producer's emptied last batch: header only, offsets / producer fields / sequence kept
    original = data(9, 40, [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")], base=100)
    empty = empty_batch(read_header(original))
    got = validate_stored_batch(empty)
    assert (got.base_offset, got.last_offset, got.records_count) == (100, 102, 0)
    assert (got.producer_id, got.producer_epoch, got.base_sequence, got.is_transactional) == (9, 0, 40, True)
    assert len(decode_batch(empty)) == 0  # readers (our consumer) accept it
    assert validate_batch(empty, strict_counts=False).records_count == 0
    with pytest.raises(InvalidRecordError):
        validate_batch(empty)  # but a producer may not send one


# -- a log cleaned pass after pass -----------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now_ms = NOW

    def __call__(self) -> int:
        return self.now_ms


def _batches(log: UnifiedLog) -> list[BatchHeader]:
    return [h for _, h in headers_in(log.read(log.log_start_offset, 1 << 30).records)]


def _markers(log: UnifiedLog) -> dict[int, BatchHeader]:
    return {h.base_offset: h for h in _batches(log) if h.is_control}


def _read_committed(log: UnifiedLog) -> dict[bytes | None, bytes | None]:
    """What a read_committed consumer gets (our client's filter over the fetched bytes)."""
    info = log.read(0, 1 << 30, max_offset=log.last_stable_offset, include_aborted_txns=True)
    records = info.records
    aborted = AbortedTransactions((t.producer_id, t.first_offset) for t in info.aborted_transactions or [])
    out: dict[bytes | None, bytes | None] = {}
    for pos, header in headers_in(records):
        if aborted.is_aborted(records, pos, header) or header.is_control:
            continue
        batch = decode_batch(records, pos)
        out.update(zip(batch.keys, batch.values, strict=True))
    return out


def test_markers_leave_after_their_transactions_and_delete_horizon(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(cleanup_policy=("compact",), delete_retention_ms=HOUR_MS)
    mgr = LogManager([tmp_path], config, time_ms=clock)
    mgr.startup()
    log = mgr.get_or_create_log("c", 0, uuid.uuid4())
    cleaner = LogCleaner(mgr)
    leader = log.append_as_leader
    leader(data(1, 0, [(b"k1", b"a1")]), 0)  # 0: aborted
    leader(bytearray(marker(1, False)), 0, COORD)  # 1
    leader(data(2, 0, [(b"k1", b"b1"), (b"k2", b"b2")]), 0)  # 2-3: committed, overwritten below
    leader(bytearray(marker(2, True)), 0, COORD)  # 4
    leader(data(2, 2, [(b"k1", b"c1"), (b"k2", b"c2")]), 0)  # 5-6: committed, latest
    leader(bytearray(marker(2, True)), 0, COORD)  # 7
    leader(data(1, 1, [(b"k3", b"d1")]), 0)  # 8: pid 1 commits next time
    leader(bytearray(marker(1, True)), 0, COORD)  # 9
    leader(data(3, 0, [(b"k5", b"idempotent")], txn=False), 0)  # 10: pid 3's only batch
    leader(data(4, 0, [(b"k6", b"e1")]), 0)  # 11: pid 4, committed, then fenced (epoch 1)
    leader(bytearray(marker(4, True)), 0, COORD)  # 12
    leader(bytearray(marker(4, False, epoch=1)), 0, COORD)  # 13: pid 4's last record
    filler = 0

    def write_and_clean() -> None:
        nonlocal filler
        for key in (b"k5", b"k6", b"k9"):  # overwrite pid 3's and pid 4's data, then roll
            leader(data(-1, -1, [(key, b"f%d" % filler)], txn=False), 0)
        filler += 1
        log.roll()
        log.update_high_watermark(log.log_end_offset)
        assert cleaner.clean_log(log) is not None

    txn_entries = [e for seg in log.segments for e in seg.txn_index.entries]
    assert [(e.producer_id, e.first_offset, e.last_offset) for e in txn_entries] == [(1, 0, 1)]
    write_and_clean()  # pass 1: aborted data dropped; markers that cover data seen stay as they are
    horizon = clock.now_ms + HOUR_MS
    marks = _markers(log)
    assert set(marks) == {1, 4, 7, 9, 12, 13}
    # only pid 4's fencing ABORT (an empty transaction) gets its delete horizon at once
    assert {o for o, h in marks.items() if h.delete_horizon_ms is not None} == {13}
    assert marks[13].delete_horizon_ms == horizon
    assert [e for seg in log.segments for e in seg.txn_index.entries] == txn_entries
    assert not any(h.base_offset == 0 for h in _batches(log))
    pid3 = [h for h in _batches(log) if h.producer_id == 3]  # kept empty: the producer's last
    assert [(h.base_offset, h.records_count, h.base_sequence) for h in pid3] == [(10, 0, 0)]

    write_and_clean()  # pass 2: 1 (its data gone), 4 and 12 (their batches emptied) get a horizon
    marks = _markers(log)
    assert {o: h.delete_horizon_ms for o, h in marks.items()} == {
        1: horizon,
        4: horizon,
        7: None,
        9: None,
        12: horizon,
        13: horizon,
    }
    assert [e for seg in log.segments for e in seg.txn_index.entries] == []  # no aborted data left
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []

    clock.now_ms += HOUR_MS - 1
    write_and_clean()  # pass 3: horizon not reached
    assert set(_markers(log)) == {1, 4, 7, 9, 12, 13}
    clock.now_ms += 1
    write_and_clean()  # pass 4: gone, but pid 4's last marker stays (emptied) for its epoch
    marks = _markers(log)
    assert set(marks) == {7, 9, 13}
    assert (marks[13].records_count, marks[13].producer_epoch) == (0, 1)
    expected = {b"k1": b"c1", b"k2": b"c2", b"k3": b"d1", b"k5": b"f3", b"k6": b"f3", b"k9": b"f3"}
    assert _read_committed(log) == expected
    # a new replica fetching the cleaned log accepts its empty and horizon-marked batches
    follower = UnifiedLog(tmp_path / "follower" / "c-0", config, time_ms=clock)
    follower.append_as_follower(log.read(0, 1 << 30).records)
    follower.update_high_watermark(follower.log_end_offset)
    assert _read_committed(follower) == expected
    assert (follower.producer_state.producers[3].last_seq, follower.log_end_offset) == (0, log.log_end_offset)
    follower.close()
    # producer state rebuilt from the cleaned log alone keeps pid 3's epoch and sequence (an
    # emptied marker restores nothing, as in Kafka's ProducerAppendInfo.append)
    for seg in log.segments:
        seg.flush()
    log.close()
    for snapshot in log.dir.glob("*.snapshot"):
        snapshot.unlink()
    again = UnifiedLog(log.dir, config, had_clean_shutdown=False, time_ms=clock)
    state = again.producer_state.producers
    assert (state[3].last_seq, state[3].producer_epoch) == (0, 0)
    again.update_high_watermark(again.log_end_offset)
    assert _read_committed(again) == expected
    again.close()


def test_retention_drops_txn_indexes_and_may_pass_an_open_transaction(tmp_path: Path) -> None:
    """Kafka's ``deleteOldSegments`` stops at the high watermark, not the LSO: the log start may
    pass an open transaction (the LSO becomes the log start), the deleted segments take their
    ``.txnindex`` along, and an abort ending later still hides the rest of the transaction from
    read_committed (its entry starts below the log start, as Kafka keeps it)."""
    config = LogConfig(segment_bytes=300, cleanup_policy=("delete",), retention_ms=-1)
    log = UnifiedLog(tmp_path / "t-0", config)
    pad = b"p" * 120
    log.append_as_leader(data(1, 0, [(b"a", pad)]), 0)  # 0: aborted below
    log.append_as_leader(bytearray(marker(1, False)), 0, COORD)  # 1
    log.append_as_leader(data(2, 0, [(b"b", pad)]), 0)  # 2: stays open across the deletion
    for i in range(6):
        log.append_as_leader(data(-1, -1, [(b"f", pad + b"%d" % i)], txn=False), 0)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 2
    doomed = [seg for seg in log.segments if seg.base_offset <= 2]
    index_files = [seg.txn_index.path for seg in doomed if seg.txn_index.entries]
    assert index_files and all(p.exists() for p in index_files)
    kept_bytes = sum(seg.size_bytes for seg in log.segments if seg not in doomed)
    log.config = LogConfig(
        segment_bytes=300, cleanup_policy=("delete",), retention_ms=-1, retention_bytes=kept_bytes
    )
    assert log.delete_old_segments() == len(doomed)
    assert log.log_start_offset > 2 and not any(p.exists() for p in index_files)
    assert log.last_stable_offset == log.log_start_offset  # the open transaction pins it there
    assert log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset) == []
    log.append_as_leader(data(2, 1, [(b"b", b"late")]), 0)
    log.append_as_leader(bytearray(marker(2, False)), 0, COORD)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.high_watermark
    assert [
        (t.producer_id, t.first_offset)
        for t in log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    ] == [(2, 2)]
    info = log.read(
        log.log_start_offset, 1 << 30, max_offset=log.last_stable_offset, include_aborted_txns=True
    )
    aborted = AbortedTransactions((t.producer_id, t.first_offset) for t in info.aborted_transactions or [])
    visible = []
    for pos, header in headers_in(info.records):
        if not aborted.is_aborted(info.records, pos, header) and not header.is_control:
            visible.extend(decode_batch(info.records, pos).keys)
    assert visible and set(visible) == {b"f"}  # pid 2's late record stays hidden
    log.close()
