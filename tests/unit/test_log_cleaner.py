"""Log compaction: batch rewriting with holes, the cleaner against a brute-force model on random
logs, tombstones (removed by their batch's KIP-534 delete horizon) and lags by an injected clock,
crash points of the swap, keyless records, and cleaning in a thread while the event loop keeps
appending and reading."""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log.cleaner_batches import rewrite_batch
from broker.log.log_cleaner import CLEANER_OFFSET_CHECKPOINT_FILE, LogCleaner
from broker.log.log_config import LONG_MAX, LogConfig
from broker.log.log_manager import LogManager
from broker.log.segment_files import CLEANED_SUFFIX, SWAP_SUFFIX, validate_stored_batch
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.errors import InvalidRecordError
from spark_kafkalite.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    DecodedBatch,
    decode_batch,
    decode_batches,
)
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from tests.unit._hypothesis_budget import examples

pytestmark = pytest.mark.timeout(60)

HOUR_MS = 3_600_000
CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
Rec = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp


class Clock:
    def __init__(self, now_ms: int = 1000 * HOUR_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def records_of(log: UnifiedLog) -> list[Rec]:
    data = log.read(log.log_start_offset, 1 << 30).records
    out = []
    for batch in decode_batches(data, verify_crc=False):
        for o, k, v, t in zip(batch.offsets, batch.keys, batch.values, batch.timestamps_ms, strict=True):
            if o >= log.log_start_offset:
                out.append((o, k, v, t))
    return out


def compact_model(
    recs: list[Rec], end: int, now_ms: int, delete_retention_ms: int, horizons: dict[int, int]
) -> list[Rec]:
    """What compaction of offsets < ``end`` at ``now_ms`` must leave. ``horizons`` (offset of a
    tombstone -> its delete horizon) carries KIP-534's rule from pass to pass: the pass that first
    keeps a tombstone gives it now + ``delete_retention_ms``, a pass at or past that drops it."""
    last: dict[bytes | None, int] = {}
    for o, k, _, _ in recs:
        if o < end:
            last[k] = o
    out = []
    for o, k, v, t in recs:
        if o >= end:
            out.append((o, k, v, t))
        elif k is not None and last[k] == o:
            if v is None:
                if horizons.get(o, now_ms + 1) <= now_ms:
                    continue
                horizons.setdefault(o, now_ms + delete_retention_ms)
            out.append((o, k, v, t))
    return out


def append(log: UnifiedLog, items: list[tuple[bytes | None, bytes | None, int]], codec: int = 0) -> None:
    log.append_as_leader(
        bytearray(encode_batch([(k, v, t, []) for k, v, t in items], compression_type=codec)), 0
    )
    log.update_high_watermark(log.log_end_offset)


# -- batch rewriting -------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_rewrite_batch_keeps_offsets_and_fields(codec: int) -> None:
    records = [
        (b"k%d" % i, None if i == 3 else b"v%d" % i * 20, 5000 + i, [("h", b"x%d" % i)]) for i in range(8)
    ]
    raw = bytearray(
        encode_batch(records, compression_type=codec, producer_id=77, producer_epoch=2, base_sequence=40)
    )
    raw[0:8] = (1000).to_bytes(8, "big")
    original = decode_batch(raw)
    rewritten = rewrite_batch(original, [1, 3, 6])
    header = validate_stored_batch(rewritten)  # CRC valid; count 3 < last_offset_delta + 1 = 8
    # the last offset stays (Kafka's overrideLastOffset): the producer's last sequence survives
    assert header.base_offset == 1000 and header.last_offset == 1007 and header.records_count == 3
    assert header.compression_type == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 2, 40)
    assert header.max_timestamp == 5006
    again = decode_batch(rewritten, verify_crc=False)
    assert again.offsets == [1001, 1003, 1006]
    assert again.keys == [b"k1", b"k3", b"k6"]
    assert again.values == [b"v1" * 20, None, b"v6" * 20]
    assert again.timestamps_ms == [5001, 5003, 5006]
    assert again.headers == [[("h", b"x1")], [("h", b"x3")], [("h", b"x6")]]


# -- keyless records -------------------------------------------------------------------------


