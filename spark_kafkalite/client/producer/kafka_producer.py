"""``KafkaProducer`` (Java ``org.apache.kafka.clients.producer.KafkaProducer``).

``send`` partitions a record (explicit partition, murmur2 of the key, or a sticky partition for
null keys), appends it to the ``RecordAccumulator`` and returns a
``concurrent.futures.Future[RecordMetadata]``; the ``Sender`` thread batches records per
partition (``batch.size``, ``linger.ms``) into ProduceRequests. Thread-safe: share one producer
between threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from spark_kafkalite.client.config import parse_acks, parse_config
from spark_kafkalite.client.metadata import Cluster, Metadata
from spark_kafkalite.client.network_client import NetworkClient, now_ms
from spark_kafkalite.client.producer.partitioner import StickyPartitioner
from spark_kafkalite.client.producer.producer_batch import RECORD_OVERHEAD_ESTIMATE
from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator
from spark_kafkalite.client.producer.sender import Sender
from spark_kafkalite.client.producer.transaction_manager import TransactionManager
from spark_kafkalite.client.types import RecordMetadata, TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidConfigError,
    InvalidPartitionsError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    error_for_code,
)
from spark_kafkalite.protocol.record_batch import COMPRESSION_CODECS, RECORD_BATCH_OVERHEAD, compress
from spark_kafkalite.protocol.record_encoding import murmur2

__all__ = ["KafkaProducer", "PRODUCER_DEFAULTS"]

log = logging.getLogger(__name__)

PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "linger.ms": 5,
    "batch.size": 16384,
    "buffer.memory": 33554432,
    "max.block.ms": 60000,
    "delivery.timeout.ms": 120000,
    "retries": 2147483647,
    "max.request.size": 1048576,
    "compression.type": "none",
    "enable.idempotence": True,
    "allow.auto.create.topics": True,
}


def _to_bytes(value: Any, what: str) -> bytes | None:
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__}")


def _normalize_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    items: Iterable[Any] = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for key, value in items:
        if not isinstance(key, str):
            raise TypeError(f"header keys must be str, not {type(key).__name__}")
        out.append((key, _to_bytes(value, "header value")))
    return out


def _callback_adapter(
    callback: Callable[[RecordMetadata | None, BaseException | None], None],
) -> Callable[[Future[RecordMetadata]], None]:
    def done(future: Future[RecordMetadata]) -> None:
        exc = future.exception()
        try:
            callback(None if exc is not None else future.result(), exc)
        except Exception:  # a user callback must not break the I/O thread
            log.exception("producer callback failed")

    return done


class KafkaProducer:
    """Produce records to Kafka.

    Config (Kafka's names; values may be strings): ``bootstrap.servers`` (required), ``acks``
    ("all"/-1, 1, 0; default all), ``linger.ms`` (5), ``batch.size`` (16384), ``buffer.memory``
    (32 MiB), ``max.block.ms`` (60000), ``delivery.timeout.ms`` (120000), ``retries``,
    ``retry.backoff.ms`` (100), ``request.timeout.ms`` (30000), ``max.request.size`` (1 MiB),
    ``compression.type`` (none, gzip; snappy/lz4/zstd need ``cramjam``), ``client.id``,
    ``max.in.flight.requests.per.connection`` (5), ``enable.idempotence`` (true),
    ``metadata.max.age.ms`` (300000), ``transactional.id`` (not supported: must be unset).

    Idempotence (KIP-98) is on by default: the producer gets a producer id (InitProducerId) and
    numbers its batches per partition, so retries (after a lost response, a disconnect or a
    leader change) never write duplicates and order is kept with up to 5 requests in flight.
    As in Java (KIP-679), idempotence needs ``acks=all``, ``retries`` > 0 and
    ``max.in.flight.requests.per.connection`` <= 5: when one of these is set otherwise and
    ``enable.idempotence`` was not given, idempotence is silently turned off; when it was given
    as true, that is an ``InvalidConfigError``. Without idempotence,
    ``max.in.flight.requests.per.connection=1`` keeps per-partition order across retries.

    Raises:
        InvalidConfigError: a bad setting.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(config or {})
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        self.config = parse_config(merged, PRODUCER_DEFAULTS, "producer")
        cfg = self.config
        self._acks = parse_acks(cfg["acks"])
        codec = str(cfg["compression.type"]).strip().lower()
        if codec not in COMPRESSION_CODECS:
            raise InvalidConfigError(f"unknown compression.type {codec!r}")
        self._compression_type = COMPRESSION_CODECS[codec]
        if self._compression_type:
            compress(b"probe", self._compression_type)  # fail now if the codec library is missing
        explicit = "enable.idempotence" in merged
        self._idempotent = self._resolve_idempotence(cfg, explicit)
        if cfg.get("transactional.id"):
            raise InvalidConfigError("transactional.id is not supported (transactions are not implemented)")
        self._max_block_ms = float(cfg["max.block.ms"])
        self._max_request_size = int(cfg["max.request.size"])
        self._buffer_memory = int(cfg["buffer.memory"])
        self._linger_ms = float(cfg["linger.ms"])
        self._metadata = Metadata(cfg, allow_auto_topic_creation=bool(cfg["allow.auto.create.topics"]))
        self._partitioner = StickyPartitioner(int(cfg["batch.size"]))
        self._tps: dict[str, list[TopicPartition]] = {}  # TopicPartition objects, built once
        max_in_flight = int(cfg["max.in.flight.requests.per.connection"])
        self._transaction_manager = TransactionManager() if self._idempotent else None
        self._accumulator = RecordAccumulator(
            batch_size=int(cfg["batch.size"]),
            linger_ms=float(cfg["linger.ms"]),
            buffer_memory=self._buffer_memory,
            delivery_timeout_ms=float(cfg["delivery.timeout.ms"]),
            retry_backoff_ms=float(cfg["retry.backoff.ms"]),
            compression_type=self._compression_type,
            guarantee_order=max_in_flight == 1,
            transaction_manager=self._transaction_manager,
        )
        self._client = NetworkClient(cfg, self._metadata)
        self._sender = Sender(
            self._client,
            self._metadata,
            self._accumulator,
            cfg,
            self._acks,
            transaction_manager=self._transaction_manager,
            idempotence_explicit=explicit and self._idempotent,
        )
        self._closed = False
        self._sender.start()

    def _resolve_idempotence(self, cfg: Mapping[str, Any], explicit: bool) -> bool:
        """Java ``ProducerConfig.postProcessAndValidateIdempotenceConfigs`` (KIP-679)."""
        if not cfg["enable.idempotence"]:
            return False
        conflicts = []
        if self._acks != -1:
            conflicts.append(f"acks must be all, not {cfg['acks']}")
        if int(cfg["retries"]) <= 0:
            conflicts.append("retries must be greater than 0")
        if int(cfg["max.in.flight.requests.per.connection"]) > 5:
            conflicts.append("max.in.flight.requests.per.connection must be at most 5")
        if not conflicts:
            return True
        if explicit:
            raise InvalidConfigError("enable.idempotence=true conflicts with: " + "; ".join(conflicts))
        log.debug("idempotence disabled (not set explicitly): %s", "; ".join(conflicts))
        return False

    @property
    def idempotent(self) -> bool:
        """Whether this producer uses idempotence (may turn False if the broker lacks it)."""
        return self._sender.transaction_manager is not None

    # -------------------------------------------------------------- sending

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
        """Queue one record; returns a future of its ``RecordMetadata``.

        ``callback(metadata, exception)`` (Java's ``Callback.onCompletion``) is called once the
        record is acknowledged (``exception`` None) or failed (``metadata`` None): on the
        producer's I/O thread, in send order per partition, so it must be quick. Exceptions it
        raises are logged and ignored.

        Without ``timestamp_ms`` the record's CreateTime is the wall-clock time at which it is
        appended to its batch (read by the native builder), i.e. after any wait for buffer space
        (Java reads it before that wait).

        Blocks up to ``max.block.ms`` for the topic's metadata and for buffer space. Kafka
        errors (unknown topic after ``max.block.ms``, record too large, buffer exhausted,
        delivery failures) are reported through the future, as Java does.

        Raises:
            TypeError: key, value or headers of the wrong type.
            KafkaError: the producer is closed.
        """
        if self._closed:
            raise KafkaError("cannot send after the producer is closed")
        fatal = self._sender.fatal_error
        if fatal is not None:
            failed_fatal: Future[RecordMetadata] = Future()
            failed_fatal.set_exception(fatal)
            if callback is not None:
                failed_fatal.add_done_callback(_callback_adapter(callback))
            return failed_fatal
        key_bytes = key if key is None or type(key) is bytes else _to_bytes(key, "key")
        value_bytes = value if value is None or type(value) is bytes else _to_bytes(value, "value")
        size = RECORD_OVERHEAD_ESTIMATE
        if key_bytes is not None:
            size += len(key_bytes)
        if value_bytes is not None:
            size += len(value_bytes)
        if headers:  # normalised (copied, type-checked) only when the caller gave some
            header_list = _normalize_headers(headers)
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
                cluster = self._wait_on_metadata(topic, partition, started + self._max_block_ms)
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
        except KafkaError as exc:
            failed: Future[RecordMetadata] = Future()
            failed.set_exception(exc)
            if callback is not None:
                failed.add_done_callback(_callback_adapter(callback))
            return failed
        if batch_is_full or (new_batch and self._linger_ms < self._sender.poll_deadline_ms - now_ms()):
            self._sender.wakeup()
        if callback is not None:
            future.add_done_callback(_callback_adapter(callback))
        return future

    def send_batch(self, topic: str, partition: int, builder: Any, size_bytes: int) -> Future[int]:
        """Queue records already encoded into ``builder`` (a ``MemoryRecordsBuilder`` from
        ``protocol.record_encoding``, at most about ``batch.size`` bytes) for ``topic``
        ``partition`` as one batch: the batch-level append of the Spark sink. The batch goes
        through the same accumulator as ``send`` (``linger.ms``, ``buffer.memory``
        back-pressure for up to ``max.block.ms``, idempotent sequence numbers, retries,
        ``delivery.timeout.ms``); ``size_bytes`` is what it charges to ``buffer.memory``.
        Returns a future of the batch's base offset (-1 with acks=0), or its error.

        Raises:
            KafkaError: the producer is closed.
        """
        if self._closed:
            raise KafkaError("cannot send after the producer is closed")
        failed: Future[int] = Future()
        fatal = self._sender.fatal_error
        if fatal is not None:
            failed.set_exception(fatal)
            return failed
        try:
            if size_bytes + RECORD_BATCH_OVERHEAD > self._max_request_size:
                raise MessageTooLargeError(
                    f"the record is {size_bytes + RECORD_BATCH_OVERHEAD} bytes, larger than "
                    f"max.request.size={self._max_request_size}"
                )
            batch = self._accumulator.append_batch(
                TopicPartition(topic, partition), builder, size_bytes, self._max_block_ms
            )
        except KafkaError as exc:
            failed.set_exception(exc)
            return failed
        self._sender.wakeup()
        return batch.result()

    def sticky_partition_runs(self, topic: str, cumulative_sizes: Sequence[int]) -> list[tuple[int, int]]:
        """Partitions for consecutive keyless records of ``topic`` as ``send`` would pick them
        (sticky, KIP-794), in runs: see ``StickyPartitioner.partition_runs``. Waits up to
        ``max.block.ms`` for the topic's metadata.

        Raises:
            UnknownTopicOrPartitionError / KafkaTimeoutError: the topic did not show up.
        """
        cluster = self._metadata.fetch()
        if topic not in cluster.partitions:
            cluster = self._wait_on_metadata(topic, None, now_ms() + self._max_block_ms)
        return self._partitioner.partition_runs(
            topic, cluster.available_partitions(topic), len(cluster.partitions[topic]), cumulative_sizes
        )

    def _wait_on_metadata(self, topic: str, partition: int | None, deadline: float) -> Cluster:
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

    def partitions_for(self, topic: str) -> set[int]:
        """Partition ids of ``topic`` (waits up to ``max.block.ms`` for metadata).

        Raises:
            UnknownTopicOrPartitionError / KafkaTimeoutError: the topic did not show up.
        """
        cluster = self._metadata.fetch()
        if topic not in cluster.partitions:
            cluster = self._wait_on_metadata(topic, None, now_ms() + self._max_block_ms)
        return set(cluster.partitions[topic])

    # -------------------------------------------------------------- flush / close

    def flush(self, timeout_s: float | None = None) -> None:
        """Send every buffered record now and wait for all of them to complete.

        Raises:
            KafkaTimeoutError: not all records completed within ``timeout_s``.
        """
        batches = self._accumulator.begin_flush()
        try:
            self._sender.wakeup()
            if not self._accumulator.await_completion(
                batches, None if timeout_s is None else timeout_s * 1000
            ):
                raise KafkaTimeoutError(f"flush did not complete within {timeout_s} s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is buffered, then stop. After ``timeout_s`` (None = no limit, 0 = at once)
        the remaining records fail with ``KafkaError``."""
        if self._closed:
            return
        self._closed = True
        if timeout_s is not None and timeout_s <= 0:
            self._sender.force_close()
        else:
            self._sender.initiate_close()
        self._sender.join(timeout_s)
        if self._sender.is_alive():
            log.warning("producer close timed out after %s s; failing unsent records", timeout_s)
            self._sender.force_close()
            self._sender.join(5.0)
        self._metadata.close()

    @property
    def metrics(self) -> dict[str, int]:
        """A few counters: ``produce_requests`` (requests sent)."""
        return {"produce_requests": self._sender.requests_sent}

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            if not self._closed:
                self._sender.initiate_close()
        except Exception:
            pass
