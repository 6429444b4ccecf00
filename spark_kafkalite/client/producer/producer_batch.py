"""``ProducerBatch``: records bound for one partition, sent as one RecordBatch v2 (Java
``ProducerBatch``). Records are kept as ``RecordTuple``s and encoded once, on first send."""

from __future__ import annotations

import struct
import threading
from concurrent.futures import Future

import crc32c

from spark_kafkalite.client.producer.future_record_metadata import complete_futures, fail_futures, new_future
from spark_kafkalite.client.types import RecordMetadata, TopicPartition
from spark_kafkalite.protocol.record_batch import RECORD_BATCH_OVERHEAD, encode_batch

__all__ = ["ProducerBatch", "RECORD_OVERHEAD_ESTIMATE", "Record"]

#: Upper bound of a record's framing in a v2 batch (length, attributes, timestamp and offset
#: deltas, key/value lengths, header count varints), like Java's ``DefaultRecord`` estimate.
RECORD_OVERHEAD_ESTIMATE = 21

_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer id, epoch, base sequence at byte 43

Record = tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]


class ProducerBatch:
    """A batch under construction or in flight. ``size_bytes`` is an estimate of the encoded size."""

    __slots__ = (
        "tp",
        "records",
        "futures",
        "size_bytes",
        "created_ms",
        "attempts",
        "last_attempt_ms",
        "done",
        "_encoded",
        "compression_type",
        "in_retry",
        "condition",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "on_wire",
    )

    def __init__(self, tp: TopicPartition, created_ms: float, compression_type: int) -> None:
        self.tp = tp
        self.records: list[Record] = []
        self.futures: list[Future[RecordMetadata]] = []
        self.size_bytes = RECORD_BATCH_OVERHEAD
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
        self.on_wire = False  # a request carrying this batch awaits its response

    def try_append(self, record: Record, record_size: int, batch_size: int) -> Future[RecordMetadata] | None:
        """Append and return the record's future, or None if the batch is non-empty and the
        record would take it past ``batch_size``."""
        if self.records and self.size_bytes + record_size > batch_size:
            return None
        future = new_future(self.condition)
        self.records.append(record)
        self.futures.append(future)
        self.size_bytes += record_size
        return future

    def is_full(self, batch_size: int) -> bool:
        return self.size_bytes >= batch_size

    @property
    def record_count(self) -> int:
        return len(self.records)

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record (wraps past Int.MAX_VALUE); -1 without a sequence."""
        if self.base_sequence < 0:
            return -1
        last = self.base_sequence + len(self.records) - 1
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
        """The RecordBatch v2 bytes (encoded on first call, reused for retries)."""
        if self._encoded is None:
            self._encoded = encode_batch(
                self.records,
                compression_type=self.compression_type,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence,
            )
        return self._encoded

    def complete(self, base_offset: int, log_append_time_ms: int) -> bool:
        """Resolve every record's future with its ``RecordMetadata``. Returns False if the batch
        was already completed (e.g. expired) and nothing was done."""
        if self.done:
            return False
        self.done = True
        topic, partition = self.tp
        new = tuple.__new__
        n = len(self.records)
        offsets = range(base_offset, base_offset + n) if base_offset >= 0 else [-1] * n
        if log_append_time_ms >= 0:
            timestamps = [log_append_time_ms] * n
        else:
            timestamps = [r[2] for r in self.records]
        results = [
            new(RecordMetadata, (topic, partition, o, t)) for o, t in zip(offsets, timestamps, strict=True)
        ]
        complete_futures(self.condition, self.futures, results)
        return True

    def fail(self, exc: BaseException) -> bool:
        """Fail every record's future with ``exc``. Returns False if already completed."""
        if self.done:
            return False
        self.done = True
        fail_futures(self.condition, self.futures, exc)
        return True
