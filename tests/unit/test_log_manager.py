"""LogManager: startup/shutdown, clean vs unclean restarts, recovery, topics_on_disk, delete_log."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from broker.log.checkpoints import read_offset_checkpoint
from broker.log.log_config import LogConfig
from broker.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from broker.log.log_segment import LogSegment, log_file_name
from spark_kafkalite.protocol.record_batch import decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=256)


def make_batch(n: int, tag: int = 0) -> bytearray:
    return bytearray(
        encode_batch([(None, tag.to_bytes(4, "big") + bytes(40), 1000 + i, []) for i in range(n)])
    )


def offsets_of(records: bytes) -> list[int]:
    return [o for b in decode_batches(records) for o in b.offsets]


def count_recover_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = LogSegment.recover

    def counting(self: LogSegment) -> int:
        calls.append(self.base_offset)
        return original(self)

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls


def populate(log_dir: Path, topics: dict[str, int], batches: int = 30) -> dict[str, uuid.UUID]:
    ids = {t: uuid.uuid4() for t in topics}
    mgr = LogManager([log_dir], CONFIG)
    mgr.startup()
    for topic, partitions in topics.items():
        for p in range(partitions):
            log = mgr.get_or_create_log(topic, p, ids[topic])
            for i in range(batches):
                log.append_as_leader(make_batch(3, tag=i), 0)
            log.update_high_watermark(log.log_end_offset)
    mgr.shutdown()
    return ids


def test_clean_restart_skips_recovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ids = populate(tmp_path, {"a.b-c_d": 2, "x": 1})
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {
        ("a.b-c_d", 0): 90,
        ("a.b-c_d", 1): 90,
        ("x", 0): 90,
    }
    calls = count_recover_calls(monkeypatch)
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    assert calls == []
    assert mgr.had_clean_shutdown
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert set(mgr.all_logs()) == {("a.b-c_d", 0), ("a.b-c_d", 1), ("x", 0)}
    assert mgr.topics_on_disk() == {"a.b-c_d": (ids["a.b-c_d"], 2), "x": (ids["x"], 1)}
    log = mgr.get_log("a.b-c_d", 1)
    assert log is not None
    assert log.log_end_offset == 90 and log.high_watermark == 90 and log.recovered_segments == 0
    assert len(log.segments) > 1
    assert offsets_of(log.read(0, 10**7).records) == list(range(90))
    assert log.append_as_leader(make_batch(1), 1).first_offset == 90
    mgr.shutdown()


def test_unclean_restart_recovers_and_truncates_torn_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(tmp_path, {"t": 1})
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    (tmp_path / "recovery-point-offset-checkpoint").unlink()
    part = tmp_path / "t-0"
    last = sorted(part.glob("*.log"))[-1]
    good_size = last.stat().st_size
    torn = bytearray(encode_batch([(None, b"lost", 1, [])]))
    with open(last, "ab") as f:
        f.write(torn[: len(torn) - 3])
    calls = count_recover_calls(monkeypatch)
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    assert not mgr.had_clean_shutdown
    log = mgr.get_log("t", 0)
    assert log is not None
    assert len(calls) == len(log.segments)  # no recovery point: every segment is scanned
    assert last.stat().st_size == good_size
    assert log.log_end_offset == 90
    assert offsets_of(log.read(0, 10**7).records) == list(range(90))
    mgr.shutdown()


def test_unclean_restart_from_recovery_point_drops_segments_after_corruption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(tmp_path, {"t": 1}, batches=60)
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    part = tmp_path / "t-0"
    logs = sorted(part.glob("*.log"))
    assert len(logs) >= 4
    # recovery point in the middle: only segments from the one containing it are scanned
    bases = [int(p.name[:20]) for p in logs]
    rp = bases[-3] + 1
    (tmp_path / "recovery-point-offset-checkpoint").write_text(f"0\n1\nt 0 {rp}\n")
    # corrupt a batch CRC in the second-to-last segment (flip a byte in the first batch's records)
    victim = logs[-2]
    raw = bytearray(victim.read_bytes())
    raw[100] ^= 0x55
    victim.write_bytes(raw)
    calls = count_recover_calls(monkeypatch)
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    log = mgr.get_log("t", 0)
    assert log is not None
    assert calls == [bases[-3], bases[-2]]
    assert not logs[-1].exists()  # segment after the corrupt one is gone
    assert victim.stat().st_size == 0
    assert log.log_end_offset == bases[-2]
    assert offsets_of(log.read(0, 10**7).records) == list(range(bases[-2]))
    assert log.append_as_leader(make_batch(2), 1).first_offset == bases[-2]
    mgr.shutdown()


def test_clean_marker_but_partial_tail_is_still_repaired(tmp_path: Path) -> None:
    populate(tmp_path, {"t": 1})
    last = sorted((tmp_path / "t-0").glob("*.log"))[-1]
    size = last.stat().st_size
    with open(last, "ab") as f:
        f.write(b"\x00" * 30)
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    assert last.stat().st_size == size
    assert mgr.get_log("t", 0).log_end_offset == 90  # type: ignore[union-attr]
    mgr.shutdown()


def test_delete_log_and_create(tmp_path: Path) -> None:
    ids = populate(tmp_path, {"t": 3})
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    assert mgr.delete_log("t", 1) is True
    assert mgr.delete_log("t", 1) is False
    assert not (tmp_path / "t-1").exists()
    assert not any(p.name.endswith("-delete") for p in tmp_path.iterdir())
    assert mgr.get_log("t", 1) is None
    assert mgr.topics_on_disk() == {"t": (ids["t"], 3)}  # highest partition on disk + 1
    mgr.delete_log("t", 2)
    mgr.delete_log("t", 0)
    assert mgr.topics_on_disk() == {}
    # recreate with a new topic id: fresh empty log
    new_id = uuid.uuid4()
    log = mgr.get_or_create_log("t", 0, new_id)
    assert log.log_end_offset == 0 and log.topic_id == new_id
    assert mgr.get_or_create_log("t", 0, new_id) is log
    mgr.shutdown()
    # a leftover '-delete' dir (crash mid-delete) is removed on startup, never loaded
    leftover = tmp_path / f"t-5.{uuid.uuid4().hex}-delete"
    leftover.mkdir()
    (leftover / log_file_name(0)).write_bytes(b"junk")
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    assert not leftover.exists()
    assert set(mgr.all_logs()) == {("t", 0)}
    mgr.shutdown()


def test_multiple_log_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    mgr = LogManager(dirs, CONFIG)
    mgr.startup()
    tid = uuid.uuid4()
    for p in range(4):
        mgr.get_or_create_log("t", p, tid).append_as_leader(make_batch(2), 0)
    assert sum(1 for d in dirs for _ in d.glob("t-*")) == 4
    assert all(len(list(d.glob("t-*"))) == 2 for d in dirs)
    mgr.shutdown()
    mgr = LogManager(dirs, CONFIG)
    mgr.startup()
    assert mgr.topics_on_disk() == {"t": (tid, 4)}
    mgr.flush_all()
    mgr.shutdown()


def test_unclean_warning_only_when_dir_holds_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log_dir = tmp_path / "fresh"
    caplog.set_level("WARNING", logger="broker.log.log_manager")
    LogManager([log_dir], CONFIG).startup()  # brand-new dir: nothing to recover
    assert "not shut down cleanly" not in caplog.text
    populate(log_dir, {"t": 1})
    (log_dir / CLEAN_SHUTDOWN_FILE).unlink()  # as after a crash
    LogManager([log_dir], CONFIG).startup()
    assert "was not shut down cleanly" in caplog.text


def test_new_partition_is_created_without_reading_and_a_leftover_dir_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition whose directory does not exist is created from nothing: only its ``.log`` and
    ``partition.metadata`` are written and no segment is loaded or recovered; a directory left
    on disk under that name (not loaded at startup, e.g. copied in) is loaded, never clobbered."""
    recovers = count_recover_calls(monkeypatch)
    opened: list[int] = []
    original_open = LogSegment.open.__func__  # type: ignore[attr-defined]

    def counting_open(cls: type[LogSegment], *args: object, **kwargs: object) -> LogSegment:
        opened.append(1)
        return original_open(cls, *args, **kwargs)

    monkeypatch.setattr(LogSegment, "open", classmethod(counting_open))
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    tid = uuid.uuid4()
    log = mgr.get_or_create_log("t", 0, tid)
    assert (opened, recovers) == ([], [])
    assert sorted(p.name for p in log.dir.iterdir()) == [log_file_name(0), "partition.metadata"]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (0, 0, 0, 0)
    assert log.leader_epoch_cache.latest_epoch is None and log.producer_state.producers == {}
    log.append_as_leader(make_batch(3), 0)
    assert log.log_end_offset == 3
    # a directory with data that the manager did not load: get_or_create_log loads it
    other = LogManager([tmp_path / "elsewhere"], CONFIG)
    other.startup()
    other.get_or_create_log("u", 0, tid).append_as_leader(make_batch(2), 0)
    other.shutdown()
    (tmp_path / "elsewhere" / "u-0").rename(tmp_path / "u-0")
    loaded = mgr.get_or_create_log("u", 0, tid)
    assert loaded.log_end_offset == 2 and opened
    mgr.shutdown()
    mgr = LogManager([tmp_path], CONFIG)
    mgr.startup()
    assert mgr.topics_on_disk() == {"t": (tid, 1), "u": (tid, 1)}
    assert mgr.get_log("t", 0).log_end_offset == 3  # type: ignore[union-attr]
    mgr.shutdown()
