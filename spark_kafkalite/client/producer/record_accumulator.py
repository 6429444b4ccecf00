"""``RecordAccumulator``: per-partition queues of ``ProducerBatch``es (Java ``RecordAccumulator``).

User threads ``append`` records; the Sender thread asks which leader nodes have ``ready``
batches (full, lingered ``linger.ms``, flushing, closing, or a retry whose ``retry.backoff.ms``
has passed) and ``drain``s at most one batch per partition per request, up to
``max.request.size`` per node. Memory is bounded by ``buffer.memory``: ``append`` blocks up to
``max.block.ms`` for space, then raises ``KafkaTimeoutError``. Batches that waited longer than
``delivery.timeout.ms`` are expired. Thread-safe (one lock).

With a transactional producer the lock also orders appends against the transaction's
``begin_commit`` / ``begin_abort`` (:meth:`hold_appends`; see ``transaction_manager``): a record
that starts a new batch is checked under the lock, the open batches are closed when the
transaction stops accepting records.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.metadata import Cluster
from spark_kafkalite.client.network_client import now_ms
from spark_kafkalite.client.producer.native_extensions import BATCH_STATE
from spark_kafkalite.client.producer.producer_batch import ProducerBatch, Record
from spark_kafkalite.client.types import RecordMetadata, TopicPartition
from spark_kafkalite.protocol.errors import KafkaError, KafkaTimeoutError, MessageTooLargeError
from spark_kafkalite.protocol.native import load_twin
from spark_kafkalite.protocol.record_batch import RECORD_BATCH_OVERHEAD

if TYPE_CHECKING:
    from spark_kafkalite.client.producer.batch_state import AccumulatorState
    from spark_kafkalite.client.producer.transaction_manager import TransactionManager
else:
    AccumulatorState = load_twin(BATCH_STATE).AccumulatorState

__all__ = ["RecordAccumulator", "ReadyCheckResult"]


@dataclass(slots=True)
class ReadyCheckResult:
    ready_nodes: set[int] = field(default_factory=set)
    next_ready_check_delay_ms: float = math.inf
    unknown_leader_topics: set[str] = field(default_factory=set)


class RecordAccumulator(AccumulatorState):
    """See module docstring. Sizes in bytes, times in ms (monotonic clock). ``_used_bytes``,
    ``_closed`` and ``_batches`` live in ``AccumulatorState`` (C members when compiled, for the
    compiled ``send``)."""

    def __init__(
        self,
        *,
        batch_size: int = 16384,
        linger_ms: float = 5,
        buffer_memory: int = 33554432,
        delivery_timeout_ms: float = 120000,
        retry_backoff_ms: float = 100,
        compression_type: int = 0,
        guarantee_order: bool = False,
        transaction_manager: TransactionManager | None = None,
    ) -> None:
        self.batch_size = max(1, batch_size)
        self.linger_ms = max(0.0, float(linger_ms))
        self.buffer_memory = buffer_memory
        self.delivery_timeout_ms = float(delivery_timeout_ms)
        self.retry_backoff_ms = float(retry_backoff_ms)
        self.compression_type = compression_type
        self.guarantee_order = guarantee_order
        self.transaction_manager = transaction_manager
        if transaction_manager is not None:
            transaction_manager.accumulator = self
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)
        self._done = threading.Condition(self._lock)
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._muted: set[TopicPartition] = set()
        self._used_bytes = 0
        self._waiters = 0
        self._flushes_in_progress = 0
        self._closed = False
        self._drain_index = 0

    # -------------------------------------------------------------- user side

    def append(
        self, tp: TopicPartition, record: Record, record_size: int, max_block_ms: float
    ) -> tuple[Future[RecordMetadata], bool, bool]:
        """``append_record`` of a ``(key, value, timestamp_ms or None, headers)`` tuple."""
        key, value, ts, headers = record
        return self.append_record(tp, key, value, ts, headers, record_size, max_block_ms)

    def append_record(
        self,
        tp: TopicPartition,
        key: bytes | None,
        value: bytes | None,
        ts: int | None,
        headers: Any,
        record_size: int,
        max_block_ms: float,
    ) -> tuple[Future[RecordMetadata], bool, bool]:
        """Add one record to the last batch of ``tp`` (or a new one); ``ts`` None stamps it
        with the current time (CreateTime).

        Returns ``(future, batch_is_full, new_batch_created)``; the Sender should be woken when
        either flag is set.

        Raises:
            KafkaError: the accumulator is closed.
            MessageTooLargeError: ``record_size`` exceeds ``buffer.memory``.
            KafkaTimeoutError: no buffer space within ``max_block_ms``.
        """
        with self._lock:
            if self._closed:
                raise KafkaError("producer is closed")
            if self._used_bytes + record_size > self.buffer_memory:  # always so when the record
                if record_size > self.buffer_memory:  # alone is larger than buffer.memory
                    raise MessageTooLargeError(
                        f"record of {record_size} bytes is larger than buffer.memory={self.buffer_memory}"
                    )
                self._wait_for_space(record_size, max_block_ms)
            dq = self._batches.get(tp)
            if dq:
                last = dq[-1]
                if not last.in_retry:
                    future = last.try_append_record(key, value, ts, headers, record_size, self.batch_size)
                    if future is not None:
                        self._used_bytes += record_size
                        return future, len(dq) > 1 or last.size_bytes >= self.batch_size, False
            elif dq is None:
                dq = self._batches[tp] = deque()
            self._check_new_batch()
            batch = ProducerBatch(tp, now_ms(), self.compression_type)
            # raises before any change
            future = batch.try_append_record(key, value, ts, headers, record_size, self.batch_size)
            if future is None:  # an empty, open batch takes any record
                raise RuntimeError(f"a new batch for {tp.topic}-{tp.partition} refused its first record")
            self._used_bytes += record_size
            dq.append(batch)
            self._incomplete.add(batch)
            return future, len(dq) > 1 or batch.size_bytes >= self.batch_size, True

    def append_batch(
        self, tp: TopicPartition, builder: Any, size_bytes: int, max_block_ms: float
    ) -> ProducerBatch:
        """Queue records already encoded into ``builder`` (a ``MemoryRecordsBuilder`` of at most
        about ``batch.size`` bytes) as one closed batch of ``tp``: the batch-level append used by
        the Spark sink. ``size_bytes`` (the records' size) is charged to ``buffer.memory``,
        blocking up to ``max_block_ms`` for space. The batch is ready at once when it is full,
        else after ``linger.ms`` like any other; it gets its sequence when drained and is retried
        as a whole. Returns the batch (``batch.result()`` is its future).

        Raises:
            KafkaError: the accumulator is closed.
            MessageTooLargeError: ``size_bytes`` exceeds ``buffer.memory``.
            KafkaTimeoutError: no buffer space within ``max_block_ms``.
        """
        if size_bytes > self.buffer_memory:
            raise MessageTooLargeError(
                f"record batch of {size_bytes} bytes is larger than buffer.memory={self.buffer_memory}"
            )
        with self._lock:
            if self._closed:
                raise KafkaError("producer is closed")
            if self._used_bytes + size_bytes > self.buffer_memory:
                self._wait_for_space(size_bytes, max_block_ms)
            self._check_new_batch()
            self._used_bytes += size_bytes
            batch = ProducerBatch(tp, now_ms(), self.compression_type, builder, size_bytes)
            dq = self._batches.get(tp)
            if dq is None:
                dq = self._batches[tp] = deque()
            dq.append(batch)
            self._incomplete.add(batch)
            return batch

    def _check_new_batch(self) -> None:
        """Under the lock, before a new batch: a transactional producer's record needs a
        transaction accepting records (raises ``IllegalStateError`` otherwise)."""
        tm = self.transaction_manager
        if tm is not None and tm.transactional_id is not None:
            tm.fail_if_not_accepting_sends()

    def hold_appends(self, change: Callable[[], None]) -> None:
        """Run ``change`` (a transaction stops accepting records) with every append held off,
        then close the open batch of each partition, so that a later record needs a new batch
        and its check (the compiled ``send`` appends to an open batch without one)."""
        with self._lock:
            change()
            for dq in self._batches.values():
                if dq:
                    dq[-1].closed = True

    def _wait_for_space(self, size: int, max_block_ms: float) -> None:
        deadline = now_ms() + max_block_ms
        self._waiters += 1
        try:
            while self._used_bytes + size > self.buffer_memory and not self._closed:
                remaining = deadline - now_ms()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"failed to allocate {size} bytes within max.block.ms={max_block_ms:.0f} "
                        f"(buffer.memory={self.buffer_memory}, in use {self._used_bytes})"
                    )
                self._space.wait(remaining / 1000.0)
            if self._closed:
                raise KafkaError("producer is closed")
        finally:
            self._waiters -= 1

    # -------------------------------------------------------------- sender side

    def ready(self, cluster: Cluster, now: float) -> ReadyCheckResult:
        """Leader nodes with at least one sendable batch, and when to check again."""
        result = ReadyCheckResult()
        with self._lock:
            exhausted = self._waiters > 0
            force = exhausted or self._closed or self._flushes_in_progress > 0
            for tp, dq in self._batches.items():
                if not dq:
                    continue
                leader = cluster.leader_for(tp)
                if leader is None:
                    result.unknown_leader_topics.add(tp.topic)
                    continue
                if leader in result.ready_nodes or tp in self._muted:
                    continue
                batch = dq[0]
                backing_off = batch.attempts > 0 and now < batch.last_attempt_ms + self.retry_backoff_ms
                if backing_off:
                    result.next_ready_check_delay_ms = min(
                        result.next_ready_check_delay_ms, batch.last_attempt_ms + self.retry_backoff_ms - now
                    )
                    continue
                waited = now - batch.created_ms
                full = len(dq) > 1 or batch.is_full(self.batch_size)
                if full or force or batch.attempts > 0 or waited >= self.linger_ms:
                    result.ready_nodes.add(leader)
                else:
                    result.next_ready_check_delay_ms = min(
                        result.next_ready_check_delay_ms, self.linger_ms - waited
                    )
        return result

    def drain(
        self, cluster: Cluster, nodes: Iterable[int], max_request_size: int, now: float
    ) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node in ``nodes``, up to
        ``max_request_size`` bytes per node (always at least one batch)."""
        wanted = set(nodes)
        if not wanted:
            return {}
        out: dict[int, list[ProducerBatch]] = {}
        with self._lock:
            tps = [tp for tp, dq in self._batches.items() if dq]
            if not tps:
                return {}
            start = self._drain_index % len(tps)
            self._drain_index += 1
            sizes: dict[int, int] = {}
            for tp in tps[start:] + tps[:start]:
                leader = cluster.leader_for(tp)
                if leader is None or leader not in wanted or tp in self._muted:
                    continue
                dq = self._batches[tp]
                batch = dq[0]
                if batch.attempts > 0 and now < batch.last_attempt_ms + self.retry_backoff_ms:
                    continue
                size = sizes.get(leader, 0)
                if size and size + batch.size_bytes > max_request_size:
                    continue
                tm = self.transaction_manager
                if tm is not None:
                    if tm.should_stop_drain(tp, batch):
                        continue
                    tm.txn_partition_map.assign_sequence(batch)
                dq.popleft()
                sizes[leader] = size + batch.size_bytes
                out.setdefault(leader, []).append(batch)
                if self.guarantee_order:
                    self._muted.add(tp)
        return out

    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch to retry back at the head of its partition's queue; with idempotence,
        after the queued retries of lower sequence (Java ``insertInSequenceOrder``)."""
        with self._lock:
            batch.last_attempt_ms = now
            batch.in_retry = True
            dq = self._batches.setdefault(batch.tp, deque())
            if batch.base_sequence < 0:
                dq.appendleft(batch)
                return
            i = 0
            while i < len(dq) and dq[i].base_sequence >= 0 and dq[i].base_sequence < batch.base_sequence:
                i += 1
            dq.insert(i, batch)

    def unmute(self, tp: TopicPartition) -> None:
        with self._lock:
            self._muted.discard(tp)

    def expired_batches(self, now: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than ``delivery.timeout.ms``."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for dq in self._batches.values():
                while dq and now - dq[0].created_ms >= self.delivery_timeout_ms:
                    expired.append(dq.popleft())
        return expired

    def deallocate(self, batch: ProducerBatch) -> None:
        """Release a completed batch's memory and wake flushers / blocked appenders."""
        with self._lock:
            if batch in self._incomplete:
                self._incomplete.discard(batch)
                self._used_bytes -= batch.size_bytes - RECORD_BATCH_OVERHEAD
                self._space.notify_all()
                self._done.notify_all()

    # -------------------------------------------------------------- flush / close

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def has_incomplete(self) -> bool:
        with self._lock:
            return bool(self._incomplete)

    def begin_flush(self) -> list[ProducerBatch]:
        """Make every batch ready now; returns the batches the flush waits for."""
        with self._lock:
            self._flushes_in_progress += 1
            return list(self._incomplete)

    def end_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress -= 1

    def await_completion(self, batches: list[ProducerBatch], timeout_ms: float | None) -> bool:
        """Wait until every batch in ``batches`` is done; False on timeout."""
        with self._lock:
            return self._done.wait_for(
                lambda: all(b.done for b in batches),
                None if timeout_ms is None else timeout_ms / 1000.0,
            )

    def close(self) -> None:
        """No more appends; every remaining batch becomes ready."""
        with self._lock:
            self._closed = True
            self._space.notify_all()

    def queued_partitions(self) -> list[TopicPartition]:
        """Partitions with at least one batch waiting to be drained."""
        with self._lock:
            return [tp for tp, dq in self._batches.items() if dq]

    def abort_undrained_batches(self, exc: BaseException) -> None:
        """Fail the queued batches that never got a sequence (never sent), e.g. when a
        transaction is aborted (Java ``abortUndrainedBatches``); retries of sent batches stay."""
        aborted: list[ProducerBatch] = []
        with self._lock:
            for dq in self._batches.values():
                keep = [b for b in dq if b.base_sequence >= 0]
                if len(keep) != len(dq):
                    aborted.extend(b for b in dq if b.base_sequence < 0)
                    dq.clear()
                    dq.extend(keep)
        for batch in aborted:
            batch.fail(exc)
            self.deallocate(batch)

    def abort_incomplete(self, exc: BaseException) -> None:
        """Fail every batch not yet completed (forced close)."""
        with self._lock:
            batches = list(self._incomplete)
            for dq in self._batches.values():
                dq.clear()
        for batch in batches:
            batch.fail(exc)
            self.deallocate(batch)
