"""The classic group state machine with an injected clock (ManualScheduler) and an in-memory
``__consumer_offsets`` (pure logic: no sockets). Kafka's GroupCoordinatorTest, in small."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from broker.coordinator.group.classic_group import GroupState, JoinResult, SyncResult
from broker.coordinator.group.group_coordinator import GroupConfig, GroupCoordinator
from broker.coordinator.group.group_metadata_manager import GroupMetadataManager
from broker.coordinator.group.scheduler import ManualScheduler
from broker.log.log_results import FetchDataInfo
from spark_kafkalite.protocol.errors import ErrorCode as E
from spark_kafkalite.protocol.group_records import OffsetAndMetadata
from spark_kafkalite.protocol.record_batch_writer import encode_batch

GROUP = "g"
SESSION_MS = 10_000
REBALANCE_MS = 30_000
DELAY_MS = 3_000
PROTOCOLS = [("range", b"range-meta"), ("roundrobin", b"rr-meta")]


class MemoryLog:
    """Enough of UnifiedLog for loading: batches with offsets, read() from an offset."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, bytes]] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.fail_next: int = 0

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FetchDataInfo:
        data = b"".join(b for base, b in self.batches if base >= offset)
        return FetchDataInfo(data, offset if data else -1)


class MemoryAppender:
    def __init__(self, logs: dict[int, MemoryLog]) -> None:
        self.logs = logs
        self.calls = 0

    async def append(
        self, topic: str, partition: int, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int
    ) -> int:
        await asyncio.sleep(0)
        self.calls += 1
        log = self.logs.setdefault(partition, MemoryLog())
        if log.fail_next:
            code, log.fail_next = log.fail_next, 0
            return code
        batch = encode_batch([(k, v, 0, []) for k, v in records], base_offset=log.log_end_offset)
        log.batches.append((log.log_end_offset, batch))
        log.log_end_offset += len(records)
        return 0


class Harness:
    def __init__(self, **config: Any) -> None:
        self.scheduler = ManualScheduler()
        self.logs: dict[int, MemoryLog] = {}
        self.appender = MemoryAppender(self.logs)
        self.manager = GroupMetadataManager(1, self.appender, self.scheduler.now_ms)
        cfg = dict(
            min_session_timeout_ms=1000, max_session_timeout_ms=60_000, initial_rebalance_delay_ms=DELAY_MS
        )
        cfg.update(config)
        self.coordinator = GroupCoordinator(self.manager, self.scheduler, GroupConfig(**cfg))
        self.coordinator.startup()

    async def load(self) -> None:
        task = self.coordinator.on_elected(0, 0, self.logs.get(0))
        if task is not None:  # None: already loaded in this epoch
            await task

    def join(
        self,
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        require_known: bool = True,
        session_ms: int = SESSION_MS,
        group: str = GROUP,
    ) -> list[JoinResult]:
        out: list[JoinResult] = []
        self.coordinator.join.handle_join_group(
            group,
            member_id,
            instance_id,
            require_known,
            "client",
            "/127.0.0.1",
            REBALANCE_MS,
            session_ms,
            protocol_type,
            protocols or PROTOCOLS,
            out.append,
        )
        return out

    def sync(
        self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, **kw: Any
    ) -> list[SyncResult]:
        out: list[SyncResult] = []
        self.coordinator.handle_sync_group(
            GROUP,
            generation,
            member_id,
            kw.get("protocol_type"),
            kw.get("protocol_name"),
            kw.get("instance_id"),
            assignments or {},
            out.append,
        )
        return out

    def group(self) -> Any:
        return self.manager.get_group(GROUP)


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def new_member(h: Harness, **kw: Any) -> list[JoinResult]:
    """KIP-394 dance: MEMBER_ID_REQUIRED then rejoin with the id (the rejoin is parked)."""
    first = h.join(**kw)
    assert first[0].error == E.member_id_required
    return h.join(first[0].member_id, **kw)


