"""The transaction coordinator's state machine with an in-memory ``__transaction_state`` and a
recording marker sender (pure logic: no sockets). Kafka's TransactionCoordinatorTest /
TransactionMetadataTest, in small."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from broker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from broker.coordinator.transaction.transaction_marker_channel_manager import (
    BrokerMarkerSender,
    TransactionMarkerChannelManager,
)
from broker.coordinator.transaction.transaction_metadata import (
    IllegalTransactionStateError,
    TransactionMetadata,
    TransactionState,
)
from broker.coordinator.transaction.transaction_state_manager import (
    TransactionConfig,
    TransactionStateManager,
)
from broker.log.log_results import FetchDataInfo
from broker.replication.broker_connection import BrokerConnectionError
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.errors import ErrorCode as E
from spark_kafkalite.protocol.record_batch import decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from spark_kafkalite.protocol.transaction_records import decode_transaction_log_value

S = TransactionState
TXN = "tx"


class MemoryLog:
    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.log_start_offset = 0
        self.log_end_offset = 0

    def read(self, offset: int, max_bytes: int, max_offset: int | None = None) -> FetchDataInfo:
        data = b"".join(self.batches)
        return FetchDataInfo(data, offset if data else -1)

    def values(self) -> list[Any]:
        return [
            None if v is None else decode_transaction_log_value(v)
            for batch in decode_batches(b"".join(self.batches))
            for v in batch.values
        ]


class MemoryAppender:
    def __init__(self) -> None:
        self.logs: dict[int, MemoryLog] = {}
        self.fail_next = 0

    async def append(
        self, topic: str, partition: int, records: Sequence[tuple[bytes, bytes | None]], timeout_ms: int
    ) -> int:
        await asyncio.sleep(0)
        if self.fail_next:
            code, self.fail_next = self.fail_next, 0
            return code
        log = self.logs.setdefault(partition, MemoryLog())
        log.batches.append(encode_batch([(k, v, 0, []) for k, v in records], base_offset=log.log_end_offset))
        log.log_end_offset += len(records)
        return 0


class RecordingSender:
    """Answers WriteTxnMarkers with queued per-call outcomes (default: NONE everywhere)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, int, bool, int, list[tuple[str, int]]]] = []
        self.outcomes: list[Any] = []
        self.gate: asyncio.Event | None = None

    async def write_txn_markers(
        self, broker_id: int, pid: int, epoch: int, committed: bool, coordinator_epoch: int, partitions: Any
    ) -> dict[tuple[str, int], int]:
        self.calls.append((broker_id, pid, epoch, committed, coordinator_epoch, list(partitions)))
        if self.gate is not None:
            await self.gate.wait()
        outcome = self.outcomes.pop(0) if self.outcomes else 0
        if isinstance(outcome, BaseException):
            raise outcome
        return {tp: outcome for tp in partitions}


