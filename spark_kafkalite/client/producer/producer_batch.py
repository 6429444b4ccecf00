"""``ProducerBatch``: records bound for one partition, sent as one RecordBatch v2 (Java
``ProducerBatch`` + ``ProduceRequestResult``).

Records are varint-encoded into the batch's ``MemoryRecordsBuilder`` as they are appended (the
compiled builder when available, see ``protocol.record_encoding``); the batch header, compression
and CRC are added once, on first send. A batch can also be handed over already built (the Spark
sink encodes whole Arrow batches): it then takes no more records and has no per-record futures,
only its batch-level ``result`` future.
"""

from __future__ import annotations

import struct
import threading
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

import crc32c

from spark_kafkalite.client.producer.future_record_metadata import (
    FAST_FUTURES,
    FutureRecordMetadata,
    complete_plain,
    complete_watchers,
    run_callbacks,
)
from spark_kafkalite.client.producer.native_extensions import BATCH_STATE
from spark_kafkalite.client.types import RecordMetadata, TopicPartition
from spark_kafkalite.protocol.native import load_twin
from spark_kafkalite.protocol.record_batch import RECORD_BATCH_OVERHEAD
from spark_kafkalite.protocol.record_encoding import MemoryRecordsBuilder
from spark_kafkalite.protocol.record_layout import MAX_RECORD_OVERHEAD

if TYPE_CHECKING:
    from spark_kafkalite.client.producer.batch_state import BatchState
else:
    BatchState = load_twin(BATCH_STATE).BatchState

__all__ = ["ProducerBatch", "RECORD_OVERHEAD_ESTIMATE", "Record"]

#: Upper bound of a record's framing in a v2 batch (Java's ``DefaultRecord.MAX_RECORD_OVERHEAD``).
RECORD_OVERHEAD_ESTIMATE = MAX_RECORD_OVERHEAD

_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer id, epoch, base sequence at byte 43

#: (key, value, CreateTime ms or None for "now, at append", headers)
Record = tuple[bytes | None, bytes | None, int | None, Any]


