"""``KafkaProducer`` (Java ``org.apache.kafka.clients.producer.KafkaProducer``).

``send`` partitions a record (explicit partition, murmur2 of the key, or a sticky partition for
null keys), appends it to the ``RecordAccumulator`` and returns a
``concurrent.futures.Future[RecordMetadata]``; the ``Sender`` thread batches records per
partition (``batch.size``, ``linger.ms``) into ProduceRequests. Thread-safe: share one producer
between threads.

With ``transactional.id`` the producer is transactional (KIP-98; Java's API):
``init_transactions()`` once, then per transaction ``begin_transaction()``, ``send`` calls,
optionally ``send_offsets_to_transaction(offsets, consumer.group_metadata())``, and
``commit_transaction()`` or ``abort_transaction()``. Readers with
``isolation.level=read_committed`` see a transaction's records only once it is committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.config import parse_acks, parse_config
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.client.metadata import Cluster, Metadata
from spark_kafkalite.client.network_client import NetworkClient, now_ms
from spark_kafkalite.client.producer.native_extensions import SEND_PATH
from spark_kafkalite.client.producer.partitioner import StickyPartitioner
from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator
from spark_kafkalite.client.producer.sender import Sender
from spark_kafkalite.client.producer.transaction_manager import TransactionManager
from spark_kafkalite.client.producer.transaction_state import TransactionalRequestResult
from spark_kafkalite.client.types import RecordMetadata, TopicPartition
from spark_kafkalite.protocol.errors import (
    InvalidConfigError,
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    ProducerFencedError,
)
from spark_kafkalite.protocol.native import load_twin
from spark_kafkalite.protocol.record_batch import COMPRESSION_CODECS, RECORD_BATCH_OVERHEAD, compress

if TYPE_CHECKING:
    from _typeshed import SupportsLenAndGetItem

__all__ = ["KafkaProducer", "PRODUCER_DEFAULTS"]

log = logging.getLogger(__name__)

_send_path = load_twin(SEND_PATH)

_FORCE_CLOSE_JOIN_S = 5.0
"""How long ``close`` waits for a force-closed network thread (it only has to leave its poll)."""

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
    "transactional.id": None,
    "transaction.timeout.ms": 60000,
}


class KafkaProducer:
    """Produce records to Kafka.

    Config (Kafka's names; values may be strings): ``bootstrap.servers`` (required), ``acks``
    ("all"/-1, 1, 0; default all), ``linger.ms`` (5), ``batch.size`` (16384), ``buffer.memory``
    (32 MiB), ``max.block.ms`` (60000), ``delivery.timeout.ms`` (120000), ``retries``,
    ``retry.backoff.ms`` (100), ``request.timeout.ms`` (30000), ``max.request.size`` (1 MiB),
    ``compression.type`` (none, gzip; snappy/lz4/zstd need ``cramjam``), ``client.id``,
    ``max.in.flight.requests.per.connection`` (5), ``enable.idempotence`` (true),
    ``metadata.max.age.ms`` (300000), ``transactional.id`` (None: not transactional),
    ``transaction.timeout.ms`` (60000: the coordinator aborts a transaction open longer).

    Idempotence (KIP-98) is on by default: the producer gets a producer id (InitProducerId) and
    numbers its batches per partition, so retries (after a lost response, a disconnect or a
    leader change) never write duplicates and order is kept with up to 5 requests in flight.
    As in Java (KIP-679), idempotence needs ``acks=all``, ``retries`` > 0 and
    ``max.in.flight.requests.per.connection`` <= 5: when one of these is set otherwise and
    ``enable.idempotence`` was not given, idempotence is silently turned off; when it was given
    as true, that is an ``InvalidConfigError``. Without idempotence,
    ``max.in.flight.requests.per.connection=1`` keeps per-partition order across retries.
    A ``transactional.id`` needs idempotence (Java: "Cannot set a transactional.id without also
    enabling idempotence").

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
        transactional_id = cfg.get("transactional.id")
        if transactional_id is not None:
            transactional_id = str(transactional_id)
            if not transactional_id:
                raise InvalidConfigError("transactional.id must not be empty")
            if "enable.idempotence" in merged and not cfg["enable.idempotence"]:
                raise InvalidConfigError("cannot set a transactional.id without also enabling idempotence")
        explicit = "enable.idempotence" in merged or transactional_id is not None
        self._idempotent = self._resolve_idempotence(cfg, explicit)
        self._transactional_id = transactional_id
        self._max_block_ms = float(cfg["max.block.ms"])
        self._max_request_size = int(cfg["max.request.size"])
        self._buffer_memory = int(cfg["buffer.memory"])
        self._linger_ms = float(cfg["linger.ms"])
        self._metadata = Metadata(cfg, allow_auto_topic_creation=bool(cfg["allow.auto.create.topics"]))
        self._partitioner = StickyPartitioner(int(cfg["batch.size"]))
        self._tps: dict[str, list[TopicPartition]] = {}  # TopicPartition objects, built once
        max_in_flight = int(cfg["max.in.flight.requests.per.connection"])
        self._transaction_manager = (
            TransactionManager(
                transactional_id, int(cfg["transaction.timeout.ms"]), float(cfg["retry.backoff.ms"])
            )
            if self._idempotent
            else None
        )
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
        # send(): the compiled SendPath when built (see protocol.native), else its pure-Python
        # reference; bound on the instance so that a send is one call into it (unless a
        # subclass overrides send)
        self._send_path = _send_path.SendPath(
            self._metadata,
            self._accumulator,
            self._sender,
            self._partitioner,
            self._max_request_size,
            self._max_block_ms,
            self._linger_ms,
        )
        if type(self).send is KafkaProducer.send and transactional_id is None:
            self.send = self._send_path.send  # type: ignore[method-assign]
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

        A transactional producer sends only inside a transaction (after ``begin_transaction``).

        Raises:
            TypeError: key, value or headers of the wrong type.
            KafkaError: the producer is closed; a transactional producer in an error state.
            IllegalStateError: a transactional producer outside a transaction, or after
                ``commit_transaction`` / ``abort_transaction`` began in another thread.
        """
        if self._transactional_id is not None:
            fenced = self._check_transactional_send()
            if fenced is not None:
                failed: Future[RecordMetadata] = Future()
                failed.set_exception(fenced)
                if callback is not None:
                    callback(None, fenced)
                return failed
        return self._send_path.send(topic, value, key, partition, timestamp_ms, headers, callback)

    def _check_transactional_send(self) -> ProducerFencedError | None:
        """Raise what a transactional ``send`` raises; a fenced producer's error is returned to
        be reported through the future (Java: an ``ApiException`` goes to the callback)."""
        if self._transaction_manager is None:  # send() checks transactions only when transactional
            raise RuntimeError("transactional send check on a producer without a transactional.id")
        try:
            self._transaction_manager.fail_if_not_ready_for_send()
        except ProducerFencedError as exc:
            return exc
        return None

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
            IllegalStateError: a transactional producer outside a transaction, or after
                ``commit_transaction`` / ``abort_transaction`` began.
        """
        if self._closed:
            raise KafkaError("cannot send after the producer is closed")
        failed: Future[int] = Future()
        fatal = self._sender.fatal_error
        if self._transactional_id is not None and fatal is None:
            fatal = self._check_transactional_send()
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
        except IllegalStateError:
            raise  # the transaction stopped accepting records (begin_commit / begin_abort)
        except KafkaError as exc:
            failed.set_exception(exc)
            return failed
        self._sender.wakeup()
        return batch.result()

    def sticky_partition_runs(
        self, topic: str, cumulative_sizes: SupportsLenAndGetItem[int]
    ) -> list[tuple[int, int]]:
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
        return self._send_path.wait_on_metadata(topic, partition, deadline)  # type: ignore[no-any-return]

    def partitions_for(self, topic: str) -> set[int]:
        """Partition ids of ``topic`` (waits up to ``max.block.ms`` for metadata).

        Raises:
            UnknownTopicOrPartitionError / KafkaTimeoutError: the topic did not show up.
        """
        cluster = self._metadata.fetch()
        if topic not in cluster.partitions:
            cluster = self._wait_on_metadata(topic, None, now_ms() + self._max_block_ms)
        return set(cluster.partitions[topic])

    # -------------------------------------------------------------- transactions

    def _txn_manager(self) -> TransactionManager:
        tm = self._transaction_manager
        if self._transactional_id is None or tm is None:
            raise IllegalStateError(
                "transactional method invoked on a non-transactional producer (set transactional.id)"
            )
        if self._closed:
            raise IllegalStateError("cannot perform operation after the producer has been closed")
        return tm

    def _await(self, result: TransactionalRequestResult, timeout_s: float | None) -> None:
        self._sender.wakeup()
        result.await_result(self._max_block_ms if timeout_s is None else timeout_s * 1000.0)

    def init_transactions(self, timeout_s: float | None = None) -> None:
        """Register the ``transactional.id`` with its transaction coordinator and get the
        producer id and epoch (InitProducerId; Java ``initTransactions``): any earlier producer
        with the same id is fenced and its open transaction aborted; returns once that is done.
        Call once, before any other transactional method. ``timeout_s`` defaults to
        ``max.block.ms``; after a timeout the call may be repeated.

        Raises:
            IllegalStateError: not a transactional producer, or called twice.
            KafkaTimeoutError: not done within ``timeout_s``.
            ProducerFencedError: a newer producer with the same id exists (fatal).
            TransactionalIdAuthorizationFailedError / KafkaError: other failures (fatal).
        """
        self._await(self._txn_manager().initialize_transactions(), timeout_s)

    def begin_transaction(self) -> None:
        """Start a transaction (local; Java ``beginTransaction``).

        Raises:
            IllegalStateError: ``init_transactions`` not done, or a transaction is already open.
            ProducerFencedError / KafkaError: the producer is in an error state.
        """
        self._txn_manager().begin_transaction()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group_metadata: Mapping[str, Any] | str,
        timeout_s: float | None = None,
    ) -> None:
        """Commit consumer offsets as part of the transaction (AddOffsetsToTxn, then TxnOffsetCommit
        to the group coordinator; KIP-98, KIP-447; Java ``sendOffsetsToTransaction``): they
        become visible to the group only if the transaction commits. ``offsets`` maps
        partitions to the next offset to consume (an int or ``OffsetAndMetadata``);
        ``group_metadata`` is ``KafkaConsumer.group_metadata()`` or a group id (generation -1).

        Raises:
            IllegalStateError: no transaction is open.
            KafkaTimeoutError: not done within ``timeout_s`` (default ``max.block.ms``).
            ProducerFencedError: fenced (fatal).
            CommitFailedError / GroupAuthorizationFailedError / KafkaError: abortable errors;
                the transaction must be aborted.
        """
        tm = self._txn_manager()
        if isinstance(group_metadata, str):
            group_metadata = {"group_id": group_metadata, "generation_id": -1, "member_id": ""}
        if not group_metadata.get("group_id"):
            raise InvalidConfigError("send_offsets_to_transaction needs a group id")
        normalised = {
            TopicPartition(str(tp[0]), int(tp[1])): om
            if isinstance(om, OffsetAndMetadata)
            else OffsetAndMetadata(int(om))
            for tp, om in offsets.items()
        }
        if not normalised:
            return  # Java: nothing to send for empty offsets
        self._await(tm.send_offsets_to_transaction(normalised, group_metadata), timeout_s)

    def commit_transaction(self, timeout_s: float | None = None) -> None:
        """Flush every record of the transaction, then commit it (EndTxn; Java
        ``commitTransaction``). If a record failed, raises its error: abort then.

        Raises:
            IllegalStateError: no transaction is open.
            KafkaTimeoutError: not done within ``timeout_s`` (default ``max.block.ms``); repeat
                the call.
            ProducerFencedError / InvalidTxnStateError: fatal.
            KafkaError: an abortable error: call ``abort_transaction``.
        """
        self._await(self._txn_manager().begin_commit(), timeout_s)

    def abort_transaction(self, timeout_s: float | None = None) -> None:
        """Abort the open transaction (Java ``abortTransaction``): records not yet sent fail with
        ``TransactionAbortedError``, those sent are aborted by the markers (read_committed
        readers never see them).

        Raises:
            IllegalStateError: no transaction is open.
            KafkaTimeoutError: not done within ``timeout_s`` (default ``max.block.ms``).
            ProducerFencedError / KafkaError: fatal errors.
        """
        self._await(self._txn_manager().begin_abort(), timeout_s)

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
        """Send what is buffered, complete pending transactional requests, then stop (Java
        ``KafkaProducer.close(Duration)``). ``timeout_s`` bounds the wait: None = no limit; 0 =
        stop at once (Java ``close(Duration.ZERO)``, the call after a fatal error or a timeout:
        an InitProducerId or EndTxn retrying against an unavailable coordinator would otherwise
        be waited for). What is not done by then fails with ``KafkaError``; the force-closed
        network thread is waited for at most ``_FORCE_CLOSE_JOIN_S`` more."""
        if self._closed:
            return
        self._closed = True
        self._send_path.closed = True
        if timeout_s is not None and timeout_s <= 0:
            self._sender.force_close()
        else:
            self._sender.initiate_close()
            self._sender.join(timeout_s)
            if self._sender.is_alive():
                log.warning("producer close timed out after %s s; failing unsent records", timeout_s)
                self._sender.force_close()
        self._sender.join(_FORCE_CLOSE_JOIN_S)
        self._metadata.close()

    def metrics(self) -> dict[str, dict[str, float]]:
        """Kafka's producer metrics, ``{"producer-metrics": {name: value}}`` as kafka-python's
        ``KafkaProducer.metrics()``: ``request-rate`` / ``-total``, ``request-latency-avg`` /
        ``-max`` (ms), ``record-send-rate`` / ``-total``, ``records-per-request-avg``,
        ``batch-size-avg`` / ``-max`` (bytes), ``outgoing-byte-rate`` / ``-total``,
        ``record-retry-rate`` / ``-total``, ``record-error-rate`` / ``-total``; rates per second
        over Kafka's default sample windows (2 x 30 s), averages and maxima NaN before any
        sample (``spark_kafkalite.client.client_metrics``)."""
        return self._sender.metrics.snapshot()

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort
        # ``_closed`` is set last in __init__: a producer whose construction failed has no sender
        # thread to stop. Anything initiate_close raises here is reported by Python as "Exception
        # ignored in __del__", not swallowed.
        if not getattr(self, "_closed", True):
            self._sender.initiate_close()