async def stable_group(h: Harness, n: int = 2) -> list[JoinResult]:
    await h.load()
    pending = [await new_member(h) for _ in range(n)]
    assert all(not p for p in pending)  # parked during the initial delay
    h.scheduler.advance(DELAY_MS)  # a member joined during the delay: one more delay
    if n > 1:
        assert all(not p for p in pending)
        h.scheduler.advance(DELAY_MS)
    results = [p[0] for p in pending]
    assert all(r.error == 0 for r in results)
    leader = next(r for r in results if r.member_id == r.leader_id)
    syncs = [h.sync(r.member_id, r.generation_id) for r in results if r is not leader]
    lsync = h.sync(
        leader.member_id, leader.generation_id, {r.member_id: r.member_id.encode() for r in results}
    )
    await settle()
    assert lsync[0].error == 0 and all(s[0].error == 0 for s in syncs)
    assert h.group().state is GroupState.STABLE
    return results


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_join_sync_to_stable_with_initial_delay() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        a = await new_member(h)
        h.scheduler.advance(DELAY_MS - 1)
        b = await new_member(h)
        assert not a and not b
        assert h.group().state is GroupState.PREPARING_REBALANCE
        h.scheduler.advance(1)  # new member arrived during the delay: extended once more
        assert not a
        h.scheduler.advance(DELAY_MS)
        assert a[0].error == 0 and b[0].error == 0
        assert a[0].generation_id == b[0].generation_id == 1
        assert a[0].protocol_name == "range"
        leader, follower = (a[0], b[0]) if a[0].member_id == a[0].leader_id else (b[0], a[0])
        assert {m[0] for m in leader.members} == {a[0].member_id, b[0].member_id}
        assert follower.members == []
        fs = h.sync(follower.member_id, 1)
        assert not fs  # waits for the leader
        ls = h.sync(leader.member_id, 1, {leader.member_id: b"L", follower.member_id: b"F"})
        await settle()
        assert ls[0].assignment == b"L" and fs[0].assignment == b"F"
        assert h.group().state is GroupState.STABLE
        assert h.appender.calls == 1  # group metadata stored once

    run(scenario())


def test_protocol_selection_by_vote_and_inconsistent_protocol() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        p1 = await new_member(h, protocols=[("roundrobin", b""), ("range", b"")])
        p2 = await new_member(h, protocols=[("roundrobin", b""), ("sticky", b"")])
        bad = h.join(protocols=[("sticky", b"")])
        assert bad[0].error == E.inconsistent_group_protocol
        bad_type = h.join(protocol_type="connect")
        assert bad_type[0].error == E.inconsistent_group_protocol
        h.scheduler.advance(2 * DELAY_MS)
        assert p1[0].protocol_name == p2[0].protocol_name == "roundrobin"

    run(scenario())


def test_heartbeat_errors_and_rebalance_in_progress() -> None:
    async def scenario() -> None:
        h = Harness()
        a, b = await stable_group(h)
        c = h.coordinator
        assert c.handle_heartbeat(GROUP, a.member_id, None, 1) == 0
        assert c.handle_heartbeat(GROUP, a.member_id, None, 0) == E.illegal_generation
        assert c.handle_heartbeat(GROUP, "nobody", None, 1) == E.unknown_member_id
        assert c.handle_heartbeat("other-group", a.member_id, None, 1) == E.unknown_member_id
        assert c.handle_heartbeat("", a.member_id, None, 1) == E.invalid_group_id
        third = await new_member(h)  # triggers a rebalance of the stable group
        assert not third
        assert c.handle_heartbeat(GROUP, a.member_id, None, 1) == E.rebalance_in_progress
        # a sync of the old generation during PreparingRebalance is refused
        assert h.sync(a.member_id, 1)[0].error == E.rebalance_in_progress
        ra = h.join(a.member_id)
        rb = h.join(b.member_id)
        assert (
            ra[0].generation_id == rb[0].generation_id == third[0].generation_id == 2
        )  # all rejoined: no wait

    run(scenario())


