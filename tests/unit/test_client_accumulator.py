"""RecordAccumulator batching, readiness, draining, memory back-pressure, expiry and the
batch-shared futures (pure logic, no network)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait

import pytest

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.metadata import Cluster, PartitionMetadata
from spark_kafkalite.client.producer.producer_batch import ProducerBatch
from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator
from spark_kafkalite.client.types import RecordMetadata, TopicPartition
from spark_kafkalite.protocol.errors import KafkaTimeoutError, MessageTooLargeError
from spark_kafkalite.protocol.record_batch import decode_batch

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
T2 = TopicPartition("t", 2)


def cluster(leaders: dict[TopicPartition, int]) -> Cluster:
    parts: dict[str, dict[int, PartitionMetadata]] = {}
    for tp, leader in leaders.items():
        parts.setdefault(tp.topic, {})[tp.partition] = PartitionMetadata(
            tp.topic, tp.partition, leader, 0, (leader,), (leader,), (), 0
        )
    return Cluster(nodes={1: ("h", 1), 2: ("h", 2)}, partitions=parts)


def record(i: int, size: int = 10) -> tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]:
    return (None, b"x" * size, 1_000 + i, [])


def test_records_fill_batches_up_to_batch_size() -> None:
    acc = RecordAccumulator(batch_size=61 + 3 * 31, linger_ms=1000)
    results = [acc.append(T0, record(i), 31, 0) for i in range(7)]
    new_batches = [r[2] for r in results]
    assert new_batches == [True, False, False, True, False, False, True]
    # the third record fills the first batch: the sender should be woken
    assert results[2][1] is True
    ready = acc.ready(cluster({T0: 1}), now_ms())
    assert ready.ready_nodes == {1}  # more than one batch queued = full


def test_linger_delays_readiness_and_reports_the_wait() -> None:
    acc = RecordAccumulator(batch_size=16384, linger_ms=50)
    acc.append(T0, record(0), 31, 0)
    now = now_ms()
    result = acc.ready(cluster({T0: 1}), now)
    assert result.ready_nodes == set()
    assert 0 < result.next_ready_check_delay_ms <= 50
    assert acc.ready(cluster({T0: 1}), now + 51).ready_nodes == {1}


def test_flush_and_close_make_batches_ready_immediately() -> None:
    acc = RecordAccumulator(batch_size=16384, linger_ms=10_000)
    acc.append(T0, record(0), 31, 0)
    c = cluster({T0: 1})
    assert acc.ready(c, now_ms()).ready_nodes == set()
    acc.begin_flush()
    assert acc.ready(c, now_ms()).ready_nodes == {1}
    acc.end_flush()
    acc.close()
    assert acc.ready(c, now_ms()).ready_nodes == {1}


def test_unknown_leader_is_reported() -> None:
    acc = RecordAccumulator(linger_ms=0)
    acc.append(TopicPartition("other", 0), record(0), 31, 0)
    result = acc.ready(cluster({T0: 1}), now_ms())
    assert result.unknown_leader_topics == {"other"}
    assert result.ready_nodes == set()


def test_drain_takes_one_batch_per_partition_for_ready_nodes_within_max_request_size() -> None:
    acc = RecordAccumulator(batch_size=61 + 31, linger_ms=0)
    for tp in (T0, T0, T1, T2):
        acc.append(tp, record(0), 31, 0)
    c = cluster({T0: 1, T1: 1, T2: 2})
    drained = acc.drain(c, {1}, max_request_size=10_000, now=now_ms())
    assert set(drained) == {1}
    assert sorted(b.tp for b in drained[1]) == [T0, T1]
    # the second T0 batch and T2 (node 2, not ready) stay queued
    assert acc.has_undrained()
    drained = acc.drain(c, {1, 2}, max_request_size=92, now=now_ms())
    assert [b.tp for b in drained[1]] == [T0]
    assert [b.tp for b in drained[2]] == [T2]
    assert not acc.has_undrained()


def test_a_drained_batch_encodes_its_records() -> None:
    acc = RecordAccumulator(linger_ms=0)
    acc.append(T0, (b"k", b"v", 123, [("h", None)]), 40, 0)
    acc.append(T0, (None, None, 124, []), 21, 0)
    batch = acc.drain(cluster({T0: 1}), {1}, 1 << 20, now_ms())[1][0]
    decoded = decode_batch(batch.encoded())
    assert decoded.keys == [b"k", None]
    assert decoded.values == [b"v", None]
    assert decoded.timestamps_ms == [123, 124]
    assert decoded.headers == [[("h", None)], []]


def test_retried_batch_waits_for_backoff_and_takes_no_new_records() -> None:
    acc = RecordAccumulator(linger_ms=0, retry_backoff_ms=50)
    acc.append(T0, record(0), 31, 0)
    c = cluster({T0: 1})
    now = now_ms()
    batch = acc.drain(c, {1}, 1 << 20, now)[1][0]
    batch.attempts = 1
    acc.reenqueue(batch, now)
    _, _, new_batch = acc.append(T0, record(1), 31, 0)
    assert new_batch  # never appended to a batch that is being retried
    assert acc.ready(c, now + 10).ready_nodes == set()
    assert acc.ready(c, now + 60).ready_nodes == {1}
    assert acc.drain(c, {1}, 1 << 20, now + 60)[1][0] is batch


def test_buffer_memory_blocks_then_times_out() -> None:
    acc = RecordAccumulator(buffer_memory=100, linger_ms=0)
    acc.append(T0, record(0), 60, 0)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        acc.append(T0, record(1), 60, 50)
    assert 0.04 <= time.monotonic() - started < 2
    with pytest.raises(MessageTooLargeError):
        acc.append(T0, record(2), 101, 0)


def test_buffer_memory_is_released_when_a_batch_completes() -> None:
    acc = RecordAccumulator(buffer_memory=100, linger_ms=0)
    acc.append(T0, record(0), 60, 0)
    batch = acc.drain(cluster({T0: 1}), {1}, 1 << 20, now_ms())[1][0]

    def complete_later() -> None:
        time.sleep(0.05)
        batch.complete(0, -1)
        acc.deallocate(batch)

    threading.Thread(target=complete_later).start()
    future, _, _ = acc.append(T0, record(1), 60, 5_000)  # blocks until the first batch is freed
    assert not future.done()


def test_expired_batches_are_removed() -> None:
    acc = RecordAccumulator(delivery_timeout_ms=20, linger_ms=1000)
    acc.append(T0, record(0), 31, 0)
    assert acc.expired_batches(now_ms()) == []
    expired = acc.expired_batches(now_ms() + 25)
    assert len(expired) == 1 and not acc.has_undrained()


def test_flush_waits_for_the_batches_incomplete_at_its_start() -> None:
    acc = RecordAccumulator(linger_ms=0)
    acc.append(T0, record(0), 31, 0)
    batches = acc.begin_flush()
    assert not acc.await_completion(batches, 10)
    batch = acc.drain(cluster({T0: 1}), {1}, 1 << 20, now_ms())[1][0]
    batch.complete(5, -1)
    acc.deallocate(batch)
    assert acc.await_completion(batches, 10)
    acc.end_flush()


def test_batch_futures_complete_with_offsets_and_timestamps() -> None:
    batch = ProducerBatch(T1, now_ms(), 0)
    futures = [batch.try_append(record(i), 31, 1 << 20) for i in range(3)]
    seen: list[RecordMetadata] = []
    futures[1].add_done_callback(lambda f: seen.append(f.result()))
    assert futures[0].cancel() is False  # as in Java: records cannot be cancelled
    batch.complete(40, -1)
    assert [f.result(timeout=0) for f in futures] == [
        RecordMetadata("t", 1, 40, 1000),
        RecordMetadata("t", 1, 41, 1001),
        RecordMetadata("t", 1, 42, 1002),
    ]
    assert seen == [RecordMetadata("t", 1, 41, 1001)]
    assert batch.complete(99, -1) is False  # completes once


def test_batch_futures_log_append_time_and_acks0() -> None:
    batch = ProducerBatch(T0, now_ms(), 0)
    f = batch.try_append(record(0), 31, 1 << 20)
    batch.complete(-1, 777)
    assert f.result() == RecordMetadata("t", 0, -1, 777)


def test_waiters_on_sibling_futures_all_wake_with_their_own_result() -> None:
    batch = ProducerBatch(T0, now_ms(), 0)
    futures = [batch.try_append(record(i), 31, 1 << 20) for i in range(20)]
    results: dict[int, int] = {}

    def waiter(i: int) -> None:
        results[i] = futures[i].result(timeout=5).offset

    threads = [threading.Thread(target=waiter, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    batch.complete(100, -1)
    for t in threads:
        t.join(5)
    assert results == {i: 100 + i for i in range(20)}
    done, not_done = wait(futures, timeout=1)
    assert len(done) == 20 and not not_done


def test_batch_failure_fails_every_future() -> None:
    batch = ProducerBatch(T0, now_ms(), 0)
    futures = [batch.try_append(record(i), 31, 1 << 20) for i in range(2)]
    batch.fail(KafkaTimeoutError("expired"))
    for f in futures:
        with pytest.raises(KafkaTimeoutError):
            f.result(timeout=0)


def test_append_batch_queues_a_closed_prebuilt_batch() -> None:
    from spark_kafkalite.protocol.record_encoding import MemoryRecordsBuilder

    acc = RecordAccumulator(batch_size=16384, linger_ms=10_000, buffer_memory=1000)
    builder = MemoryRecordsBuilder()
    for i in range(3):
        builder.append(b"k", b"v%d" % i, 1000 + i, None)
    batch = acc.append_batch(T0, builder, builder.size_bytes, 0)
    assert batch.record_count == 3 and batch.size_bytes == 61 + builder.size_bytes
    # closed: ready without waiting for linger.ms, and takes no more records
    assert acc.ready(cluster({T0: 1}), now_ms()).ready_nodes == {1}
    _, _, new_batch = acc.append(T0, record(0), 31, 0)
    assert new_batch
    with pytest.raises(KafkaTimeoutError):  # buffer.memory back-pressure counts the batch
        acc.append_batch(T1, builder, 990, 20)
    drained = acc.drain(cluster({T0: 1}), {1}, 1 << 20, now_ms())[1][0]
    assert drained is batch
    assert decode_batch(batch.encoded()).values == [b"v0", b"v1", b"v2"]
    result = batch.result()
    batch.complete(70, -1)
    acc.deallocate(batch)
    assert result.result(timeout=0) == 70


def test_record_futures_work_with_as_completed_and_late_callbacks() -> None:
    from concurrent.futures import as_completed

    batch = ProducerBatch(T0, now_ms(), 0)
    futures = [batch.try_append(record(i), 31, 1 << 20) for i in range(3)]
    threading.Timer(0.05, lambda: batch.complete(10, -1)).start()
    assert sorted(f.result().offset for f in as_completed(futures, timeout=5)) == [10, 11, 12]
    seen: list[int] = []
    futures[2].add_done_callback(lambda f: seen.append(f.result().offset))  # already done: runs now
    assert seen == [12]
    assert batch.result().result(timeout=0) == 10