def test_keyless_records_rejected_on_compacted_logs_only(tmp_path: Path) -> None:
    compacted = UnifiedLog(tmp_path / "c-0", LogConfig(cleanup_policy=("compact",)))
    with pytest.raises(InvalidRecordError, match="without key"):
        append(compacted, [(b"k", b"v", 1), (None, b"v", 2)])
    assert compacted.log_end_offset == 0
    append(compacted, [(b"k", b"v", 1)])
    assert compacted.log_end_offset == 1
    plain = UnifiedLog(tmp_path / "p-0", LogConfig())
    append(plain, [(None, b"v", 1)])
    assert plain.log_end_offset == 1
    compacted.close()
    plain.close()


# -- the cleaner vs a model ------------------------------------------------------------------

ops = st.lists(
    st.tuples(
        st.lists(
            st.tuples(
                st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"]),
                st.one_of(st.none(), st.binary(min_size=0, max_size=30)),
                st.integers(min_value=0, max_value=10 * HOUR_MS),
            ),
            min_size=1,
            max_size=5,
        ),
        st.sampled_from(CODECS),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    first=ops,
    second=ops,
    segment_bytes=st.integers(min_value=150, max_value=1500),
    delete_retention_ms=st.integers(min_value=0, max_value=10 * HOUR_MS),
    elapsed_ms=st.integers(min_value=0, max_value=10 * HOUR_MS),
)
def test_cleaner_matches_model(
    first: list[tuple[list[tuple[bytes, bytes | None, int]], int]],
    second: list[tuple[list[tuple[bytes, bytes | None, int]], int]],
    segment_bytes: int,
    delete_retention_ms: int,
    elapsed_ms: int,
) -> None:
    clock = Clock(now_ms=10 * HOUR_MS)
    config = LogConfig(
        segment_bytes=segment_bytes,
        index_interval_bytes=100,
        cleanup_policy=("compact",),
        delete_retention_ms=delete_retention_ms,
    )
    with tempfile.TemporaryDirectory() as tmp:
        mgr = LogManager([tmp], config, time_ms=clock)
        mgr.startup()
        log = mgr.get_or_create_log("c", 0, uuid.uuid4())
        cleaner = LogCleaner(mgr)
        horizons: dict[int, int] = {}
        for round_ops, advance_ms in ((first, 0), (second, elapsed_ms)):
            clock.now_ms += advance_ms
            for items, codec in round_ops:
                append(log, items, codec)
            before = records_of(log)
            end = log.active_segment.base_offset
            cleaned = cleaner.clean_log(log) is not None  # None: nothing new was dirty, no pass
            after = records_of(log)  # every record keeps its timestamp
            model = (
                compact_model(before, end, clock.now_ms, delete_retention_ms, horizons) if cleaned else before
            )
            assert after == model
            assert [r[0] for r in after] == sorted({r[0] for r in after})
            assert log.log_end_offset == before[-1][0] + 1
            for target in (0, HOUR_MS, 5 * HOUR_MS):  # the rebuilt indexes answer correctly
                expected = min(((o, t) for o, _, _, t in after if t >= target), default=None)
                got = log.fetch_offset_by_timestamp(target)
                assert (got is None) == (expected is None)
                if got is not None:
                    assert got == next((o, t) for o, _, _, t in after if t >= target)
        # the cleaned log survives an unclean restart: recovery accepts batches with holes
        expected = records_of(log)
        for lg in mgr.all_logs().values():
            lg.close()
        mgr.flush_file_writes()  # the old process is gone: its file writer no longer runs
        again = LogManager([tmp], config, time_ms=clock)
        again.startup()
        assert not again.had_clean_shutdown
        reloaded = again.get_log("c", 0)
        assert reloaded is not None and records_of(reloaded) == expected
        again.shutdown()


def test_tombstones_and_lags_follow_the_clock(tmp_path: Path) -> None:
    clock = Clock()
    config = LogConfig(
        segment_bytes=300, cleanup_policy=("compact", "delete"), retention_ms=-1, delete_retention_ms=HOUR_MS
    )
    mgr = LogManager([tmp_path], config, time_ms=clock)
    mgr.startup()
    log = mgr.get_or_create_log("t", 0, uuid.uuid4())
    cleaner = LogCleaner(mgr)
    now = clock.now_ms
    for i in range(6):
        append(log, [(b"k%d" % (i % 3), b"v%d" % i, now - 10)])
    append(log, [(b"k0", None, now - 10)])  # tombstone for k0
    append(log, [(b"z", b"filler", now)] * 3)
    stats = cleaner.clean_log(log)
    assert stats is not None and stats.tombstones_removed == 0
    keys = {k: v for _, k, v, _ in records_of(log) if k != b"z"}
    assert keys == {b"k0": None, b"k1": b"v4", b"k2": b"v5"}
    # nothing new is dirty: no work
    assert cleaner.clean_log(log) is None
    # two hours later the tombstone's delete horizon (first clean + delete.retention.ms) has
    # passed: it goes on the next clean
    clock.now_ms += 2 * HOUR_MS
    append(log, [(b"k1", b"v9", clock.now_ms)])
    log.roll()
    stats = cleaner.clean_log(log)
    assert stats is not None and stats.tombstones_removed == 1
    assert {k: v for _, k, v, _ in records_of(log) if k != b"z"} == {b"k1": b"v9", b"k2": b"v5"}
    # the first dirty offset is checkpointed and reloaded by a new cleaner
    text = (tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).read_text()
    assert f"t 0 {log.active_segment.base_offset}" in text
    assert LogCleaner(mgr).first_dirty_offset(log) == log.active_segment.base_offset
    # min.compaction.lag.ms keeps young segments out of the cleanable range
    log.config = LogConfig(segment_bytes=300, cleanup_policy=("compact",), min_compaction_lag_ms=HOUR_MS)
    for i in range(10):
        append(log, [(b"k2", b"new%d" % i, clock.now_ms)])
    assert cleaner.plan(log) is None
    clock.now_ms += 2 * HOUR_MS
    plan = cleaner.plan(log)
    assert plan is not None and plan.dirty
    cleaner.clean_log(log)
    k2 = [v for _, k, v, _ in records_of(log) if k == b"k2"]
    assert len(k2) < 10 and k2[-1] == b"new9"
    mgr.shutdown()


def batch_of(log: UnifiedLog, offset: int) -> DecodedBatch:
    """The stored batch holding ``offset``."""
    data = log.read(log.log_start_offset, 1 << 30).records
    return next(b for b in decode_batches(data) if b.header.base_offset <= offset <= b.header.last_offset)


def test_tombstone_with_an_old_timestamp_waits_for_its_delete_horizon(tmp_path: Path) -> None:
    """KIP-534: a tombstone produced with a CreateTime far in the past survives the first clean,
    which stores the delete horizon now + delete.retention.ms in its batch (once), and goes on the
    first clean at or past that horizon; every record keeps its timestamp through the rewrites."""
    clock = Clock()
    now = clock.now_ms
    day_ms = 24 * HOUR_MS
    mgr = LogManager(
        [tmp_path],
        LogConfig(segment_bytes=300, cleanup_policy=("compact",), delete_retention_ms=HOUR_MS),
        time_ms=clock,
    )
    mgr.startup()
    log = mgr.get_or_create_log("h", 0, uuid.uuid4())
    cleaner = LogCleaner(mgr)
    append(log, [(b"k0", b"old", now - 20 * day_ms)])
    # one lz4 batch: a tombstone 10 days old, a live value 5 days old, a value replaced later
    append(
        log,
        [(b"k0", None, now - 10 * day_ms), (b"k1", b"v1", now - 5 * day_ms), (b"k2", b"a", now)],
        COMPRESSION_LZ4,
    )
    append(log, [(b"k2", b"b", now)])
    log.roll()
    expected = [
        (1, b"k0", None, now - 10 * day_ms),
        (2, b"k1", b"v1", now - 5 * day_ms),
        (4, b"k2", b"b", now),
    ]

    stats = cleaner.clean_log(log)
    assert stats is not None and stats.tombstones_removed == 0
    assert records_of(log) == expected
    stamped = batch_of(log, 1).header  # CRC-valid, rewritten with the horizon in base timestamp
    assert stamped.delete_horizon_ms == now + HOUR_MS and stamped.base_timestamp == now + HOUR_MS
    assert stamped.max_timestamp == now - 5 * day_ms  # of the records kept
    assert stamped.compression_type == COMPRESSION_LZ4 and stamped.records_count == 2
    assert batch_of(log, 4).header.delete_horizon_ms is None  # no tombstone, no horizon

    # a later clean before the horizon keeps the tombstone and the horizon it already has
    clock.now_ms = now + HOUR_MS - 1
    append(log, [(b"k3", b"c", clock.now_ms)])
    log.roll()
    stats = cleaner.clean_log(log)
    assert stats is not None and stats.tombstones_removed == 0
    assert records_of(log)[:3] == expected
    assert batch_of(log, 1).header.delete_horizon_ms == now + HOUR_MS

    # the first clean at the horizon drops the tombstone; the rest of its batch keeps its fields
    clock.now_ms = now + HOUR_MS
    append(log, [(b"k4", b"d", clock.now_ms)])
    log.roll()
    stats = cleaner.clean_log(log)
    assert stats is not None and stats.tombstones_removed == 1
    assert records_of(log)[:2] == expected[1:]
    left = batch_of(log, 2)
    assert left.offsets == [2] and left.timestamps_ms == [now - 5 * day_ms]
    assert left.header.delete_horizon_ms == now + HOUR_MS
    mgr.shutdown()


def test_delete_retention_past_the_int64_range_keeps_tombstones(tmp_path: Path) -> None:
    """delete.retention.ms up to Long.MAX_VALUE is a valid config ("keep tombstones forever"):
    now + it is past the int64 base timestamp, so no horizon is stored and the cleaner neither
    fails on the batch (it once raised struct.error on every pass) nor drops the tombstone."""
    clock = Clock()
    config = LogConfig(segment_bytes=300, cleanup_policy=("compact",), delete_retention_ms=LONG_MAX)
    mgr = LogManager([tmp_path], config, time_ms=clock)
    mgr.startup()
    log = mgr.get_or_create_log("forever", 0, uuid.uuid4())
    cleaner = LogCleaner(mgr)
    tombstone = (1, b"k0", None, clock.now_ms - HOUR_MS)
    append(log, [(b"k0", b"v", clock.now_ms)])
    append(log, [tombstone[1:]])
    log.roll()
    for _ in range(2):  # a first pass, and one ten years later
        stats = cleaner.clean_log(log)
        assert stats is not None and stats.tombstones_removed == 0
        assert records_of(log)[0] == tombstone
        assert batch_of(log, 1).header.delete_horizon_ms is None
        clock.now_ms += 10 * 365 * 24 * HOUR_MS
        append(log, [(b"k1", b"w", clock.now_ms)])
        log.roll()
    mgr.shutdown()


def test_filthiest_log_respects_min_cleanable_dirty_ratio(tmp_path: Path) -> None:
    clock = Clock()
    mgr = LogManager([tmp_path], LogConfig(segment_bytes=300, cleanup_policy=("compact",)), time_ms=clock)
    mgr.startup()
    log = mgr.get_or_create_log("r", 0, uuid.uuid4())
    plain = mgr.get_or_create_log("plain", 0, uuid.uuid4())
    plain.config = LogConfig(segment_bytes=300)
    for i in range(60):
        append(log, [(b"k%d" % (i % 20), b"v" * 40, clock.now_ms)])
        append(plain, [(b"k", b"v" * 40, clock.now_ms)])
    cleaner = LogCleaner(mgr)
    plan = cleaner.filthiest()
    assert plan is not None and plan.log is log and plan.dirty_ratio == 1.0
    cleaner.clean_log(log)
    for i in range(2):  # a little dirt: below the 0.5 ratio
        append(log, [(b"k%d" % i, b"w" * 40, clock.now_ms)])
    log.roll()
    plan = cleaner.plan(log)
    assert plan is not None and 0 < plan.dirty_ratio < 0.5
    assert cleaner.filthiest() is None
    log.config = LogConfig(segment_bytes=300, cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.01)
    assert cleaner.filthiest() is not None
    mgr.shutdown()


# -- swap crash points ----------------------------------------------------------------------


def _prepare(tmp_path: Path) -> tuple[LogManager, UnifiedLog, LogCleaner, list[Rec]]:
    config = LogConfig(segment_bytes=400, cleanup_policy=("compact",))
    mgr = LogManager([tmp_path], config)
    mgr.startup()
    log = mgr.get_or_create_log("s", 0, uuid.uuid4())
    for i in range(40):
        append(log, [(b"k%d" % (i % 5), b"value-%d" % i, 1000 + i)])
    cleaner = LogCleaner(mgr)
    return mgr, log, cleaner, records_of(log)


def test_crash_before_swap_point_discards_cleaned_files(tmp_path: Path) -> None:
    mgr, log, cleaner, before = _prepare(tmp_path)
    plan = cleaner.plan(log)
    assert plan is not None
    from broker.log.log_cleaner import _snapshot

    cleaner._clean_segments(plan, _snapshot(plan.segments), 0)  # worker done, no swap: "crash"
    part = tmp_path / "s-0"
    assert any(p.name.endswith(CLEANED_SUFFIX) for p in part.iterdir())
    mgr.shutdown()
    again = LogManager([tmp_path], LogConfig(segment_bytes=400, cleanup_policy=("compact",)))
    again.startup()
    assert not any(p.name.endswith(CLEANED_SUFFIX) for p in part.iterdir())
    reloaded = again.get_log("s", 0)
    assert reloaded is not None and records_of(reloaded) == before
    again.shutdown()


def test_crash_after_swap_point_completes_the_swap(tmp_path: Path) -> None:
    mgr, log, cleaner, before = _prepare(tmp_path)
    plan = cleaner.plan(log)
    assert plan is not None
    end = plan.first_uncleanable_offset
    from broker.log.log_cleaner import _snapshot

    groups = cleaner._clean_segments(plan, _snapshot(plan.segments), 0)
    assert len(groups) >= 2
    part = tmp_path / "s-0"
    # commit point reached for the first group only; then one old segment deleted; then "crash"
    for path in groups[0].cleaned.file_paths:  # type: ignore[union-attr]
        os.replace(path, path.with_name(path.name.removesuffix(CLEANED_SUFFIX) + SWAP_SUFFIX))
    groups[0].old[-1].delete() if len(groups[0].old) > 1 else None
    for lg in mgr.all_logs().values():
        lg.close()
    again = LogManager([tmp_path], LogConfig(segment_bytes=400, cleanup_policy=("compact",)))
    again.startup()
    names = [p.name for p in part.iterdir()]
    assert not any(n.endswith((SWAP_SUFFIX, CLEANED_SUFFIX)) for n in names)
    reloaded = again.get_log("s", 0)
    assert reloaded is not None
    got = records_of(reloaded)
    # the first group is compacted, everything after it is as before; no offset twice
    group_end = groups[1].old[0].base_offset
    assert [r for r in got if r[0] >= group_end] == [r for r in before if r[0] >= group_end]
    model = compact_model(before, end, 0, plan.log.config.delete_retention_ms, {})
    assert [r for r in got if r[0] < group_end] == [r for r in model if r[0] < group_end]
    assert len({r[0] for r in got}) == len(got)
    again.shutdown()


def test_swap_aborts_when_segments_changed(tmp_path: Path) -> None:
    mgr, log, cleaner, before = _prepare(tmp_path)
    plan = cleaner.plan(log)
    assert plan is not None
    from broker.log.log_cleaner import _snapshot

    groups = cleaner._clean_segments(plan, _snapshot(plan.segments), 0)
    log.delete_records(log.segments[2].base_offset)  # DeleteRecords removed segments meanwhile
    assert cleaner._swap(plan, groups) is None
    assert not any(p.name.endswith(CLEANED_SUFFIX) for p in (tmp_path / "s-0").iterdir())
    assert records_of(log) == [r for r in before if r[0] >= log.log_start_offset]
    mgr.shutdown()


# -- background cleaning does not block the loop --------------------------------------------


def test_clean_once_runs_in_a_thread_while_the_loop_serves(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=64 * 1024, cleanup_policy=("compact",))
    mgr = LogManager([tmp_path], config)
    mgr.startup()
    log = mgr.get_or_create_log("big", 0, uuid.uuid4())
    for i in range(1500):
        append(log, [(b"key-%d" % ((i * 20 + j) % 500), b"x" * 50, 1000 + i) for j in range(20)])
    end = log.active_segment.base_offset
    before = records_of(log)
    cleaner = LogCleaner(mgr)

    async def scenario() -> tuple[int, int]:
        task = asyncio.create_task(cleaner.clean_once())
        appended = reads = 0
        while not task.done():
            append(log, [(b"live-%d" % appended, b"y", 5000)])
            appended += 1
            assert log.read(log.log_start_offset, 1000).records
            reads += 1
            await asyncio.sleep(0)
        stats = task.result()
        assert stats is not None and stats.records_read == sum(1 for r in before if r[0] < end)
        assert stats.records_retained <= 500
        return appended, reads

    appended, reads = asyncio.run(scenario())
    assert appended > 5 and reads > 5  # produce and fetch went on while the worker cleaned (sync: 1)
    after = records_of(log)
    assert [r for r in after if r[0] < end] == [r for r in compact_model(before, end, 0, 0, {}) if r[0] < end]
    live = [r for r in after if r[1] is not None and r[1].startswith(b"live-")]
    assert len(live) == appended and [r[0] for r in live] == list(
        range(before[-1][0] + 1, log.log_end_offset)
    )
    mgr.shutdown()
