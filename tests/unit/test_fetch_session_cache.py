"""Unit tests of the broker-side KIP-227 fetch session cache (broker/replication/fetch_session_cache.py)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import pytest

from broker.replication.delayed_fetch import FetchPurgatory
from broker.replication.fetch_context import (
    FOLLOWER_WAKE_YIELD_TURNS,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
)
from broker.replication.fetch_session_cache import FetchSessionCache
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_response_encode import NO_DIVERGING_EPOCH, EpochEndOffset
from spark_kafkalite.protocol.fetch_session import FetchSessionHandler, PartitionFetchData


@dataclass(frozen=True)
class FP:
    partition: int
    fetch_offset: int
    partition_max_bytes: int = 1000
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True)
class FT:
    topic: str
    partitions: tuple[Any, ...]


@dataclass(frozen=True)
class Forgotten:
    topic: str
    partitions: tuple[int, ...]


@dataclass
class Req:
    session_id: int
    session_epoch: int
    topics: tuple[FT, ...] = ()
    forgotten_topics_data: tuple[Forgotten, ...] = ()
    replica_id: int = -1
    min_bytes: int = 1


@dataclass(frozen=True)
class PD:
    partition_index: int
    high_watermark: int = 10
    records: bytes = b""
    error_code: int = 0
    last_stable_offset: int = 10
    log_start_offset: int = 0
    preferred_read_replica: int = -1
    diverging_epoch: EpochEndOffset = NO_DIVERGING_EPOCH


@dataclass(frozen=True)
class TR:
    topic: str
    partitions: tuple[PD, ...]


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def req(
    session_id: int,
    epoch: int,
    parts: dict[tuple[str, int], int] | None = None,
    forget: list[tuple[str, int]] | None = None,
    replica_id: int = -1,
) -> Req:
    by_topic: dict[str, list[FP]] = {}
    for (t, p), off in (parts or {}).items():
        by_topic.setdefault(t, []).append(FP(p, off))
    fby: dict[str, list[int]] = {}
    for t, p in forget or []:
        fby.setdefault(t, []).append(p)
    return Req(
        session_id,
        epoch,
        tuple(FT(t, tuple(ps)) for t, ps in by_topic.items()),
        tuple(Forgotten(t, tuple(ps)) for t, ps in fby.items()),
        replica_id,
    )


def read(context: Any, data: dict[tuple[str, int], PD] | None = None) -> list[TR]:
    """What fetch.py's _read_all would produce for the context's request view."""
    data = data or {}
    out = []
    for ft in context.request_view.topics:
        out.append(
            TR(ft.topic, tuple(data.get((ft.topic, fp.partition), PD(fp.partition)) for fp in ft.partitions))
        )
    return out


def keys(topics: list[TR]) -> set[tuple[str, int]]:
    return {(t.topic, p.partition_index) for t in topics for p in t.partitions}


async def _turns(count: int) -> None:
    """Let the event loop run ``count`` turns."""
    for _ in range(count):
        await asyncio.sleep(0)


def open_session(cache: FetchSessionCache, parts: dict[tuple[str, int], int], replica_id: int = -1) -> int:
    ctx = cache.new_context(12, req(0, 0, parts, replica_id=replica_id))
    assert isinstance(ctx, FullFetchContext)
    code, session_id, topics = ctx.update_and_generate_response(read(ctx))
    assert code == 0 and keys(topics) == set(parts)
    return session_id


def test_sessionless_final_epoch() -> None:
    cache = FetchSessionCache(10)
    ctx = cache.new_context(12, req(0, -1, {("a", 0): 0}))
    assert isinstance(ctx, SessionlessFetchContext)
    code, session_id, topics = ctx.update_and_generate_response(read(ctx))
    assert (code, session_id) == (0, 0) and keys(topics) == {("a", 0)}
    assert len(cache) == 0


def test_full_fetch_creates_session_then_incremental() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0, ("a", 1): 0})
    assert sid != 0 and len(cache) == 1 and cache.get(sid).epoch == 1 and cache.num_partitions == 2

    # incremental, nothing changed: nothing read, nothing in the response
    ctx = cache.new_context(12, req(sid, 1))
    assert isinstance(ctx, IncrementalFetchContext)
    assert ctx.request_view.topics == ()
    code, rsid, topics = ctx.update_and_generate_response(read(ctx))
    assert (code, rsid, topics) == (0, sid, [])
    assert cache.get(sid).epoch == 2

    # both changed (reported by the broker): both read; records on a/1 -> only a/1 sent
    cache.partition_changed(("a", 1))
    cache.partition_changed(("a", 0))
    ctx = cache.new_context(12, req(sid, 2))
    assert {(t.topic, p.partition) for t in ctx.request_view.topics for p in t.partitions} == {
        ("a", 0),
        ("a", 1),
    }
    code, rsid, topics = ctx.update_and_generate_response(
        read(ctx, {("a", 1): PD(1, records=b"x" * 70), ("a", 0): PD(0)})
    )
    assert keys(topics) == {("a", 1)}
    # a/1 returned records: read again; a/0 (unchanged) is not
    cache.partition_changed(("a", 0))  # HW change on a/0 -> included
    ctx = cache.new_context(12, req(sid, 3))
    assert {p.partition for t in ctx.request_view.topics for p in t.partitions} == {0, 1}
    _, _, topics = ctx.update_and_generate_response(read(ctx, {("a", 0): PD(0, high_watermark=11)}))
    assert keys(topics) == {("a", 0)}
    cache.partition_changed(("a", 0))
    ctx = cache.new_context(12, req(sid, 4))
    _, _, topics = ctx.update_and_generate_response(
        read(ctx, {("a", 0): PD(0, high_watermark=11, log_start_offset=3)})
    )
    assert keys(topics) == {("a", 0)}


def test_incremental_updates_fetch_offsets_and_forgets() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0, ("a", 1): 0})
    ctx = cache.new_context(12, req(sid, 1, {("a", 1): 42, ("b", 0): 7}, forget=[("a", 0)]))
    views = {(t.topic, p.partition): p.fetch_offset for t in ctx.request_view.topics for p in t.partitions}
    assert views == {("a", 1): 42, ("b", 0): 7}
    code, _, topics = ctx.update_and_generate_response(read(ctx))
    assert keys(topics) == {("b", 0)}  # new partition: its HW is news; a/1's is not
    assert set(cache.get(sid).partitions) == {("a", 1), ("b", 0)}
    assert cache.get(sid).marked == {}  # both caught up: the next idle fetch reads nothing
    cache.partition_changed(("a", 0))  # forgotten: no longer held by the session
    assert cache.get(sid).marked == {}


def test_marks_follow_changes_not_session_size() -> None:
    """An idle incremental fetch reads no partition, whatever the session size; a change marks
    one partition; a pending partition (more data than returned) stays marked; a mark made
    after the read view was taken survives the response."""
    for size in (20, 300):
        cache = FetchSessionCache(10)
        sid = open_session(cache, {("a", p): 0 for p in range(size)}, replica_id=2)
        before = cache.partitions_read
        for epoch in range(1, 11):
            ctx = cache.new_context(12, req(sid, epoch, replica_id=2))
            assert ctx.update_and_generate_response(read(ctx)) == (0, sid, [])
        assert cache.partitions_read - before == 0
    cache.partition_changed(("a", 7))
    ctx = cache.new_context(12, req(sid, 11, replica_id=2))
    assert [(t.topic, p.partition) for t in ctx.request_view.topics for p in t.partitions] == [("a", 7)]
    ctx.update_and_generate_response(read(ctx), pending={("a", 7)})
    ctx = cache.new_context(12, req(sid, 12, replica_id=2))
    assert list(cache.get(sid).marked) == [("a", 7)]
    cache.partition_changed(("a", 7))  # changed again while the read was in flight
    ctx.update_and_generate_response(read(ctx))
    assert list(cache.get(sid).marked) == [("a", 7)]
    ctx = cache.new_context(12, req(sid, 13, replica_id=2))
    ctx.update_and_generate_response(read(ctx))
    assert cache.get(sid).marked == {}


def test_a_high_watermark_move_wakes_consumers_not_followers() -> None:
    """Kafka's DelayedFetch: a follower's parked fetch completes on bytes up to the log end, so
    a HW move alone (``notify_high_watermark``) wakes the consumers' fetches only, in a session
    or not; the follower's session is still marked (its next response carries the HW) and an
    append (``notify``) wakes everyone."""

    async def scenario() -> None:
        cache = FetchSessionCache(10)
        purgatory = FetchPurgatory()
        purgatory.add_change_listener(cache)
        key = ("a", 0)
        follower_sid = open_session(cache, {key: 0}, replica_id=2)
        consumer_sid = open_session(cache, {key: 0})
        follower = cache.new_context(12, req(follower_sid, 1, replica_id=2))
        consumer = cache.new_context(12, req(consumer_sid, 1))
        sessionless_follower = cache.new_context(12, req(0, -1, {key: 0}, replica_id=3))
        parked = {
            name: asyncio.ensure_future(ctx.wait(purgatory, [key], 5.0))
            for name, ctx in (
                ("follower", follower),
                ("consumer", consumer),
                ("sessionless follower", sessionless_follower),
            )
        }
        await asyncio.sleep(0)
        purgatory.notify_high_watermark(key)
        await _turns(FOLLOWER_WAKE_YIELD_TURNS + 2)  # a woken follower's fetch yields first
        assert {name for name, task in parked.items() if task.done()} == {"consumer"}
        assert key in cache.get(follower_sid).marked
        purgatory.notify(key)
        await _turns(FOLLOWER_WAKE_YIELD_TURNS + 2)
        assert all(task.done() and task.result() for task in parked.values())
        assert purgatory.num_watched_keys == 0

    asyncio.run(scenario())


def test_errors_are_always_sent_and_reset_cached_hw() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0})
    bad = {("a", 0): PD(0, high_watermark=-1, error_code=ErrorCode.not_leader_or_follower)}
    cache.partition_changed(("a", 0))
    for epoch in (1, 2):
        ctx = cache.new_context(12, req(sid, epoch))
        _, _, topics = ctx.update_and_generate_response(read(ctx, bad))
        assert keys(topics) == {("a", 0)}
    ctx = cache.new_context(12, req(sid, 3))
    _, _, topics = ctx.update_and_generate_response(read(ctx))  # healthy again, HW 10 as before the error
    assert keys(topics) == {("a", 0)}


def test_unknown_session_id() -> None:
    cache = FetchSessionCache(10)
    ctx = cache.new_context(12, req(12345, 1, {("a", 0): 0}))
    assert isinstance(ctx, SessionErrorContext) and ctx.error_code == ErrorCode.fetch_session_id_not_found
    assert ctx.update_and_generate_response([]) == (ErrorCode.fetch_session_id_not_found, 0, [])


def test_wrong_epoch() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0})
    for epoch in (2, 5):
        ctx = cache.new_context(12, req(sid, epoch))
        assert ctx.error_code == ErrorCode.invalid_fetch_session_epoch
    assert cache.get(sid).epoch == 1  # untouched by the bad requests
    assert cache.new_context(12, req(sid, 1)).error_code == 0


def test_duplicate_request_race_detected_at_response_time() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0})
    first = cache.new_context(12, req(sid, 1))
    second = cache.new_context(12, req(sid, 2))  # a pipelined next request overtakes the first
    assert first.update_and_generate_response(read(first))[0] == ErrorCode.invalid_fetch_session_epoch
    assert second.update_and_generate_response(read(second))[0] == 0


def test_topic_id_mismatch() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0})  # created by v12 (names)
    assert cache.new_context(13, req(sid, 1)).error_code == ErrorCode.fetch_session_topic_id_error


def test_close_with_final_epoch_and_reopen_with_initial() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0})
    ctx = cache.new_context(12, req(sid, -1))
    assert isinstance(ctx, SessionlessFetchContext) and cache.get(sid) is None
    sid2 = open_session(cache, {("a", 0): 0})
    ctx = cache.new_context(12, req(sid2, 0, {("a", 0): 5}))  # close + new session
    assert isinstance(ctx, FullFetchContext) and cache.get(sid2) is None
    _, sid3, _ = ctx.update_and_generate_response(read(ctx))
    assert sid3 not in (0, sid2) and len(cache) == 1


def test_forgetting_everything_closes_session() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0})
    ctx = cache.new_context(12, req(sid, 1, forget=[("a", 0)]))
    assert isinstance(ctx, SessionlessFetchContext) and len(cache) == 0
    assert ctx.update_and_generate_response([])[1] == 0


def test_zero_slots_disables_sessions() -> None:
    cache = FetchSessionCache(0)
    ctx = cache.new_context(12, req(0, 0, {("a", 0): 0}))
    assert ctx.update_and_generate_response(read(ctx))[1] == 0


def test_full_cache_no_eviction_of_young_sessions() -> None:
    clock = Clock()
    cache = FetchSessionCache(2, clock_ms=clock)
    open_session(cache, {("a", 0): 0})
    open_session(cache, {("a", 0): 0, ("a", 1): 0})
    clock.now += 1000
    ctx = cache.new_context(12, req(0, 0, {("a", 0): 0, ("a", 1): 0, ("a", 2): 0}))
    assert ctx.update_and_generate_response(read(ctx))[1] == 0
    assert len(cache) == 2 and cache.evictions == 0


def test_stale_session_is_evicted() -> None:
    clock = Clock()
    cache = FetchSessionCache(1, clock_ms=clock)
    old = open_session(cache, {("a", 0): 0, ("a", 1): 0})
    clock.now += 120_001
    new = open_session(cache, {("a", 0): 0})
    assert new != 0 and cache.get(old) is None and cache.evictions == 1


def test_follower_evicts_consumer_session_even_if_young() -> None:
    clock = Clock()
    cache = FetchSessionCache(1, clock_ms=clock)
    consumer = open_session(cache, {("a", 0): 0, ("a", 1): 0})
    follower = open_session(cache, {("a", 0): 0}, replica_id=2)
    assert follower != 0 and cache.get(consumer) is None
    assert cache.get(follower).privileged
    # a consumer cannot evict the (young, privileged) follower session
    clock.now += 1000
    ctx = cache.new_context(12, req(0, 0, {("a", 0): 0, ("a", 1): 0, ("a", 2): 0}))
    assert ctx.update_and_generate_response(read(ctx))[1] == 0


def test_larger_session_evicts_smaller_old_one() -> None:
    clock = Clock()
    cache = FetchSessionCache(1, clock_ms=clock)
    small = open_session(cache, {("a", 0): 0})
    clock.now += 100_000
    # keep it in use (not stale) but old enough to be evictable by anyone
    ctx = cache.new_context(12, req(small, 1))
    ctx.update_and_generate_response(read(ctx))
    clock.now += 30_000
    ctx = cache.new_context(12, req(small, 2))
    ctx.update_and_generate_response(read(ctx))
    # a new session of the same size is not worth more: key (False, 1, 0) < (False, 1, id)
    ctx = cache.new_context(12, req(0, 0, {("b", 0): 0}))
    assert ctx.update_and_generate_response(read(ctx))[1] == 0
    bigger = open_session(cache, {("b", 0): 0, ("b", 1): 0})
    assert bigger != 0 and cache.get(small) is None


def test_partitions_with_data_rotate_to_the_end() -> None:
    cache = FetchSessionCache(10)
    sid = open_session(cache, {("a", 0): 0, ("a", 1): 0, ("a", 2): 0})
    for p in range(3):
        cache.partition_changed(("a", p))
    ctx = cache.new_context(12, req(sid, 1))
    assert [p.partition for t in ctx.request_view.topics for p in t.partitions] == [0, 1, 2]
    ctx.update_and_generate_response(read(ctx, {("a", 0): PD(0, records=b"r")}))
    assert list(cache.get(sid).partitions) == [("a", 1), ("a", 2), ("a", 0)]


@pytest.mark.parametrize("seed", range(20))
def test_client_handler_and_broker_cache_agree(seed: int) -> None:
    """Random partition sets and data through both sides: the client always interprets what the
    broker answers, and the broker reads only partitions the client wants, at least every one
    that changed (reported through ``partition_changed``) or that the request names."""
    rng = random.Random(seed)
    cache = FetchSessionCache(10)
    handler = FetchSessionHandler(1)
    universe = [("a", p) for p in range(4)] + [("b", p) for p in range(3)]
    offsets = {k: 0 for k in universe}
    hws = {k: 5 for k in universe}
    for _ in range(40):
        wanted = rng.sample(universe, rng.randint(0, len(universe)))
        data = handler.build({k: PartitionFetchData(offsets[k], 1000) for k in wanted})
        by_topic: dict[str, list[FP]] = {}
        for (t, p), d in data.to_send.items():
            by_topic.setdefault(t, []).append(FP(p, d.fetch_offset))
        fby: dict[str, list[int]] = {}
        for t, p in data.to_forget:
            fby.setdefault(t, []).append(p)
        request = Req(
            data.session_id,
            data.epoch,
            tuple(FT(t, tuple(ps)) for t, ps in by_topic.items()),
            tuple(Forgotten(t, tuple(ps)) for t, ps in fby.items()),
        )
        if rng.random() < 0.05:
            cache.remove(data.session_id)  # evicted behind the client's back
        produced = {}
        for k in universe:
            if rng.random() < 0.3:
                hws[k] += 1
                cache.partition_changed(k)
            produced[k] = PD(k[1], high_watermark=hws[k], records=b"x" if hws[k] > offsets[k] + 5 else b"")
        ctx = cache.new_context(12, request)
        if ctx.error_code:
            assert not handler.handle_response_keys(ctx.error_code, 0, [])
            continue
        read_view = {
            (t.topic, p.partition): p.fetch_offset for t in ctx.request_view.topics for p in t.partitions
        }
        assert read_view.items() <= {k: offsets[k] for k in wanted}.items()
        assert {k for k in wanted if produced[k].records} <= set(read_view)
        assert {(t, p.partition) for t, ps in by_topic.items() for p in ps} <= set(read_view)
        code, sid, topics = ctx.update_and_generate_response(read(ctx, produced))
        assert handler.handle_response_keys(code, sid, keys(topics))
        for k in keys(topics):
            assert k in data.session_partitions
            if produced[k].records:
                offsets[k] += 1