class Harness:
    def __init__(self, **config: Any) -> None:
        self.now = 1_000_000
        self.appender = MemoryAppender()
        self.manager = TransactionStateManager(
            TransactionConfig(num_partitions=1, **config), self.appender, lambda: self.now
        )
        self.leaders: dict[tuple[str, int], int | None] = {
            ("t", 0): 1,
            ("t", 1): 2,
            ("__consumer_offsets", 0): 1,
        }
        self.sender = RecordingSender()
        self.markers = TransactionMarkerChannelManager(
            self.manager, lambda t, p: self.leaders.get((t, p)), self.sender, retry_backoff_ms=1
        )
        self.next_pid = 100

        async def generate() -> int:
            self.next_pid += 1
            return self.next_pid

        self.coordinator = TransactionCoordinator(self.manager, self.markers, generate)
        self.coordinator.startup()

    async def load(self, epoch: int = 0) -> None:
        self.manager.begin_loading(0, epoch)
        await self.manager.load_partition(0, epoch, self.appender.logs.get(0), self._resend)

    def _resend(self, coordinator_epoch: int, metadata: TransactionMetadata, complete: Any) -> None:
        self.markers.add_txn_markers_to_send(
            coordinator_epoch, complete.state is S.COMPLETE_COMMIT, metadata, complete
        )

    def meta(self) -> TransactionMetadata:
        error, current = self.manager.get_transaction_state(TXN)
        assert error == 0 and current is not None
        return current.metadata

    async def settle(self) -> None:
        for task in list(self.markers._pending.values()):
            await task

    def log_states(self) -> list[str]:
        return [S.from_id(v.state).state_name for v in self.appender.logs[0].values()]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_init_producer_id_new_then_bump_and_retry() -> None:
    async def scenario() -> None:
        h = Harness()
        assert (await h.coordinator.handle_init_producer_id(TXN, 60000, None)).error == E.not_coordinator
        await h.load()
        first = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        assert (first.error, first.producer_id, first.producer_epoch) == (0, 101, 0)
        second = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        assert (second.producer_id, second.producer_epoch) == (101, 1)
        # KIP-360: the producer sends its (pid, epoch); a retry with the previous epoch answers the same
        third = await h.coordinator.handle_init_producer_id(TXN, 60000, (101, 1))
        assert (third.error, third.producer_epoch) == (0, 2)
        retry = await h.coordinator.handle_init_producer_id(TXN, 60000, (101, 1))
        assert (retry.error, retry.producer_epoch) == (0, 2)
        assert (await h.coordinator.handle_init_producer_id(TXN, 60000, (101, 0))).error == E.producer_fenced
        assert (await h.coordinator.handle_init_producer_id(TXN, 60000, (555, 0))).error == E.producer_fenced
        for bad in (0, -5, 900001):
            assert (
                await h.coordinator.handle_init_producer_id(TXN, bad, None)
            ).error == E.invalid_transaction_timeout
        assert (await h.coordinator.handle_init_producer_id("", 60000, None)).error == E.invalid_request
        assert h.log_states() == ["Empty"] * 4

    run(scenario())


def test_commit_flow_writes_markers_then_complete() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        r = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        pid, epoch = r.producer_id, r.producer_epoch
        c = h.coordinator
        assert await c.handle_end_transaction(TXN, pid, epoch, True) == E.invalid_txn_state  # nothing open
        assert await c.handle_add_partitions_to_transaction(TXN, pid, epoch, {("t", 0)}) == 0
        assert h.meta().txn_start_timestamp_ms == h.now
        h.now += 10
        assert await c.handle_add_partitions_to_transaction(TXN, pid, epoch, {("t", 0)}) == 0  # no new record
        assert await c.handle_add_partitions_to_transaction(TXN, pid, epoch, {("t", 1)}) == 0
        assert await c.handle_add_partitions_to_transaction(TXN, pid + 1, epoch, {("t", 1)}) == (
            E.invalid_producer_id_mapping
        )
        assert (
            await c.handle_add_partitions_to_transaction(TXN, pid, epoch + 1, {("t", 1)}) == E.producer_fenced
        )
        h.sender.gate = asyncio.Event()
        assert await c.handle_end_transaction(TXN, pid, epoch, True) == 0
        assert h.meta().state is S.PREPARE_COMMIT
        # while markers are pending: retries answer CONCURRENT_TRANSACTIONS, the opposite INVALID_TXN_STATE
        assert await c.handle_end_transaction(TXN, pid, epoch, True) == E.concurrent_transactions
        assert await c.handle_end_transaction(TXN, pid, epoch, False) == E.concurrent_transactions
        assert (
            await c.handle_add_partitions_to_transaction(TXN, pid, epoch, {("t", 0)})
            == E.concurrent_transactions
        )
        assert (await c.handle_init_producer_id(TXN, 60000, None)).error == E.concurrent_transactions
        h.sender.gate.set()
        await h.settle()
        assert sorted((b, ps[0]) for b, *_, ps in h.sender.calls) == [(1, ("t", 0)), (2, ("t", 1))]
        assert {(p, e, committed, ce) for _b, p, e, committed, ce, _ in h.sender.calls} == {
            (pid, epoch, True, 0)
        }
        m = h.meta()
        assert (m.state, m.topic_partitions, m.pending_state) == (S.COMPLETE_COMMIT, set(), None)
        assert await c.handle_end_transaction(TXN, pid, epoch, True) == 0  # idempotent retry
        assert await c.handle_end_transaction(TXN, pid, epoch, False) == E.invalid_txn_state
        assert h.log_states() == ["Empty", "Ongoing", "Ongoing", "PrepareCommit", "CompleteCommit"]
        last = h.appender.logs[0].values()[-1]
        assert last.partitions == () and last.start_timestamp_ms == 1_000_000

    run(scenario())