def test_session_expiry_removes_member_and_rebalances() -> None:
    async def scenario() -> None:
        h = Harness()
        a, b = await stable_group(h)
        for _ in range(3):
            h.scheduler.advance(SESSION_MS // 2)
            assert h.coordinator.handle_heartbeat(GROUP, a.member_id, None, 1) in (0, E.rebalance_in_progress)
        assert not h.group().has(b.member_id)  # b never heartbeated
        assert h.group().state is GroupState.PREPARING_REBALANCE
        ra = h.join(a.member_id)
        assert ra[0].error == 0 and ra[0].generation_id == 2 and ra[0].leader_id == a.member_id
        assert [m[0] for m in ra[0].members] == [a.member_id]

    run(scenario())


def test_pending_member_expires() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        first = h.join()
        assert first[0].error == E.member_id_required
        assert h.group().is_pending_member(first[0].member_id)
        h.scheduler.advance(SESSION_MS + 1)
        assert not h.group().is_pending_member(first[0].member_id)
        assert h.join(first[0].member_id)[0].error == E.unknown_member_id

    run(scenario())


def test_leave_group_rebalances_then_empty() -> None:
    async def scenario() -> None:
        h = Harness()
        a, b = await stable_group(h)
        err, res = h.coordinator.handle_leave_group(GROUP, [(b.member_id, None), ("ghost", None)])
        assert err == 0 and [r[2] for r in res] == [0, E.unknown_member_id]
        assert h.group().state is GroupState.PREPARING_REBALANCE
        ra = h.join(a.member_id)
        assert ra[0].generation_id == 2
        err, res = h.coordinator.handle_leave_group(GROUP, [(a.member_id, None)])
        assert h.group().state is GroupState.EMPTY
        await settle()

    run(scenario())


def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    async def scenario() -> None:
        h = Harness()
        a, b = await stable_group(h)
        ra = h.join(a.member_id, protocols=[("range", b"new-metadata"), ("roundrobin", b"")])
        assert not ra
        for _ in range(REBALANCE_MS // 5000):
            h.scheduler.advance(5000)
            if ra:
                break
            h.coordinator.handle_heartbeat(GROUP, b.member_id, None, 1)  # alive but never rejoins
        h.scheduler.advance(REBALANCE_MS)
        assert ra[0].error == 0 and ra[0].generation_id == 2
        assert not h.group().has(b.member_id)
        assert h.coordinator.handle_heartbeat(GROUP, b.member_id, None, 1) == E.unknown_member_id

    run(scenario())


def test_static_member_rejoin_replaces_id_without_rebalance() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        s1 = h.join(instance_id="inst-1")
        assert not s1  # static members skip MEMBER_ID_REQUIRED
        h.scheduler.advance(DELAY_MS)
        old = s1[0]
        assert old.error == 0 and old.member_id.startswith("inst-1-")
        h.sync(old.member_id, 1, {old.member_id: b"A"})
        await settle()
        assert h.group().state is GroupState.STABLE
        again = h.join(instance_id="inst-1")  # restarted process: unknown member id
        await settle()
        new = again[0]
        assert new.error == 0 and new.member_id != old.member_id and new.generation_id == 1
        assert new.skip_assignment and [m[0] for m in new.members] == [new.member_id]  # KIP-814 leader
        assert h.group().state is GroupState.STABLE  # no rebalance
        assert h.coordinator.handle_heartbeat(GROUP, old.member_id, "inst-1", 1) == E.fenced_instance_id
        assert h.coordinator.handle_heartbeat(GROUP, new.member_id, "inst-1", 1) == 0
        sync = h.sync(new.member_id, 1, instance_id="inst-1")
        assert sync[0].assignment == b"A"
        err, res = h.coordinator.handle_leave_group(GROUP, [("", "inst-1")])
        assert res[0][2] == 0 and h.group().state is GroupState.EMPTY and not h.group().static_members

    run(scenario())


def test_group_max_size() -> None:
    async def scenario() -> None:
        h = Harness(max_size=2)
        await stable_group(h)
        assert h.join()[0].error == E.group_max_size_reached
        assert h.group().state is GroupState.STABLE and len(h.group().members) == 2

    run(scenario())


def test_invalid_session_timeout_and_unknown_member_join() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        assert h.join(session_ms=500)[0].error == E.invalid_session_timeout
        assert h.join(session_ms=61_000)[0].error == E.invalid_session_timeout
        assert h.join("made-up-id")[0].error == E.unknown_member_id

    run(scenario())


def test_offset_commit_rules() -> None:
    async def scenario() -> None:
        h = Harness()
        c = h.coordinator
        await h.load()
        offsets = {("t", 0): OffsetAndMetadata(10, metadata="m", commit_timestamp_ms=1)}
        # unknown group: standalone commit ok, generation >= 0 is an old generation
        assert await c.offsets.handle_commit_offsets("solo", "", None, -1, offsets) == {("t", 0): 0}
        assert await c.offsets.handle_commit_offsets("nope", "x", None, 3, offsets) == {
            ("t", 0): E.illegal_generation
        }
        a, b = await stable_group(h)
        assert await c.offsets.handle_commit_offsets(GROUP, "", None, -1, offsets) == {
            ("t", 0): E.unknown_member_id
        }
        assert await c.offsets.handle_commit_offsets(GROUP, a.member_id, None, 0, offsets) == {
            ("t", 0): E.illegal_generation
        }
        assert await c.offsets.handle_commit_offsets(GROUP, "zz", None, 1, offsets) == {
            ("t", 0): E.unknown_member_id
        }
        assert await c.offsets.handle_commit_offsets(GROUP, a.member_id, None, 1, offsets) == {("t", 0): 0}
        big = {("t", 1): OffsetAndMetadata(1, metadata="x" * 5000)}
        assert await c.offsets.handle_commit_offsets(GROUP, a.member_id, None, 1, big) == {
            ("t", 1): E.offset_metadata_too_large
        }
        assert c.offsets.handle_fetch_offsets(GROUP, [("t", 0), ("t", 1)]) == (
            0,
            {("t", 0): offsets[("t", 0)], ("t", 1): None},
        )
        # a commit of the current generation is still allowed while preparing the next one
        h.join(a.member_id, protocols=[("range", b"changed")])
        assert h.group().state is GroupState.PREPARING_REBALANCE
        assert await c.offsets.handle_commit_offsets(GROUP, b.member_id, None, 1, offsets) == {("t", 0): 0}
        h.join(b.member_id)
        assert h.group().state is GroupState.COMPLETING_REBALANCE
        assert await c.offsets.handle_commit_offsets(GROUP, b.member_id, None, 2, offsets) == {
            ("t", 0): E.rebalance_in_progress
        }
        h.logs[0].fail_next = E.not_leader_or_follower
        h.sync(a.member_id, 2, {})
        await settle()
        assert h.group().state is GroupState.PREPARING_REBALANCE  # failed store -> rebalance again

    run(scenario())


def test_state_survives_reload_from_log_and_tombstones() -> None:
    async def scenario() -> None:
        h = Harness()
        a, b = await stable_group(h)
        c = h.coordinator
        offsets = {("t", 0): OffsetAndMetadata(7, 3, "m", 5), ("t", 1): OffsetAndMetadata(9, -1, "", 5)}
        assert set(
            (await c.offsets.handle_commit_offsets(GROUP, a.member_id, None, 1, offsets)).values()
        ) == {0}
        await c.offsets.handle_commit_offsets("solo", "", None, -1, {("u", 0): OffsetAndMetadata(1)})
        assert (await c.offsets.handle_delete_groups(["solo"]))["solo"] == 0
        c.on_resigned(0)
        assert c.validate_group_status(GROUP) == E.not_coordinator
        await h.load()
        group = h.group()
        assert group.state is GroupState.STABLE and group.generation_id == 1
        assert set(group.members) == {a.member_id, b.member_id}
        assert group.get(a.member_id).assignment == a.member_id.encode()
        assert group.offsets == offsets
        assert h.manager.get_group("solo") is None
        assert c.handle_heartbeat(GROUP, a.member_id, None, 1) == 0  # members keep going

    run(scenario())


def test_load_in_progress_and_not_coordinator() -> None:
    async def scenario() -> None:
        h = Harness()
        c = h.coordinator
        assert c.validate_group_status(GROUP) == E.not_coordinator
        h.manager.begin_loading(0, 0)
        assert h.join()[0].error == E.coordinator_load_in_progress
        assert c.handle_heartbeat(GROUP, "m", None, 1) == 0  # answered blindly while loading
        assert h.sync("m", 1)[0].error == E.rebalance_in_progress

    run(scenario())


def test_delete_groups_and_offsets() -> None:
    async def scenario() -> None:
        h = Harness()
        c = h.coordinator
        a, b = await stable_group(h)
        assert await c.offsets.handle_delete_groups([GROUP, "missing"]) == {
            GROUP: E.non_empty_group,
            "missing": E.group_id_not_found,
        }
        err, res = await c.offsets.handle_delete_offsets(GROUP, [("t", 0)])
        assert err == E.non_empty_group  # subscription bytes are not ConsumerProtocol here
        c.handle_leave_group(GROUP, [(a.member_id, None), (b.member_id, None)])
        assert h.group().state is GroupState.EMPTY
        await c.offsets.handle_commit_offsets(
            GROUP, "", None, -1, {("t", 0): OffsetAndMetadata(1), ("t", 1): OffsetAndMetadata(2)}
        )
        assert await c.offsets.handle_delete_offsets(GROUP, [("t", 0)]) == (0, {("t", 0): 0})
        assert c.offsets.handle_fetch_offsets(GROUP, None) == (0, {("t", 1): OffsetAndMetadata(2)})
        assert await c.offsets.handle_delete_groups([GROUP]) == {GROUP: 0}
        assert c.offsets.handle_fetch_offsets(GROUP, None) == (0, {})

    run(scenario())


def test_offset_expiration_for_empty_groups() -> None:
    async def scenario() -> None:
        h = Harness(offsets_retention_ms=60_000)
        c = h.coordinator
        await h.load()
        now = h.scheduler.now_ms()
        await c.offsets.handle_commit_offsets(
            "solo", "", None, -1, {("t", 0): OffsetAndMetadata(1, commit_timestamp_ms=now)}
        )
        assert await c.offsets.expire_offsets() == 0
        h.scheduler.advance(60_001)
        assert await c.offsets.expire_offsets() == 1
        assert h.manager.get_group("solo") is None

    run(scenario())


@pytest.mark.parametrize("state_filter", [None, {"stable"}, {"Empty"}])
def test_list_and_describe(state_filter: set[str] | None) -> None:
    async def scenario() -> None:
        h = Harness()
        c = h.coordinator
        await stable_group(h)
        err, groups = c.offsets.handle_list_groups(state_filter)
        expected = [] if state_filter == {"Empty"} else [(GROUP, "consumer", "Stable", "classic")]
        assert err == 0 and groups == expected
        err, summary = c.offsets.handle_describe_group(GROUP)
        assert summary.state == "Stable" and summary.protocol == "range" and len(summary.members) == 2
        assert all(m.metadata == b"range-meta" for m in summary.members)
        assert c.offsets.handle_describe_group("unknown")[1].state == "Dead"

    run(scenario())


def test_retried_join_and_sync_answer_the_replaced_request() -> None:
    async def scenario() -> None:
        h = Harness()
        a, b = await stable_group(h)
        first = h.join(a.member_id, protocols=[("range", b"v2"), ("roundrobin", b"")])  # parked
        retry = h.join(a.member_id, protocols=[("range", b"v2"), ("roundrobin", b"")])
        assert first[0].error == E.rebalance_in_progress and not retry
        rb = h.join(b.member_id)
        assert retry[0].generation_id == rb[0].generation_id == 2
        follower = b if retry[0].leader_id == a.member_id else a
        s1 = h.sync(follower.member_id, 2)
        s2 = h.sync(follower.member_id, 2)
        assert s1[0].error == E.rebalance_in_progress and not s2
        leader = a if follower is b else b
        h.sync(leader.member_id, 2, {follower.member_id: b"F"})
        await settle()
        assert s2[0].assignment == b"F"

    run(scenario())


def test_join_or_commit_during_a_group_deletion_cannot_revive_it() -> None:
    """Kafka's handleDeleteGroups turns the group Dead before writing its tombstones: a
    JoinGroup or OffsetCommit interleaving with the write is refused (retriable), not applied
    to a group that is then removed (issue #14: every await in coordinator state changes)."""

    async def scenario() -> None:
        h = Harness()
        c = h.coordinator
        await h.load()
        await c.offsets.handle_commit_offsets(GROUP, "", None, -1, {("t", 0): OffsetAndMetadata(1)})
        deleting = asyncio.ensure_future(c.offsets.handle_delete_groups([GROUP]))
        await asyncio.sleep(0)  # the deletion is now waiting on its append
        assert h.join()[0].error == E.coordinator_not_available
        late = await c.offsets.handle_commit_offsets(GROUP, "", None, -1, {("t", 1): OffsetAndMetadata(5)})
        assert late == {("t", 1): E.coordinator_not_available}
        assert await deleting == {GROUP: 0}
        assert h.manager.get_group(GROUP) is None
        # a failed deletion leaves the group usable
        await c.offsets.handle_commit_offsets("other", "", None, -1, {("t", 0): OffsetAndMetadata(1)})
        h.logs[0].fail_next = E.not_leader_or_follower
        assert await c.offsets.handle_delete_groups(["other"]) == {
            "other": E.not_coordinator
        }  # mapped as Kafka
        assert h.manager.get_group("other").state is GroupState.EMPTY

    run(scenario())
