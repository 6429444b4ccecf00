"""Partition side of transactions (KIP-98): producer state with open transactions, markers and
their epoch checks, the last stable offset, the ``.txnindex`` (append, read_committed
collection, truncation, rebuild), persistence across restarts, and followers."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from broker.log.log_cleaner import LogCleaner
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.ongoing_transactions import CompletedTxn, OngoingTransactions
from broker.log.producer_state_entry import AppendOrigin
from broker.log.segment_files import headers_in
from broker.log.transaction_index import ABORTED_TXN_SIZE, AbortedTxn, TransactionIndex
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.control_records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    ControlRecordType,
    EndTransactionMarker,
    end_txn_marker_batch,
    read_end_txn_marker,
)
from spark_kafkalite.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from spark_kafkalite.protocol.record_batch import decode_batch
from spark_kafkalite.protocol.record_batch_writer import append_record, encode_batch, seal_batch

pytestmark = pytest.mark.timeout(30)

COORD = AppendOrigin.COORDINATOR


def data(pid: int, epoch: int, seq: int, n: int = 2, *, txn: bool = True, pad: int = 0) -> bytearray:
    now = int(time.time() * 1000)
    return bytearray(
        encode_batch(
            [(b"k%d" % i, b"v" * pad + b"%d" % i, now, []) for i in range(n)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            is_transactional=txn,
        )
    )


def marker(pid: int, epoch: int, committed: bool, coordinator_epoch: int = 0) -> bytearray:
    return bytearray(end_txn_marker_batch(pid, epoch, committed, coordinator_epoch, int(time.time() * 1000)))


def open_log(d: Path, clean: bool = True, **cfg: int) -> UnifiedLog:
    return UnifiedLog(d, LogConfig(**cfg), had_clean_shutdown=clean)


def commit_hw(log: UnifiedLog) -> None:
    log.update_high_watermark(log.log_end_offset)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "t-0"


# -- pure pieces ---------------------------------------------------------------------------------


def test_marker_batch_round_trip() -> None:
    raw = end_txn_marker_batch(7, 3, False, 11, 1000)
    assert read_end_txn_marker(raw) == EndTransactionMarker(ControlRecordType.ABORT, 11)
    assert read_end_txn_marker(encode_batch([(b"k", b"v", 1, [])])) is None  # not a control batch
    body = bytearray()
    append_record(body, 0, 0, b"\x00\x00\x00\x01", b"\x00", ())  # COMMIT key, 1-byte value
    bad = seal_batch(
        body,
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
        last_offset_delta=0,
        base_timestamp=1,
        max_timestamp=1,
        producer_id=7,
        producer_epoch=0,
        base_sequence=-1,
        records_count=1,
    )
    with pytest.raises(InvalidRecordError):
        read_end_txn_marker(bad)


def test_ongoing_transactions_lso_rules() -> None:
    txns = OngoingTransactions()
    assert txns.first_unstable_offset() is None
    txns.begin(1, 10)
    txns.begin(2, 15)
    done = CompletedTxn(1, 10, 20, True)
    assert txns.last_stable_offset_for(done) == 15  # producer 2 is still open
    txns.complete(done)
    assert txns.first_unstable_offset() == 10  # marker not replicated yet
    txns.on_high_watermark_updated(21)
    assert txns.first_unstable_offset() == 15
    assert txns.last_stable_offset_for(CompletedTxn(2, 15, 30, False)) == 31


def test_transaction_index_file_rules(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(path, 100)
    assert not path.exists() and index.entries == []
    index.append(AbortedTxn(1, 90, 105, 106))
    index.append(AbortedTxn(2, 101, 110, 111))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(3, 100, 110, 111))  # last offsets must increase
    assert path.stat().st_size == 2 * ABORTED_TXN_SIZE
    assert TransactionIndex(path, 100).entries == index.entries
    found, complete = index.collect_aborted_txns(106, 109)
    assert found == [AbortedTxn(2, 101, 110, 111)] and complete
    index.truncate_to(110)
    assert TransactionIndex(path, 100).entries == [AbortedTxn(1, 90, 105, 106)]
    path.write_bytes(path.read_bytes() + b"\x00")
    assert TransactionIndex(path, 100).corrupt


# -- in the log ----------------------------------------------------------------------------------


def test_transaction_opens_and_commit_moves_lso_once_replicated(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_leader(data(-1, -1, -1, txn=False), 0)  # 0-1
    log.append_as_leader(data(7, 0, 0), 0)  # 2-3 open a transaction
    commit_hw(log)
    assert (log.first_unstable_offset, log.last_stable_offset, log.high_watermark) == (2, 2, 4)
    assert log.read(0, 1 << 20, max_offset=log.last_stable_offset).records  # offsets 0-1 only
    assert len(log.read(0, 1 << 20, max_offset=log.last_stable_offset).records) < len(
        log.read(0, 1 << 20).records
    )
    log.append_as_leader(marker(7, 0, True), 0, COORD)  # 4
    assert log.last_stable_offset == 2  # the marker is not below the HW yet
    commit_hw(log)
    assert (log.first_unstable_offset, log.last_stable_offset) == (None, 5)
    assert log.segments[-1].txn_index.entries == []  # commits are not indexed
    log.close()


def test_leader_checks_of_transactional_producers(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_leader(data(7, 1, 0), 0)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(data(7, 1, 2, txn=False), 0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(marker(7, 1, True), 0)  # a client may not write control batches
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(marker(7, 0, True, coordinator_epoch=5), 0, COORD)
    log.append_as_leader(marker(7, 2, False, coordinator_epoch=5), 0, COORD)  # fencing abort, epoch+1
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_as_leader(marker(7, 2, True, coordinator_epoch=4), 0, COORD)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(data(7, 1, 2), 0)  # the fenced producer
    log.append_as_leader(data(7, 2, 0, txn=False), 0)  # the new epoch, no transaction open
    log.append_as_leader(marker(9, 0, True), 0, COORD)  # empty transaction: nothing changes
    commit_hw(log)
    assert log.last_stable_offset == log.log_end_offset
    log.close()


def test_aborted_transactions_for_read_committed(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_leader(data(1, 0, 0), 0)  # 0-1 txn of producer 1
    log.append_as_leader(data(2, 0, 0), 0)  # 2-3 txn of producer 2
    log.append_as_leader(marker(1, 0, False), 0, COORD)  # 4: abort 1 while 2 is open
    log.append_as_leader(marker(2, 0, True), 0, COORD)  # 5: commit 2
    log.append_as_leader(data(1, 0, 2), 0)  # 6-7 new txn of producer 1
    log.append_as_leader(marker(1, 0, False), 0, COORD)  # 8: abort
    commit_hw(log)
    assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 4, 2), AbortedTxn(1, 6, 8, 9)]
    info = log.read(0, 1 << 20, max_offset=log.last_stable_offset, include_aborted_txns=True)
    assert info.aborted_transactions == [AbortedTxn(1, 0, 4, 2), AbortedTxn(1, 6, 8, 9)]
    later = log.read(5, 1 << 20, max_offset=log.last_stable_offset, include_aborted_txns=True)
    assert later.aborted_transactions == [AbortedTxn(1, 6, 8, 9)]
    assert log.read(0, 1 << 20).aborted_transactions is None  # read_uncommitted
    log.truncate_to(8)  # the second abort goes: its transaction is open again
    assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 4, 2)]
    assert log.first_unstable_offset == 6
    log.close()


def _transactions_across_segments(log: UnifiedLog) -> None:
    """pid 1 aborted across a roll, pid 2 left open in the last segment."""
    log.append_as_leader(data(1, 0, 0, pad=200), 0)  # 0-1
    log.append_as_leader(data(3, 0, 0, txn=False, pad=200), 0)  # 2-3
    log.append_as_leader(marker(1, 0, False), 0, COORD)  # 4
    log.append_as_leader(data(2, 0, 0, pad=200), 0)  # 5-6 stays open
    commit_hw(log)


def test_clean_restart_keeps_open_transaction_and_index(log_dir: Path) -> None:
    log = open_log(log_dir, segment_bytes=600)
    _transactions_across_segments(log)
    assert len(log.segments) > 1
    entries = [e for seg in log.segments for e in seg.txn_index.entries]
    assert entries == [AbortedTxn(1, 0, 4, 5)]
    log.close()
    again = open_log(log_dir, segment_bytes=600)
    again.update_high_watermark(again.log_end_offset)
    assert again.last_stable_offset == 5
    assert [e for seg in again.segments for e in seg.txn_index.entries] == entries
    again.append_as_leader(marker(2, 0, True), 0, COORD)
    commit_hw(again)
    assert again.last_stable_offset == again.log_end_offset
    again.close()


def test_unclean_restart_rebuilds_state_and_lost_or_corrupt_txn_index(log_dir: Path) -> None:
    log = open_log(log_dir, segment_bytes=600)
    _transactions_across_segments(log)
    entries = [e for seg in log.segments for e in seg.txn_index.entries]
    holder = next(seg for seg in log.segments if seg.txn_index.entries)
    for seg in log.segments:
        seg.flush()
    txn_path = holder.txn_index.path
    for path in log_dir.glob("*.snapshot"):
        path.unlink()  # a crash before any snapshot
    txn_path.unlink()  # and the index lost with the offset index of its segment
    holder.index.path.unlink()
    again = open_log(log_dir, clean=False, segment_bytes=600)
    again.update_high_watermark(again.log_end_offset)
    assert [e for seg in again.segments for e in seg.txn_index.entries] == entries
    assert txn_path.exists()
    assert again.last_stable_offset == 5  # producer 2 still open
    again.close()
    txn_path.write_bytes(b"\x01" * (ABORTED_TXN_SIZE - 1))  # corrupt, clean shutdown
    third = open_log(log_dir, segment_bytes=600)
    assert [e for seg in third.segments for e in seg.txn_index.entries] == entries
    third.close()


def test_follower_keeps_the_same_transaction_state(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "a-0")
    follower = open_log(tmp_path / "b-0")
    leader.append_as_leader(data(1, 0, 0), 0)
    leader.append_as_leader(data(2, 0, 0), 0)
    leader.append_as_leader(marker(1, 0, False), 0, COORD)
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    follower.update_high_watermark(follower.log_end_offset)
    assert follower.segments[0].txn_index.entries == [AbortedTxn(1, 0, 4, 2)]
    assert follower.last_stable_offset == 2  # producer 2 open
    with pytest.raises(InvalidTxnStateError):  # promoted: the leader rules apply
        follower.append_as_leader(data(2, 0, 2, txn=False), 1)
    leader.close()
    follower.close()


def test_compaction_drops_aborted_batches_keeps_markers_and_stops_at_the_lso(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=300, cleanup_policy=("compact",))
    mgr = LogManager([tmp_path], config)
    mgr.startup()
    log = mgr.get_or_create_log("c", 0, uuid.uuid4())
    now = int(time.time() * 1000)

    def keyed(pid: int, seq: int, key: bytes, value: bytes, txn: bool = True) -> bytearray:
        return bytearray(
            encode_batch(
                [(key, value, now, [])],
                producer_id=pid,
                producer_epoch=0,
                base_sequence=seq,
                is_transactional=txn,
            )
        )

    log.append_as_leader(keyed(-1, -1, b"k1", b"committed", txn=False), 0)  # 0
    log.append_as_leader(keyed(1, 0, b"k1", b"aborted"), 0)  # 1: must not shadow offset 0
    log.append_as_leader(keyed(2, 0, b"k2", b"in-txn"), 0)  # 2
    log.append_as_leader(marker(1, 0, False), 0, COORD)  # 3
    log.append_as_leader(marker(2, 0, True), 0, COORD)  # 4
    for i in range(6):  # 5-10: roll segments
        log.append_as_leader(keyed(-1, -1, b"k3", b"x" * 60 + b"%d" % i, txn=False), 0)
    open_at = log.log_end_offset
    log.append_as_leader(keyed(3, 0, b"k3", b"open"), 0)  # an open transaction
    for i in range(6):
        log.append_as_leader(keyed(-1, -1, b"k3", b"y" * 60 + b"%d" % i, txn=False), 0)
    commit_hw(log)
    assert log.last_stable_offset == open_at
    before = [(seg.base_offset, seg.txn_index.entries) for seg in log.segments if seg.txn_index.entries]
    stats = LogCleaner(mgr).clean_log(log)
    assert stats is not None
    seen = {}
    kinds = []
    for _pos, header in headers_in(log.read(0, 1 << 30).records):
        kinds.append((header.base_offset, header.is_control))
        if header.is_control:
            continue
        batch = decode_batch(log.read(header.base_offset, 1 << 20).records, 0, verify_crc=False)
        for o, k, v in zip(batch.offsets, batch.keys, batch.values, strict=True):
            seen.setdefault(k, []).append((o, v))
    assert seen[b"k1"] == [(0, b"committed")]  # the aborted write is gone and shadowed nothing
    assert seen[b"k2"] == [(2, b"in-txn")]
    assert (3, True) in kinds and (4, True) in kinds  # markers kept
    assert any(o == open_at for o, _ in seen[b"k3"])  # nothing at or past the LSO was cleaned
    assert [
        (seg.base_offset, seg.txn_index.entries) for seg in log.segments if seg.txn_index.entries
    ] == before
    mgr.shutdown()