class ProducerBatch(BatchState):
    """A batch under construction or in flight. ``size_bytes`` is the estimate the accumulator
    charged to ``buffer.memory`` (61 + the records' estimated sizes). ``builder``, ``count``,
    ``size_bytes``, ``closed``, ``in_retry`` and ``done`` live in ``BatchState`` (C members when
    compiled, for the compiled ``send``)."""

    __slots__ = (
        "tp",
        "created_ms",
        "attempts",
        "last_attempt_ms",
        "_encoded",
        "compression_type",
        "condition",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "on_wire",
        "base_offset",
        "log_append_time_ms",
        "error",
        "record_errors",
        "watchers",
        "plain_futures",
        "_result",
    )

    def __init__(
        self,
        tp: TopicPartition,
        created_ms: float,
        compression_type: int,
        builder: Any = None,
        size_bytes: int | None = None,
    ) -> None:
        self.tp = tp
        self.closed = builder is not None  # a prebuilt batch takes no more records
        self.builder = builder if builder is not None else MemoryRecordsBuilder()
        self.count = self.builder.record_count
        self.size_bytes = (
            RECORD_BATCH_OVERHEAD + (size_bytes if size_bytes is not None else self.builder.size_bytes)
            if self.closed
            else RECORD_BATCH_OVERHEAD
        )
        self.created_ms = created_ms
        self.attempts = 0
        self.last_attempt_ms = created_ms
        self.done = False
        self.in_retry = False
        self.compression_type = compression_type
        self.condition = threading.Condition()
        self._encoded: bytes | None = None
        self.producer_id = -1  # idempotence: set by the TransactionManager when first drained
        self.producer_epoch = -1
        self.base_sequence = -1
        self.is_transactional = False  # set with the producer state by a transactional producer
        self.on_wire = False  # a request carrying this batch awaits its response
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        # KIP-467: (errors of the records the broker named, error of every other record)
        self.record_errors: tuple[dict[int, BaseException], BaseException] | None = None
        self.watchers: list[Any] = []  # record futures with callbacks or waiters, in order
        self.plain_futures: list[Future[RecordMetadata]] | None = None if FAST_FUTURES else []
        self._result: Future[int] | None = None

    def try_append(self, record: Record, record_size: int, batch_size: int) -> Future[RecordMetadata] | None:
        """``try_append_record`` of a ``(key, value, timestamp_ms or None, headers)`` tuple."""
        key, value, ts, headers = record
        return self.try_append_record(key, value, ts, headers, record_size, batch_size)

    def try_append_record(
        self,
        key: bytes | None,
        value: bytes | None,
        ts: int | None,
        headers: Any,
        record_size: int,
        batch_size: int,
    ) -> Future[RecordMetadata] | None:
        """Append one record (``ts`` None: CreateTime now, read by the builder) and return its
        future, or None if the batch is closed or non-empty and the record would take it past
        ``batch_size``.

        Raises:
            TypeError: bad header types (nothing is appended).
        """
        count = self.count
        if self.closed or (count and self.size_bytes + record_size > batch_size):
            return None
        if ts is None:
            ts = self.builder.append_now(key, value, headers)
        else:
            self.builder.append(key, value, ts, headers)
        self.count = count + 1
        self.size_bytes += record_size
        if self.plain_futures is None:
            return FutureRecordMetadata(self, count, ts)
        future: Future[RecordMetadata] = Future()
        future._kafkalite_ts = ts  # type: ignore[attr-defined]
        self.plain_futures.append(future)
        return future

    def is_full(self, batch_size: int) -> bool:
        return self.closed or self.size_bytes >= batch_size

    @property
    def record_count(self) -> int:
        return self.count

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps past Int.MAX_VALUE); -1 without a sequence."""
        if self.base_sequence < 0:
            return -1
        last = self.base_sequence + self.count - 1
        return last - 2**31 if last > 2**31 - 1 else last

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Set (or, after an epoch bump, rewrite) the idempotence fields of the batch header."""
        self.producer_id, self.producer_epoch, self.base_sequence = producer_id, producer_epoch, base_sequence
        if self._encoded is not None:  # patch bytes 43..56 and the CRC (covers 21..end)
            buf = bytearray(self._encoded)
            _PRODUCER_FIELDS.pack_into(buf, 43, producer_id, producer_epoch, base_sequence)
            struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
            self._encoded = bytes(buf)

    def encoded(self) -> bytes:
        """The RecordBatch v2 bytes (built on first call, reused for retries)."""
        if self._encoded is None:
            self.closed = True
            self._encoded = self.builder.build(
                compression_type=self.compression_type,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
                is_transactional=self.is_transactional,
            )
            self.builder = None  # the records live on in the encoded bytes only
        return self._encoded

    def result(self) -> Future[int]:
        """A future of the whole batch: its base offset (-1 with acks=0), or its error (Java
        ``ProduceRequestResult``). Created on first call."""
        with self.condition:
            if self._result is None:
                self._result = Future()
                if self.done:
                    _resolve(self._result, self.base_offset, self.error)
            return self._result

    def complete(self, base_offset: int, log_append_time_ms: int) -> bool:
        """Record the batch's outcome: every record future resolves from it. Returns False if the
        batch was already completed (e.g. expired) and nothing was done."""
        return self._finish(base_offset, log_append_time_ms, None)

    def fail(
        self,
        exc: BaseException,
        record_errors: tuple[dict[int, BaseException], BaseException] | None = None,
    ) -> bool:
        """Fail the batch with ``exc`` (Java ``ProducerBatch.completeExceptionally``): every record
        with ``exc``, or, with ``record_errors`` (KIP-467: ``(errors by index in the batch, error of
        the other records)``), each record with its own. Returns False if already completed."""
        return self._finish(-1, -1, exc, record_errors)

    def error_of(self, index: int) -> BaseException | None:
        """The error of record ``index`` of the batch (None: not failed, or not done yet)."""
        record_errors = self.record_errors
        if record_errors is None:
            return self.error
        by_index, other = record_errors
        return by_index.get(index, other)

    def _finish(
        self,
        base_offset: int,
        log_append_time_ms: int,
        error: BaseException | None,
        record_errors: tuple[dict[int, BaseException], BaseException] | None = None,
    ) -> bool:
        with self.condition:
            if self.done:
                return False
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self.record_errors = record_errors
            self.done = True
            watchers = self.watchers
            if watchers:
                complete_watchers(watchers, error)
            self.condition.notify_all()
        if self.plain_futures:
            results = None
            if error is None:
                topic, partition = self.tp
                results = [
                    RecordMetadata(
                        topic,
                        partition,
                        base_offset + i if base_offset >= 0 else -1,
                        log_append_time_ms if log_append_time_ms >= 0 else f._kafkalite_ts,  # type: ignore[attr-defined]
                    )
                    for i, f in enumerate(self.plain_futures)
                ]
            complete_plain(self.plain_futures, results, error, self.error_of)
        if watchers:
            run_callbacks(watchers)
        if self._result is not None:
            _resolve(self._result, base_offset, error)
        return True


def _resolve(future: Future[int], base_offset: int, error: BaseException | None) -> None:
    try:
        if error is None:
            future.set_result(base_offset)
        else:
            future.set_exception(error)
    except InvalidStateError:  # resolved concurrently by result()
        pass
