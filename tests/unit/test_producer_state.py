"""Broker-side idempotence (KIP-98): the ProducerAppendInfo rules, dedup of the last 5 batches,
snapshots + header replay across restarts and truncation, follower updates, expiry."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.log.log_config import LogConfig
from broker.log.producer_state_entry import (
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerStateEntry,
    check_client_batch,
    in_sequence,
    last_sequence,
)
from broker.log.producer_state_manager import (
    parse_snapshot_file_name,
    snapshot_file_name,
)
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceNumberError,
)
from spark_kafkalite.protocol.record_batch import decode_batches, read_header
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(30)

INT_MAX = 2**31 - 1


def batch(pid: int, epoch: int, seq: int, n: int = 3, tag: bytes = b"x", ts: int | None = None) -> bytearray:
    now = int(time.time() * 1000) if ts is None else ts
    return bytearray(
        encode_batch(
            [(None, tag + b"%d" % i, now, []) for i in range(n)],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
    )


def entry_with(epoch: int, *ranges: tuple[int, int]) -> ProducerStateEntry:
    e = ProducerStateEntry(7)
    for i, (first, last) in enumerate(ranges):
        e.add_batch(epoch, BatchMetadata(first, last, i * 10, i * 10 + last - first, 0))
    return e


# -- pure rules ---------------------------------------------------------------------------------


def test_sequence_arithmetic_wraps_at_int_max() -> None:
    assert last_sequence(0, 4) == 4
    assert last_sequence(INT_MAX, 0) == INT_MAX
    assert last_sequence(INT_MAX - 1, 3) == 1  # MAX-1, MAX, 0, 1
    assert in_sequence(4, 5) and in_sequence(INT_MAX, 0)
    assert not in_sequence(4, 6) and not in_sequence(4, 4)


def test_unknown_producer_accepts_any_sequence() -> None:
    assert check_client_batch(None, read_header(batch(7, 0, 42))) is None
    assert check_client_batch(None, read_header(batch(7, 3, 0))) is None


def test_in_sequence_batch_is_accepted_and_gap_is_out_of_order() -> None:
    entry = entry_with(0, (0, 2))
    assert check_client_batch(entry, read_header(batch(7, 0, 3))) is None
    with pytest.raises(OutOfOrderSequenceNumberError):
        check_client_batch(entry, read_header(batch(7, 0, 4)))
    with pytest.raises(OutOfOrderSequenceNumberError):
        check_client_batch(entry, read_header(batch(7, 0, 1)))  # overlaps, not a retained batch


def test_duplicate_of_any_retained_batch_returns_its_metadata() -> None:
    entry = entry_with(0, (0, 2), (3, 5), (6, 8))
    dup = check_client_batch(entry, read_header(batch(7, 0, 3)))
    assert dup is not None and (dup.first_seq, dup.last_seq, dup.first_offset) == (3, 5, 10)
    # same sequence, other epoch: not a duplicate; a new epoch must start at 0
    with pytest.raises(OutOfOrderSequenceNumberError):
        check_client_batch(entry, read_header(batch(7, 1, 3)))


def test_epoch_rules() -> None:
    entry = entry_with(2, (0, 2))
    with pytest.raises(InvalidProducerEpochError):
        check_client_batch(entry, read_header(batch(7, 1, 3)))
    assert check_client_batch(entry, read_header(batch(7, 3, 0))) is None  # bumped epoch from 0
    with pytest.raises(OutOfOrderSequenceNumberError):
        check_client_batch(entry, read_header(batch(7, 3, 5)))


def test_negative_sequence_with_producer_id_is_invalid_record() -> None:
    with pytest.raises(InvalidRecordError):
        check_client_batch(None, read_header(batch(7, 0, -1)))


def test_snapshot_file_names() -> None:
    assert snapshot_file_name(1234) == "00000000000000001234.snapshot"
    assert parse_snapshot_file_name("00000000000000001234.snapshot") == 1234
    assert parse_snapshot_file_name("00000000000000001234.log") is None


# -- in the log ------------------------------------------------------------------------------------


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "t-0"


def open_log(d: Path, clean: bool = True, **cfg: int) -> UnifiedLog:
    return UnifiedLog(d, LogConfig(**cfg), had_clean_shutdown=clean)


def test_leader_dedups_retry_and_keeps_offsets(log_dir: Path) -> None:
    log = open_log(log_dir)
    assert log.append_as_leader(batch(7, 0, 0), 0).first_offset == 0
    assert log.append_as_leader(batch(7, 0, 3), 0).first_offset == 3
    dup = log.append_as_leader(batch(7, 0, 0), 0)
    assert (dup.first_offset, dup.last_offset, dup.records_count) == (0, 2, 0)
    assert log.log_end_offset == 6
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(batch(7, 0, 9), 0)
    assert log.log_end_offset == 6
    # non-idempotent batches are untouched by producer state
    assert log.append_as_leader(batch(-1, -1, -1), 0).first_offset == 6
    assert len(list(decode_batches(log.read(0, 1 << 20).records))) == 3


def test_only_last_five_batches_are_deduplicated(log_dir: Path) -> None:
    log = open_log(log_dir)
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        log.append_as_leader(batch(7, 0, i * 3), 0)
    assert log.append_as_leader(batch(7, 0, 3), 0).records_count == 0  # 2nd batch: retained
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(batch(7, 0, 0), 0)  # 1st batch fell out of the window


def test_state_survives_clean_restart_via_snapshot(log_dir: Path) -> None:
    log = open_log(log_dir)
    for i in range(3):
        log.append_as_leader(batch(7, 0, i * 3), 0)
    log.close()
    assert (log_dir / snapshot_file_name(9)).exists()
    log = open_log(log_dir)
    assert log.append_as_leader(batch(7, 0, 0), 0).first_offset == 0  # oldest retained batch
    assert log.log_end_offset == 9
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(batch(7, 0, 10), 0)
    assert log.append_as_leader(batch(7, 0, 9), 0).first_offset == 9
    log.close()


def test_state_rebuilt_from_headers_without_snapshot(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_leader(batch(7, 0, 0), 0)
    log.append_as_leader(batch(8, 2, 100), 0)
    for seg in log.segments:
        seg.flush()
    # simulate a crash: no close(), so no snapshot; reopen unclean
    log2 = open_log(log_dir, clean=False)
    assert not list(log_dir.glob("*.snapshot"))
    assert log2.append_as_leader(batch(8, 2, 100), 0).first_offset == 3
    with pytest.raises(InvalidProducerEpochError):
        log2.append_as_leader(batch(8, 1, 103), 0)
    log.close()
    log2.close()


def test_snapshot_at_roll_and_replay_after_it(log_dir: Path) -> None:
    log = open_log(log_dir, segment_bytes=400)
    offsets = [log.append_as_leader(batch(7, 0, i * 3, tag=b"y" * 40), 0).first_offset for i in range(6)]
    assert len(log.segments) > 1
    snaps = sorted(parse_snapshot_file_name(p.name) for p in log_dir.glob("*.snapshot"))
    assert snaps and all(s in [seg.base_offset for seg in log.segments] for s in snaps)
    for seg in log.segments:
        seg.flush()
    log2 = open_log(log_dir, clean=False, segment_bytes=400)  # snapshot at a roll + replay
    assert log2.append_as_leader(batch(7, 0, 15, tag=b"y" * 40), 0).first_offset == offsets[5]
    assert log2.append_as_leader(batch(7, 0, 18), 0).first_offset == log.log_end_offset
    log.close()
    log2.close()


def test_truncation_reloads_state(log_dir: Path) -> None:
    log = open_log(log_dir)
    for i in range(3):
        log.append_as_leader(batch(7, 0, i * 3), 0)
    log.truncate_to(6)  # drops the batch with sequences 6..8
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(batch(7, 0, 9), 0)
    assert log.append_as_leader(batch(7, 0, 6), 0).first_offset == 6  # not a duplicate any more
    log.truncate_fully_and_start_at(100)
    assert log.append_as_leader(batch(7, 0, 50), 0).first_offset == 100  # state forgotten
    log.close()


def test_follower_appends_update_state_for_failover(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "a-0")
    follower = open_log(tmp_path / "b-0")
    leader.append_as_leader(batch(7, 0, 0), 0)
    leader.append_as_leader(batch(7, 0, 3), 0)
    follower.append_as_follower(leader.read(0, 1 << 20).records)
    # the follower becomes leader: a retry of the last batch is still a duplicate
    assert follower.append_as_leader(batch(7, 0, 3), 1).first_offset == 3
    with pytest.raises(OutOfOrderSequenceNumberError):
        follower.append_as_leader(batch(7, 0, 7), 1)
    leader.close()
    follower.close()


def test_expired_producers_are_forgotten(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_leader(batch(7, 0, 0, ts=1000), 0)  # timestamps decades ago
    assert log.producer_state.remove_expired() == 1
    assert log.append_as_leader(batch(7, 0, 40), 0).first_offset == 3  # unknown again: accepted
    log.close()


def test_corrupt_snapshot_falls_back_to_header_replay(log_dir: Path) -> None:
    log = open_log(log_dir)
    for i in range(2):
        log.append_as_leader(batch(7, 0, i * 3), 0)
    log.close()
    snap = log_dir / snapshot_file_name(6)
    data = bytearray(snap.read_bytes())
    data[-1] ^= 0xFF  # CRC mismatch
    snap.write_bytes(bytes(data))
    log = open_log(log_dir)
    assert not snap.exists()  # dropped
    assert log.append_as_leader(batch(7, 0, 3), 0).first_offset == 3  # still deduplicated
    log.close()
