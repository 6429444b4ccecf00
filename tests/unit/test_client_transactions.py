"""The transactional producer's state machine (TransactionManager + its request handlers), driven
with constructed responses (pure logic: nothing is sent): Java's states and transitions, the
request order, EndTxn waiting for batches and skipped for empty transactions, fatal vs abortable
errors as Java raises them, the KIP-360 epoch bump after an abortable produce error."""

from __future__ import annotations

import math
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from spark_kafkalite.client.errors import IllegalStateError, TransactionAbortedError
from spark_kafkalite.client.producer import send_path
from spark_kafkalite.client.producer.native_extensions import SEND_PATH
from spark_kafkalite.client.producer.producer_batch import ProducerBatch
from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator
from spark_kafkalite.client.producer.transaction_manager import TransactionManager
from spark_kafkalite.client.producer.transaction_state import State, is_transition_valid
from spark_kafkalite.client.producer.txn_request_handlers import (
    AddOffsetsToTxnHandler,
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnOffsetCommitHandler,
)
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    ProducerFencedError,
    error_for_code,
)
from spark_kafkalite.protocol.native import load_twin
from spark_kafkalite.protocol.record_encoding import MemoryRecordsBuilder

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def ok(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(error_code=0, **fields)


def err(code: int) -> SimpleNamespace:
    return SimpleNamespace(error_code=int(code), producer_id=-1, producer_epoch=-1)


def add_partitions_response(code: int, *tps: TopicPartition) -> SimpleNamespace:
    return SimpleNamespace(
        results_by_topic_v3_and_below=[
            SimpleNamespace(
                name=tp.topic,
                results_by_partition=[
                    SimpleNamespace(partition_index=tp.partition, partition_error_code=code)
                ],
            )
            for tp in tps
        ]
    )


def respond(handler: Any, response: Any) -> None:
    """What the Sender does: the handler is in flight, then its future completes."""
    handler.tm.in_flight_request = handler
    future = RequestFuture()
    future.add_callback(handler.on_complete)
    future.success(response)


def initialized(epoch: int = 0) -> TransactionManager:
    tm = TransactionManager("txn-1", 60000, 100)
    result = tm.initialize_transactions()
    assert tm.state is State.INITIALIZING
    handler = tm.next_request(False)
    assert isinstance(handler, InitProducerIdHandler) and not handler.is_epoch_bump
    respond(handler, ok(producer_id=42, producer_epoch=epoch))
    assert result.is_successful and tm.state is State.READY
    result.await_result(0)  # what init_transactions does; until then other calls are refused
    return tm


def batch_for(tm: TransactionManager, tp: TopicPartition) -> ProducerBatch:
    batch = ProducerBatch(tp, 0.0, 0)
    batch.try_append_record(b"k", b"v", 1, None, 30, 16384)
    tm.txn_partition_map.assign_sequence(batch)
    return batch


def in_transaction_with(tm: TransactionManager, *tps: TopicPartition) -> None:
    tm.begin_transaction()
    tm.maybe_add_partitions(tps)
    handler = tm.next_request(True)
    assert isinstance(handler, AddPartitionsToTxnHandler) and handler.partitions == set(tps)
    respond(handler, add_partitions_response(0, *tps))
    assert tm.partitions_in_transaction == set(tps)


def test_transition_table_follows_java() -> None:
    assert is_transition_valid(State.READY, State.IN_TRANSACTION)
    assert not is_transition_valid(State.IN_TRANSACTION, State.IN_TRANSACTION)
    assert not is_transition_valid(State.READY, State.COMMITTING_TRANSACTION)
    assert is_transition_valid(State.ABORTABLE_ERROR, State.ABORTING_TRANSACTION)
    assert not is_transition_valid(State.ABORTABLE_ERROR, State.COMMITTING_TRANSACTION)
    assert is_transition_valid(State.ABORTING_TRANSACTION, State.INITIALIZING)  # KIP-360 bump
    assert all(is_transition_valid(s, State.FATAL_ERROR) for s in State)
    assert not any(is_transition_valid(State.FATAL_ERROR, s) for s in State if s is not State.FATAL_ERROR)


def test_commit_flow_adds_partitions_before_draining_and_waits_for_batches() -> None:
    tm = initialized()
    tm.begin_transaction()
    batch = ProducerBatch(TP, 0.0, 0)
    assert tm.should_stop_drain(TP, batch)  # not yet in the transaction
    tm.maybe_add_partitions([TP, TP1])
    handler = tm.next_request(True)
    assert isinstance(handler, AddPartitionsToTxnHandler)
    assert tm.should_stop_drain(TP, batch)  # pending
    respond(handler, add_partitions_response(0, TP, TP1))
    assert not tm.should_stop_drain(TP, batch)
    drained = batch_for(tm, TP)
    assert drained.is_transactional and drained.producer_id == 42 and drained.base_sequence == 0
    result = tm.begin_commit()
    assert tm.state is State.COMMITTING_TRANSACTION
    assert tm.next_request(True) is None  # EndTxn waits for incomplete batches
    end = tm.next_request(False)
    assert isinstance(end, EndTxnHandler) and end.committed
    respond(end, ok())
    assert result.is_successful and tm.state is State.READY
    assert not tm.partitions_in_transaction and not tm.transaction_started
    result.await_result(0)
    # a second transaction: the partition must be added again
    tm.begin_transaction()
    assert tm.should_stop_drain(TP, ProducerBatch(TP, 0.0, 0))


def test_empty_transaction_sends_no_end_txn() -> None:
    tm = initialized()
    tm.begin_transaction()
    result = tm.begin_commit()
    assert tm.next_request(False) is None
    assert result.is_successful and tm.state is State.READY


def test_calls_out_of_order_raise_illegal_state() -> None:
    tm = TransactionManager("txn-1")
    with pytest.raises(IllegalStateError, match="init_transactions"):
        tm.fail_if_not_ready_for_send()
    with pytest.raises(IllegalStateError, match="UNINITIALIZED to state IN_TRANSACTION"):
        tm.begin_transaction()
    tm = initialized()
    with pytest.raises(IllegalStateError, match="send in state READY"):
        tm.fail_if_not_ready_for_send()
    with pytest.raises(IllegalStateError, match="not in progress"):
        tm.send_offsets_to_transaction({TP: None}, {"group_id": "g"})  # type: ignore[dict-item]
    with pytest.raises(IllegalStateError, match="READY to state COMMITTING"):
        tm.begin_commit()
    tm.begin_transaction()
    tm.fail_if_not_ready_for_send()
    with pytest.raises(IllegalStateError):
        tm.begin_transaction()
    with pytest.raises(IllegalStateError, match="non-transactional"):
        TransactionManager().begin_transaction()


def test_fenced_end_txn_is_fatal_and_every_later_call_raises_producer_fenced() -> None:
    tm = initialized()
    in_transaction_with(tm, TP)
    result = tm.begin_commit()
    end = tm.next_request(False)
    respond(end, err(ErrorCode.producer_fenced))
    assert tm.state is State.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        result.await_result(0)
    with pytest.raises(ProducerFencedError):
        tm.begin_transaction()
    with pytest.raises(ProducerFencedError):
        tm.begin_abort()
    assert tm.should_stop_drain(TP, ProducerBatch(TP, 0.0, 0))


def test_invalid_producer_epoch_from_init_producer_id_is_fenced() -> None:
    tm = TransactionManager("txn-1")
    result = tm.initialize_transactions()
    respond(tm.next_request(False), err(ErrorCode.invalid_producer_epoch))
    with pytest.raises(ProducerFencedError):
        result.await_result(0)


def test_failed_batch_is_abortable_then_abort_bumps_the_epoch() -> None:
    tm = initialized(epoch=3)
    in_transaction_with(tm, TP)
    batch = batch_for(tm, TP)
    unknown = error_for_code(ErrorCode.unknown_producer_id)
    # a transactional producer does not bump its epoch locally
    assert not tm.txn_partition_map.can_retry(batch, unknown)
    tm.handle_failed_batch(batch, unknown, expired=False)
    assert tm.state is State.ABORTABLE_ERROR and tm.epoch_bump_required
    with pytest.raises(KafkaError, match="error state"):
        tm.begin_commit()
    with pytest.raises(KafkaError, match="error state"):
        tm.fail_if_not_ready_for_send()
    result = tm.begin_abort()
    assert tm.state is State.ABORTING_TRANSACTION
    end = tm.next_request(False)
    assert isinstance(end, EndTxnHandler) and not end.committed
    respond(end, ok())
    assert tm.state is State.INITIALIZING  # KIP-360: InitProducerId with our id and epoch follows
    bump = tm.next_request(False)
    assert isinstance(bump, InitProducerIdHandler) and bump.is_epoch_bump
    assert (bump.producer_id, bump.producer_epoch) == (42, 3)
    assert not result.is_completed  # the abort completes with the bump
    respond(bump, ok(producer_id=42, producer_epoch=4))
    assert result.is_successful and tm.state is State.READY
    result.await_result(0)
    tm.begin_transaction()
    tm.maybe_add_partitions([TP])
    respond(tm.next_request(True), add_partitions_response(0, TP))
    assert batch_for(tm, TP).base_sequence == 0  # sequences restart with the new epoch


def test_transaction_aborted_batches_do_not_change_the_state() -> None:
    tm = initialized()
    in_transaction_with(tm, TP)
    tm.begin_abort()
    batch = ProducerBatch(TP, 0.0, 0)
    tm.handle_failed_batch(batch, TransactionAbortedError("x"), expired=False)
    assert tm.state is State.ABORTING_TRANSACTION


def test_retriable_produce_error_during_commit_is_abortable_without_bump() -> None:
    tm = initialized()
    in_transaction_with(tm, TP)
    batch = batch_for(tm, TP)
    result = tm.begin_commit()
    tm.handle_failed_batch(batch, NotLeaderOrFollowerError("gave up"), expired=False)
    assert tm.state is State.ABORTABLE_ERROR and not tm.epoch_bump_required
    assert tm.next_request(False) is None  # EndTxn(commit) fails with the batch's error
    with pytest.raises(NotLeaderOrFollowerError):
        result.await_result(0)


def test_coordinator_errors_are_retried_after_a_new_lookup() -> None:
    tm = initialized()
    in_transaction_with(tm, TP)
    result = tm.begin_commit()
    end = tm.next_request(False)
    respond(end, err(ErrorCode.not_coordinator))
    find = tm.next_request(False)
    assert isinstance(find, FindCoordinatorHandler) and find.key == "txn-1" and find.key_type == 1
    respond(find, ok(node_id=2, host="h", port=9))
    assert tm.coordinator(1) == (2, "h", 9)
    again = tm.next_request(False)
    assert again is end and again.is_retry
    respond(again, err(ErrorCode.concurrent_transactions))
    again = tm.next_request(False)
    assert again is end
    respond(again, ok())
    assert result.is_successful


def test_concurrent_transactions_on_the_first_add_partitions_retries_sooner() -> None:
    tm = initialized()
    tm.begin_transaction()
    tm.maybe_add_partitions([TP])
    handler = tm.next_request(True)
    respond(handler, add_partitions_response(ErrorCode.concurrent_transactions, TP))
    assert tm.next_request(True) is handler and handler.retry_backoff_ms == 20


def test_send_offsets_adds_offsets_then_commits_them_to_the_group_coordinator() -> None:
    from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata

    tm = initialized()
    tm.begin_transaction()
    offsets = {TP: OffsetAndMetadata(10), TP1: OffsetAndMetadata(20, metadata="m")}
    group = {"group_id": "g", "generation_id": 5, "member_id": "m-1", "group_instance_id": None}
    result = tm.send_offsets_to_transaction(offsets, group)
    add = tm.next_request(False)
    assert isinstance(add, AddOffsetsToTxnHandler) and add.coordinator_type == 1
    respond(add, ok())
    commit = tm.next_request(False)
    assert isinstance(commit, TxnOffsetCommitHandler) and commit.coordinator_type == 0
    assert commit.coordinator_key == "g" and not result.is_completed
    topics = [
        SimpleNamespace(
            name="t",
            partitions=[
                SimpleNamespace(partition_index=0, error_code=0),
                SimpleNamespace(partition_index=1, error_code=int(ErrorCode.coordinator_load_in_progress)),
            ],
        )
    ]
    respond(commit, SimpleNamespace(topics=topics))
    retry = tm.next_request(False)
    assert retry is commit and commit.pending == {TP1: OffsetAndMetadata(20, metadata="m")}
    topics[0].partitions = [SimpleNamespace(partition_index=1, error_code=0)]
    respond(retry, SimpleNamespace(topics=topics))
    assert result.is_successful and tm.transaction_started
    end_result = tm.begin_commit()
    assert isinstance(tm.next_request(False), EndTxnHandler)  # offsets alone make EndTxn needed
    assert not end_result.is_completed


def test_group_mismatch_in_txn_offset_commit_is_abortable() -> None:
    from spark_kafkalite.client.consumer.consumer_offsets import CommitFailedError
    from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata

    tm = initialized()
    tm.begin_transaction()
    result = tm.send_offsets_to_transaction({TP: OffsetAndMetadata(1)}, {"group_id": "g"})
    respond(tm.next_request(False), ok())
    topics = [
        SimpleNamespace(
            name="t",
            partitions=[SimpleNamespace(partition_index=0, error_code=int(ErrorCode.illegal_generation))],
        )
    ]
    respond(tm.next_request(False), SimpleNamespace(topics=topics))
    assert tm.state is State.ABORTABLE_ERROR
    with pytest.raises(CommitFailedError):
        result.await_result(0)


def test_a_timed_out_call_is_retried_with_the_same_result() -> None:
    tm = initialized()
    in_transaction_with(tm, TP)
    first = tm.begin_commit()
    with pytest.raises(KafkaTimeoutError):
        first.await_result(1)
    assert tm.begin_commit() is first
    with pytest.raises(IllegalStateError, match="timed out and must be retried"):
        tm.begin_abort()
    respond(tm.next_request(False), ok())
    first.await_result(0)
    tm.begin_transaction()  # the acknowledged result no longer blocks other calls


def _send_paths() -> list[ModuleType]:
    """The reference ``send_path`` and the compiled one when the producer uses it."""
    active = load_twin(SEND_PATH)
    return [send_path] if active is send_path else [send_path, active]


@pytest.mark.parametrize("impl", _send_paths(), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_a_send_after_begin_commit_or_abort_raises(impl: ModuleType) -> None:
    """Issue #12 review: a send in one thread that had passed its IN_TRANSACTION check could
    append its record after another thread began the commit; drained after EndTxn, it landed
    past the COMMIT marker in a transaction no coordinator knows. Now begin_commit/begin_abort
    close the open batches under the accumulator's lock and a new batch needs an open
    transaction: the send raises (Java: IllegalStateException), in both send implementations
    (the compiled one appends to an open batch without calling the accumulator)."""
    tm = initialized()
    accumulator = RecordAccumulator(transaction_manager=tm)
    cluster = SimpleNamespace(partitions={"t": {0: None, 1: None}}, available_partitions=lambda topic: [0, 1])
    metadata = SimpleNamespace(_cluster=cluster, fetch=lambda: cluster)
    sender = SimpleNamespace(fatal_error=None, wakeup=lambda: None, poll_deadline_ms=math.inf)
    send = impl.SendPath(metadata, accumulator, sender, None, 1 << 20, 0.0, 5.0).send
    with pytest.raises(IllegalStateError, match="READY"):
        send("t", b"v", partition=0)  # no transaction open

    tm.begin_transaction()
    send("t", b"a", partition=0)  # a new batch
    send("t", b"b", partition=0)  # into the open batch
    commit = tm.begin_commit()
    for partition in (0, 1):  # the open batch was closed: no record joins the committing transaction
        with pytest.raises(IllegalStateError, match="COMMITTING_TRANSACTION"):
            send("t", b"late", partition=partition)
    with pytest.raises(IllegalStateError, match="COMMITTING_TRANSACTION"):
        accumulator.append_batch(TP1, MemoryRecordsBuilder(), 10, 0.0)  # the Spark sink's path
    assert accumulator.queued_partitions() == [TP]
    [batch] = accumulator._batches[TP]
    assert batch.record_count == 2

    tm.maybe_add_partitions(accumulator.queued_partitions())
    respond(tm.next_request(True), add_partitions_response(0, TP))
    assert tm.next_request(True) is None  # EndTxn waits for the batch
    batch.complete(0, -1)
    accumulator.deallocate(batch)
    accumulator._batches[TP].clear()
    respond(tm.next_request(False), ok())  # EndTxn
    commit.await_result(0)
    assert tm.state is State.READY
    with pytest.raises(IllegalStateError, match="READY"):
        send("t", b"v", partition=0)

    tm.begin_transaction()  # the next transaction accepts records again, until it is aborted
    send("t", b"c", partition=0)
    tm.begin_abort()
    with pytest.raises(IllegalStateError, match="ABORTING_TRANSACTION"):
        send("t", b"late", partition=0)