def test_marker_retries_and_deleted_topic() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        r = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        c = h.coordinator
        await c.handle_add_partitions_to_transaction(TXN, r.producer_id, 0, {("t", 0), ("t", 1), ("gone", 0)})
        h.leaders[("t", 1)] = -1  # no leader yet: waits
        h.sender.outcomes = [int(E.not_leader_or_follower), BrokerConnectionError("down")]
        assert await c.handle_end_transaction(TXN, r.producer_id, 0, False) == 0
        for _ in range(500):
            await asyncio.sleep(0.002)
            if h.meta().topic_partitions == {("t", 1)}:
                break
        # "gone" dropped, t-0 written on the third try, t-1 waits for a leader
        assert h.meta().topic_partitions == {("t", 1)} and h.meta().state is S.PREPARE_ABORT
        h.leaders[("t", 1)] = 2
        await h.settle()
        assert h.meta().state is S.COMPLETE_ABORT
        assert [ps for *_, ps in h.sender.calls] == [[("t", 0)]] * 3 + [[("t", 1)]]

    run(scenario())


def test_marker_stops_on_fenced_epoch() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        r = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        await h.coordinator.handle_add_partitions_to_transaction(TXN, r.producer_id, 0, {("t", 0)})
        h.sender.outcomes = [int(E.invalid_producer_epoch)]
        assert await h.coordinator.handle_end_transaction(TXN, r.producer_id, 0, True) == 0
        await h.settle()
        assert h.meta().state is S.PREPARE_COMMIT and h.log_states()[-1] == "PrepareCommit"

    run(scenario())


def test_init_fences_ongoing_transaction_by_aborting_it() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        r = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        pid = r.producer_id
        await h.coordinator.handle_add_partitions_to_transaction(TXN, pid, 0, {("t", 0)})
        h.sender.gate = asyncio.Event()
        fenced = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        assert fenced.error == E.concurrent_transactions
        m = h.meta()
        assert (m.state, m.producer_epoch) == (S.PREPARE_ABORT, 1)
        # the zombie (epoch 0) is fenced
        assert await h.coordinator.handle_end_transaction(TXN, pid, 0, True) == E.producer_fenced
        assert (
            await h.coordinator.handle_add_partitions_to_transaction(TXN, pid, 0, {("t", 1)})
            == E.producer_fenced
        )
        h.sender.gate.set()
        await h.settle()
        assert h.sender.calls[0][1:4] == (pid, 1, False)  # ABORT marker with the bumped epoch
        again = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        assert (again.error, again.producer_id, again.producer_epoch) == (0, pid, 2)
        assert h.log_states() == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort", "Empty"]

    run(scenario())


def test_timed_out_transaction_is_aborted_and_producer_fenced() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        r = await h.coordinator.handle_init_producer_id(TXN, 1000, None)
        await h.coordinator.handle_add_partitions_to_transaction(TXN, r.producer_id, 0, {("t", 0)})
        assert await h.coordinator.abort_timed_out_transactions() == 0
        h.now += 1001
        assert await h.coordinator.abort_timed_out_transactions() == 1
        await h.settle()
        m = h.meta()
        assert (m.state, m.producer_epoch) == (S.COMPLETE_ABORT, 1)
        assert await h.coordinator.handle_end_transaction(TXN, r.producer_id, 0, True) == E.producer_fenced

    run(scenario())


