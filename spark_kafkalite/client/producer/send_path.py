"""The body of ``KafkaProducer.send`` (Java ``KafkaProducer.doSend``): the pure-Python reference
of the compiled ``_send_path`` (issue #10), which handles the common record natively and hands
every other case to this class.

Per record: the closed / fatal-error checks, key and value to bytes, the size estimate (Java
``AbstractRecords.estimateSizeInBytesUpperBound``) against ``max.request.size``, the topic's
partitions from the cached metadata (waiting up to ``max.block.ms`` when unknown), the partition
(explicit, murmur2 of the key as Java's ``BuiltInPartitioner.partitionForKey``, or sticky for a
null key, KIP-794), the append to the ``RecordAccumulator`` and, when a batch filled up or a new
one was created, waking the Sender. Headers are normalised and callbacks wrapped only when the
caller gave some.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.client.producer.producer_batch import RECORD_OVERHEAD_ESTIMATE
from spark_kafkalite.client.types import RecordMetadata, TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidPartitionsError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    error_for_code,
)
from spark_kafkalite.protocol.record_encoding import as_bytes, murmur2

if TYPE_CHECKING:
    from spark_kafkalite.client.metadata import Cluster, Metadata
    from spark_kafkalite.client.producer.partitioner import StickyPartitioner
    from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator
    from spark_kafkalite.client.producer.sender import Sender

__all__ = ["SendPath", "IMPLEMENTATION"]

IMPLEMENTATION = "python"

log = logging.getLogger(__name__)


def normalize_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    """Record headers (a mapping or ``(str, bytes | None)`` pairs) as a list of pairs.

    Raises:
        TypeError: a header key that is not str, or a value of the wrong type.
    """
    items: Iterable[Any] = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for key, value in items:
        if not isinstance(key, str):
            raise TypeError(f"header keys must be str, not {type(key).__name__}")
        out.append((key, as_bytes(value, "header value")))
    return out


def callback_adapter(
    callback: Callable[[RecordMetadata | None, BaseException | None], None],
) -> Callable[[Future[RecordMetadata]], None]:
    """A done-callback calling Java-style ``callback(metadata, exception)``; what it raises is
    logged (a user callback must not break the I/O thread)."""

    def done(future: Future[RecordMetadata]) -> None:
        exc = future.exception()
        try:
            callback(None if exc is not None else future.result(), exc)
        except Exception:
            log.exception("producer callback failed")

    return done


def failed_future(exc: BaseException, callback: Any) -> Future[RecordMetadata]:
    """A future already failed with ``exc`` (Java reports send errors through the future)."""
    failed: Future[RecordMetadata] = Future()
    failed.set_exception(exc)
    if callback is not None:
        failed.add_done_callback(callback_adapter(callback))
    return failed


class SendPath:
    """``send`` of one producer (see module docstring). ``closed`` is set by
    ``KafkaProducer.close``."""

    __slots__ = (
        "closed",
        "_metadata",
        "_accumulator",
        "_sender",
        "_partitioner",
        "_max_request_size",
        "_max_block_ms",
        "_linger_ms",
        "_tps",
    )

    def __init__(
        self,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        sender: Sender,
        partitioner: StickyPartitioner,
        max_request_size: int,
        max_block_ms: float,
        linger_ms: float,
    ) -> None:
        self.closed = False
        self._metadata = metadata
        self._accumulator = accumulator
        self._sender = sender
        self._partitioner = partitioner
        self._max_request_size = max_request_size
        self._max_block_ms = max_block_ms
        self._linger_ms = linger_ms
        self._tps: dict[str, list[TopicPartition]] = {}  # TopicPartition objects, built once

    def send(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] | Mapping[str, bytes | None] | None = None,
        callback: Callable[[RecordMetadata | None, BaseException | None], None] | None = None,
    ) -> Future[RecordMetadata]:
        """``KafkaProducer.send`` (see there).

        Raises:
            TypeError: key, value or headers of the wrong type.
            KafkaError: the producer is closed.
            IllegalStateError: a transactional producer's transaction stopped accepting records.
        """
        if self.closed:
            raise KafkaError("cannot send after the producer is closed")
        fatal = self._sender.fatal_error
        if fatal is not None:
            return failed_future(fatal, callback)
        key_bytes = key if key is None or type(key) is bytes else as_bytes(key, "key")
        value_bytes = value if value is None or type(value) is bytes else as_bytes(value, "value")
        size = RECORD_OVERHEAD_ESTIMATE
        if key_bytes is not None:
            size += len(key_bytes)
        if value_bytes is not None:
            size += len(value_bytes)
        if headers:  # normalised (copied, type-checked) only when the caller gave some
            header_list = normalize_headers(headers)
            size += sum(len(k) + (len(v) if v else 0) + 4 for k, v in header_list)
        else:
            header_list = None
        try:
            if size > self._max_request_size:
                raise MessageTooLargeError(
                    f"the record is {size} bytes, larger than max.request.size={self._max_request_size}"
                )
            started = 0.0
            cluster = self._metadata.fetch()
            parts = cluster.partitions.get(topic)
            if not parts or (partition is not None and partition not in parts):
                started = now_ms()
                cluster = self.wait_on_metadata(topic, partition, started + self._max_block_ms)
                parts = cluster.partitions[topic]
            num_partitions = len(parts)
            if partition is not None:
                if not 0 <= partition < num_partitions:
                    raise InvalidPartitionsError(
                        f"partition {partition} is not in the range [0, {num_partitions}) of topic {topic}"
                    )
                chosen = partition
            elif key_bytes is not None:
                chosen = (murmur2(key_bytes) & 0x7FFFFFFF) % num_partitions
            else:
                chosen = self._partitioner.partition(
                    topic, cluster.available_partitions(topic), num_partitions, size
                )
            tps = self._tps.get(topic)
            if tps is None or chosen >= len(tps):
                tps = self._tps[topic] = [
                    TopicPartition(topic, p) for p in range(max(num_partitions, chosen + 1))
                ]
            future, batch_is_full, new_batch = self._accumulator.append_record(
                tps[chosen],
                key_bytes,
                value_bytes,
                None if timestamp_ms is None else int(timestamp_ms),  # None: stamped at append
                header_list,
                size,
                self._max_block_ms if not started else max(0.0, self._max_block_ms - (now_ms() - started)),
            )
        except IllegalStateError:
            raise  # a transactional record after begin_commit / begin_abort (Java throws it too)
        except KafkaError as exc:
            return failed_future(exc, callback)
        if batch_is_full or (new_batch and self._linger_ms < self._sender.poll_deadline_ms - now_ms()):
            self._sender.wakeup()
        if callback is not None:
            future.add_done_callback(callback_adapter(callback))
        return future

    def wait_on_metadata(self, topic: str, partition: int | None, deadline: float) -> Cluster:
        """Wait until the metadata has ``topic`` (and ``partition``), at most until ``deadline``
        (``now_ms`` clock); Java ``KafkaProducer.waitOnMetadata``.

        Raises:
            UnknownTopicOrPartitionError / KafkaTimeoutError: the topic did not show up.
            InvalidPartitionsError: the topic has no such partition.
            KafkaError: the topic's metadata carries another error.
        """
        self._metadata.add_topics(topic)
        while True:
            version = self._metadata.request_update()
            self._sender.wakeup()
            remaining = deadline - now_ms()
            if remaining <= 0:
                break
            self._metadata.await_update(version, remaining / 1000.0)
            cluster = self._metadata.fetch()
            parts = cluster.partitions.get(topic)
            if parts and (partition is None or partition in parts):
                return cluster
            code = cluster.topic_errors.get(topic)
            if code is not None and code not in (
                ErrorCode.unknown_topic_or_partition,
                ErrorCode.leader_not_available,
            ):
                raise error_for_code(code, f"topic {topic}")
            if parts and partition is not None and partition not in parts:
                raise InvalidPartitionsError(
                    f"partition {partition} is not in the range [0, {len(parts)}) of topic {topic}"
                )
        cluster = self._metadata.fetch()
        message = f"topic {topic} not present in metadata after {self._max_block_ms:.0f} ms"
        if cluster.topic_errors.get(topic) == ErrorCode.unknown_topic_or_partition:
            raise error_for_code(ErrorCode.unknown_topic_or_partition, message)
        raise KafkaTimeoutError(message)