def test_append_failure_clears_pending_state() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        r = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        h.appender.fail_next = int(E.not_enough_replicas)
        code = await h.coordinator.handle_add_partitions_to_transaction(TXN, r.producer_id, 0, {("t", 0)})
        assert code == E.coordinator_not_available
        m = h.meta()
        assert (m.state, m.pending_state, m.topic_partitions) == (S.EMPTY, None, set())
        h.appender.fail_next = int(E.not_leader_or_follower)
        assert (await h.coordinator.handle_init_producer_id(TXN, 60000, None)).error == E.not_coordinator

    run(scenario())


def test_reload_resends_markers_of_prepared_transaction() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        r = await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        await h.coordinator.handle_add_partitions_to_transaction(TXN, r.producer_id, 0, {("t", 0)})
        h.sender.gate = asyncio.Event()
        assert await h.coordinator.handle_end_transaction(TXN, r.producer_id, 0, True) == 0
        await asyncio.sleep(0)
        # leadership moves away and comes back in a new epoch: the old sender stops, the new one resends
        assert h.manager.unload_partition(0) == 1
        assert h.manager.get_transaction_state(TXN)[0] == E.not_coordinator
        await h.load(epoch=1)
        h.sender.gate.set()
        await h.settle()
        m = h.meta()
        assert (m.state, m.producer_epoch) == (S.COMPLETE_COMMIT, 0)
        assert h.sender.calls[-1][4] == 1  # coordinator epoch of the reload
        desc = h.coordinator.handle_describe_transactions(TXN)
        assert (desc.error, desc.state, desc.producer_id) == (0, "CompleteCommit", r.producer_id)
        assert h.coordinator.handle_describe_transactions("nope").error == E.transactional_id_not_found

    run(scenario())


def test_list_transactions_filters() -> None:
    async def scenario() -> None:
        h = Harness()
        await h.load()
        a = await h.coordinator.handle_init_producer_id("a", 60000, None)
        await h.coordinator.handle_init_producer_id("b", 60000, None)
        await h.coordinator.handle_add_partitions_to_transaction("a", a.producer_id, 0, {("t", 0)})
        h.now += 5000
        c = h.coordinator
        assert sorted(c.handle_list_transactions([], set(), -1)[2]) == [
            ("a", a.producer_id, "Ongoing"),
            ("b", a.producer_id + 1, "Empty"),
        ]
        assert c.handle_list_transactions(["Ongoing", "Bogus"], set(), -1) == (
            0,
            ["Bogus"],
            [("a", a.producer_id, "Ongoing")],
        )
        assert c.handle_list_transactions([], {a.producer_id + 1}, -1)[2] == [
            ("b", a.producer_id + 1, "Empty")
        ]
        assert c.handle_list_transactions(["Ongoing"], set(), 6000)[2] == []
        assert c.handle_list_transactions(["Ongoing"], set(), 4000)[2] == [("a", a.producer_id, "Ongoing")]
        # v2 (KIP-1152): an RE2 pattern the whole id must match, ANDed with the other filters
        await h.coordinator.handle_init_producer_id("ab", 60000, None)
        assert sorted(t for t, _, _ in c.handle_list_transactions([], set(), -1, "a.*")[2]) == ["a", "ab"]
        assert [t for t, _, _ in c.handle_list_transactions([], set(), -1, "a")[2]] == ["a"]
        assert [t for t, _, _ in c.handle_list_transactions(["Empty"], set(), -1, "a.*")[2]] == ["ab"]
        assert len(c.handle_list_transactions([], set(), -1, "")[2]) == 3  # "" and None: no filter
        assert c.handle_list_transactions([], set(), -1, "(ab(cd") == (E.invalid_regular_expression, [], [])

    run(scenario())


def test_expired_transactional_id_gets_a_tombstone() -> None:
    async def scenario() -> None:
        h = Harness(transactional_id_expiration_ms=1000)
        await h.load()
        await h.coordinator.handle_init_producer_id(TXN, 60000, None)
        assert await h.coordinator.remove_expired_transactional_ids() == 0
        h.now += 1000
        assert await h.coordinator.remove_expired_transactional_ids() == 1
        assert h.manager.get_transaction_state(TXN) == (0, None)
        assert h.appender.logs[0].values()[-1] is None
        await h.load(epoch=1)  # the tombstone removes it on reload too
        assert h.manager.get_transaction_state(TXN) == (0, None)

    run(scenario())


def test_state_machine_rejects_illegal_transitions() -> None:
    m = TransactionMetadata(TXN, 1, -1, -1, 0, -1, 1000, S.EMPTY)
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_abort_or_commit(S.PREPARE_COMMIT, 5)  # Empty -> PrepareCommit
    transit = m.prepare_add_partitions({("t", 0)}, 5)
    with pytest.raises(IllegalTransactionStateError):
        m.prepare_add_partitions({("t", 1)}, 6)  # a transition is pending
    m.complete_transition_to(transit)
    assert m.state is S.ONGOING and m.txn_start_timestamp_ms == 5
    with pytest.raises(IllegalTransactionStateError):
        m.remove_partition(("t", 0))  # only while markers are sent
    fence = m.prepare_fence_producer_epoch()
    assert (fence.state, fence.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 1)
    with pytest.raises(IllegalTransactionStateError):
        m.complete_transition_to(fence)  # PrepareEpochFence is never persisted
    exhausted = TransactionMetadata(TXN, 1, -1, -1, 32766, -1, 1000, S.COMPLETE_COMMIT)
    with pytest.raises(IllegalTransactionStateError):
        exhausted.prepare_increment_producer_epoch(1000, None, 7)
    rotated = exhausted.prepare_producer_id_rotation(2, 1000, 7, True)
    exhausted.complete_transition_to(rotated)
    assert (exhausted.producer_id, exhausted.producer_epoch, exhausted.last_producer_epoch) == (2, 0, 32766)


def test_broker_marker_sender_batches_queued_markers() -> None:
    """Markers queued while a request is in flight go out together, one per producer id."""

    class FakeConnection:
        def __init__(self) -> None:
            self.requests: list[list[int]] = []
            self.gate = asyncio.Event()

        async def send(self, request: Any) -> Any:
            self.requests.append([int(m.producer_id) for m in request.markers])
            if len(self.requests) == 1:
                await self.gate.wait()
            cls = response_class(ApiKey.WRITE_TXN_MARKERS, 1)
            marker_cls = nested(cls, "WritableTxnMarkerResult")
            topic_cls = nested(marker_cls, "WritableTxnMarkerTopicResult")
            partition_cls = nested(topic_cls, "WritableTxnMarkerPartitionResult")
            return cls(
                markers=tuple(
                    marker_cls(
                        producer_id=m.producer_id,
                        topics=tuple(
                            topic_cls(
                                name=t.name,
                                partitions=tuple(
                                    partition_cls(partition_index=p, error_code=ErrorCode(int(m.producer_id)))
                                    for p in t.partition_indexes
                                ),
                            )
                            for t in m.topics
                        ),
                    )
                    for m in request.markers
                )
            )

    async def scenario() -> None:
        sender = BrokerMarkerSender(lambda _b: ("127.0.0.1", 1), "test", 1000)
        connection = FakeConnection()

        async def fake_connection(broker_id: int, queue: Any) -> Any:
            return connection

        sender._connection = fake_connection  # type: ignore[method-assign]
        first = asyncio.ensure_future(sender.write_txn_markers(1, 0, 0, True, 0, [("t", 0)]))
        await asyncio.sleep(0)
        others = [
            asyncio.ensure_future(sender.write_txn_markers(1, pid, 0, True, 0, [("t", pid)]))
            for pid in (2, 3, 2)
        ]
        await asyncio.sleep(0)
        connection.gate.set()
        results = await asyncio.gather(first, *others)
        assert connection.requests == [[0], [2, 3], [2]]
        assert results == [{("t", 0): 0}, {("t", 2): 2}, {("t", 3): 3}, {("t", 2): 2}]

    run(scenario())
