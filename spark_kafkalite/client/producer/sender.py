"""``Sender``: the producer's I/O thread (Java ``org.apache.kafka.clients.producer.internals.Sender``).

Loop: ask the accumulator which leader nodes have ready batches, keep those whose connection can
take another request (``max.in.flight.requests.per.connection``), drain one batch per partition
into one ProduceRequest per node, and poll the network. Per-partition errors that are retriable
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, disconnects, timeouts ...) put the batch back for
another try after ``retry.backoff.ms`` (refreshing metadata when the error says the leader moved),
as long as ``retries`` and ``delivery.timeout.ms`` allow; other errors fail the records' futures.
A batch rejected with per-record errors (KIP-467 ``record_errors``, ProduceResponse v8+) is not
retried: the named records fail with their own error, the others with one saying they were part
of a batch with an invalid record (:func:`record_exceptions`).

Idempotence (``TransactionManager``): before any data is sent the Sender obtains a producer id
with InitProducerId from the least loaded node (retrying COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR and disconnects after ``retry.backoff.ms``). Batches
get their sequence when drained; retries keep it, so the broker deduplicates a batch whose
response was lost. Sequence errors are handled as described in ``txn_partition_map``. If the
broker lacks InitProducerId and idempotence was only on by default, the producer continues
without it (logged); if it was requested explicitly, every record fails with
UNSUPPORTED_VERSION. Other InitProducerId errors are fatal: pending and later records fail.

Transactions (a ``TransactionManager`` with a ``transactional.id``; Java
``Sender.maybeSendAndPollTransactionalRequest``): each iteration first lets the transaction
manager register partitions that have queued batches, then sends its next transactional request
(FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn)
to the coordinator it needs, one at a time; while one is in flight no produce data is sent.
While a transaction is completing its batches are flushed (no linger) and EndTxn waits for them;
when aborting (or after an abortable error) batches never sent are failed with
``TransactionAbortedError`` (or the error); after a fatal error every incomplete batch fails.
Produce requests carry the ``transactional.id``. On close an open transaction is aborted.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from spark_kafkalite.client.client_metrics import producer_metrics
from spark_kafkalite.client.errors import COORDINATOR_RETRY_ERRORS, TransactionAbortedError
from spark_kafkalite.client.metadata import Metadata
from spark_kafkalite.client.network_client import NetworkClient, now_ms
from spark_kafkalite.client.producer.producer_batch import ProducerBatch
from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator
from spark_kafkalite.client.producer.transaction_manager import TransactionManager
from spark_kafkalite.client.producer.transaction_state import State
from spark_kafkalite.client.producer.txn_request_handlers import InitProducerIdHandler
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import datetime_to_ms, nested
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
    error_for_code,
    needs_metadata_refresh,
)

__all__ = ["Sender", "record_exceptions"]

log = logging.getLogger(__name__)

#: InitProducerId errors retried after ``retry.backoff.ms`` (Java ``InitProducerIdHandler``).
_INIT_RETRIABLE = COORDINATOR_RETRY_ERRORS | {ErrorCode.concurrent_transactions}
_INIT_PRODUCER_ID_MAX_VERSION = 4


INVALID_DIFFERENT_RECORD_MESSAGE = (
    "Failed to append record because it was part of a batch which had one or more invalid records"
)
"""Java's message (``Sender.failBatch``) for the records of a rejected batch that the broker did
not name (librdkafka: ``_INVALID_DIFFERENT_RECORD``)."""


def record_exceptions(
    error_code: int, error_message: str | None, record_errors: Sequence[Any]
) -> tuple[dict[int, BaseException], BaseException]:
    """The per-record errors of a batch the broker rejected with ``record_errors`` (KIP-467;
    Java ``Sender.failBatch`` since KAFKA-8729): each named record fails with
    ``InvalidRecordError`` carrying its message (else the partition's ``error_message``, else the
    code's name), or, when the broker named only one record, with the partition's own error
    (e.g. ``InvalidTimestampError``); every other record fails with a plain ``KafkaError`` saying
    it was part of a batch with an invalid record.

    ``record_errors``: the response's ``BatchIndexAndErrorMessage`` entries (``batch_index``,
    ``batch_index_error_message``). Returns (errors by index in the batch, the other records' error).
    """
    by_index: dict[int, BaseException] = {}
    for record_error in record_errors:
        message = record_error.batch_index_error_message or error_message or error_for_code(error_code).name
        if len(record_errors) == 1:
            by_index[int(record_error.batch_index)] = error_for_code(error_code, message)
        else:
            by_index[int(record_error.batch_index)] = InvalidRecordError(message)
    return by_index, KafkaError(INVALID_DIFFERENT_RECORD_MESSAGE)


class Sender(threading.Thread):
    """The daemon thread that owns the producer's ``NetworkClient``."""

    def __init__(
        self,
        client: NetworkClient,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        config: Mapping[str, Any],
        acks: int,
        transaction_manager: TransactionManager | None = None,
        idempotence_explicit: bool = False,
    ) -> None:
        super().__init__(name=f"kafkalite-producer-network-thread | {config.get('client.id')}", daemon=True)
        self._client = client
        self._metadata = metadata
        self._accumulator = accumulator
        self._acks = acks
        self._request_timeout_ms = int(config["request.timeout.ms"])
        self._max_request_size = int(config["max.request.size"])
        self._retries = int(config["retries"])
        self._delivery_timeout_ms = float(config["delivery.timeout.ms"])
        self._retry_backoff_ms = float(config["retry.backoff.ms"])
        self.transaction_manager = transaction_manager
        self._idempotence_explicit = idempotence_explicit
        self._init_pending = False
        self._next_init_ms = 0.0
        self._txn_flushing = False  # the accumulator flushes while a transaction completes
        self.fatal_error: KafkaError | None = None  # set when the producer can no longer send
        self._in_flight: set[ProducerBatch] = set()
        self._running = True
        self._force_close = False
        self.requests_sent = 0  # ProduceRequests written (observability, tests)
        #: Kafka's ``producer-metrics`` (``KafkaProducer.metrics()``)
        self.metrics = producer_metrics()
        self.poll_deadline_ms = math.inf  # when the current poll ends (read by producers)

    # -------------------------------------------------------------- thread control

    def run(self) -> None:
        log.debug("sender thread started")
        try:
            while self._running:
                self._run_once()
            self._maybe_abort_open_transaction()
            while not self._force_close and (
                self._accumulator.has_undrained()
                or self._in_flight
                or self._has_pending_transactional_requests()
            ):
                self._run_once()
            if self._force_close:
                self._accumulator.abort_incomplete(KafkaError("producer closed forcefully"))
        except Exception as exc:  # never leave futures hanging
            log.exception("sender thread failed")
            self._accumulator.abort_incomplete(KafkaError(f"sender thread failed: {exc!r}"))
        finally:
            self._client.close()
            log.debug("sender thread stopped")

    def wakeup(self) -> None:
        self._client.wakeup()

    def initiate_close(self) -> None:
        """Stop accepting work; send what is queued, then exit."""
        self._accumulator.close()
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        """Stop now, failing whatever is not yet acknowledged."""
        self._force_close = True
        self.initiate_close()

    # -------------------------------------------------------------- one iteration

    def _run_once(self) -> None:
        # Producers skip the wakeup for a new batch when we will poll again before its linger
        # ends; until the timeout is known, pretend to sleep forever so that they do wake us.
        self.poll_deadline_ms = math.inf
        now = now_ms()
        timeout = self._send_producer_data(now)
        self.poll_deadline_ms = now_ms() + timeout
        self._client.poll(timeout)

    def _send_producer_data(self, now: float) -> float:
        tm = self.transaction_manager
        id_wait = math.inf
        if tm is not None and tm.is_transactional:
            wait = self._maybe_send_transactional_request(tm, now)
            if wait is not None:
                return wait
        elif tm is not None:
            sequences = tm.txn_partition_map
            sequences.maybe_resolve_sequences()
            sequences.maybe_bump_epoch(self._has_batch_on_wire)
            if not sequences.has_producer_id():
                id_wait = self._maybe_init_producer_id(now)
        cluster = self._metadata.fetch()
        result = self._accumulator.ready(cluster, now)
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self._metadata.add_topics(topic)
            self._metadata.request_update()
        timeout = result.next_ready_check_delay_ms
        ready_nodes = set()
        for node_id in result.ready_nodes:
            if self._client.ready(node_id):
                ready_nodes.add(node_id)
            else:
                delay = self._client.connection_delay_ms(node_id, now)
                timeout = min(timeout, delay if delay > 0 else self._request_timeout_ms)
                if self._client.is_unavailable(node_id):
                    # The leader is unreachable (in reconnect backoff): it may be dead and its
                    # partitions about to move. Keep the metadata fresh (every retry.backoff.ms)
                    # instead of waiting for the next, exponentially backed-off connect attempt,
                    # so the new leader is found within ~retry.backoff.ms of its election.
                    self._metadata.request_update()
                    timeout = min(timeout, self._retry_backoff_ms)
        batches = self._accumulator.drain(cluster, ready_nodes, self._max_request_size, now)
        self._expire_batches(now)
        for node_id, node_batches in batches.items():
            self._send_produce_request(node_id, node_batches, now)
        if batches:
            timeout = 0.0
        elif ready_nodes:  # ready but held back (sequence ordering, no producer id yet)
            timeout = min(timeout, self._retry_backoff_ms)
        timeout = min(timeout, id_wait)
        if result.unknown_leader_topics:
            timeout = min(timeout, 100.0)
        if self._in_flight:
            timeout = min(timeout, self._next_in_flight_expiry(now))
        return max(0.0, min(timeout, 1000.0 if math.isinf(timeout) else timeout))

    def _next_in_flight_expiry(self, now: float) -> float:
        return min(b.created_ms + self._delivery_timeout_ms for b in self._in_flight) - now

    def _expire_batches(self, now: float) -> None:
        expired = self._accumulator.expired_batches(now)
        expired += [b for b in self._in_flight if now - b.created_ms >= self._delivery_timeout_ms]
        for batch in expired:
            self._in_flight.discard(batch)
            batch.on_wire = False
            self._accumulator.unmute(batch.tp)
            exc = KafkaTimeoutError(
                f"expiring {batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition}: "
                f"{now - batch.created_ms:.0f} ms has passed since batch creation "
                f"(delivery.timeout.ms={self._delivery_timeout_ms:.0f})"
            )
            if self.transaction_manager is not None and not batch.done:
                self.transaction_manager.handle_failed_batch(batch, exc, expired=True)
            batch.fail(exc)
            self._accumulator.deallocate(batch)

    # -------------------------------------------------------------- produce requests

    def _send_produce_request(self, node_id: int, batches: list[ProducerBatch], now: float) -> None:
        by_topic: dict[str, list[tuple[int, bytes]]] = {}
        by_tp: dict[TopicPartition, ProducerBatch] = {}
        metrics = self.metrics
        records = 0
        for batch in batches:
            try:
                data = batch.encoded()
            except KafkaError as exc:
                batch.fail(exc)
                self._accumulator.deallocate(batch)
                continue
            records += batch.record_count
            metrics.record("batch_bytes", len(data))
            metrics.record("bytes_sent", len(data))
            by_topic.setdefault(batch.tp.topic, []).append((batch.tp.partition, data))
            by_tp[batch.tp] = batch
            batch.attempts += 1
            batch.last_attempt_ms = now
            batch.on_wire = True
            self._in_flight.add(batch)
        if not by_tp:
            return
        acks = self._acks
        timeout_ms = self._request_timeout_ms
        tm = self.transaction_manager
        transactional_id = tm.transactional_id if tm is not None else None

        def build(version: int) -> Any:
            cls = request_class(ApiKey.PRODUCE, version)
            topic_cls = nested(cls, "TopicProduceData")
            part_cls = nested(cls, "PartitionProduceData")
            topic_data = tuple(
                topic_cls(
                    name=topic, partition_data=tuple(part_cls(index=p, records=data) for p, data in parts)
                )
                for topic, parts in by_topic.items()
            )
            return make(
                cls, transactional_id=transactional_id, acks=acks, timeout=timeout_ms, topic_data=topic_data
            )

        future = self._client.send(node_id, RequestBuilder(ApiKey.PRODUCE, build), expect_response=acks != 0)
        self.requests_sent += 1
        metrics.record("requests", 1)
        metrics.record("records_sent", records)
        metrics.record("records_per_request", records)
        future.add_callback(lambda f: self._handle_produce_response(f, node_id, by_tp, now))

    def _handle_produce_response(
        self, future: RequestFuture, node_id: int, by_tp: dict[TopicPartition, ProducerBatch], sent_ms: float
    ) -> None:
        now = now_ms()
        self.metrics.record("request_latency_ms", now - sent_ms)
        if future.failed():
            exc = future.exception
            err = exc if isinstance(exc, KafkaError) else KafkaConnectionError(repr(exc))
            log.debug("produce request to node %s failed: %s", node_id, err)
            for batch in by_tp.values():
                self._complete_batch(batch, err, -1, -1, now)
            return
        response = future.value
        if response is None:  # acks=0: nothing comes back
            for batch in by_tp.values():
                self._complete_batch(batch, None, -1, -1, now)
            return
        for topic_response in response.responses:
            for p in topic_response.partition_responses:
                answered = by_tp.pop(TopicPartition(str(topic_response.name), int(p.index)), None)
                if answered is None:
                    continue
                if p.error_code == ErrorCode.none:
                    self._complete_batch(
                        answered, None, int(p.base_offset), datetime_to_ms(p.log_append_time), now
                    )
                else:
                    message = getattr(p, "error_message", None)
                    record_errors = getattr(p, "record_errors", None)
                    self._complete_batch(
                        answered,
                        error_for_code(p.error_code, message),
                        -1,
                        -1,
                        now,
                        record_exceptions(p.error_code, message, record_errors) if record_errors else None,
                    )
        for batch in by_tp.values():
            self._complete_batch(batch, KafkaError("partition missing from produce response"), -1, -1, now)

    def _complete_batch(
        self,
        batch: ProducerBatch,
        error: KafkaError | None,
        base_offset: int,
        log_append_time_ms: int,
        now: float,
        record_errors: tuple[dict[int, BaseException], BaseException] | None = None,
    ) -> None:
        batch.on_wire = False
        if batch.done:  # expired while in flight
            return
        self._in_flight.discard(batch)
        self._accumulator.unmute(batch.tp)
        tm = self.transaction_manager
        if error is None or error.error_code == ErrorCode.duplicate_sequence_number:
            # DUPLICATE_SEQUENCE_NUMBER: an old broker saying it already has the batch
            if tm is not None:
                tm.txn_partition_map.handle_completed_batch(batch)
            batch.complete(base_offset, log_append_time_ms)
            self._accumulator.deallocate(batch)
            return
        if self._can_retry(batch, error, now):
            log.debug("retrying batch for %s (attempt %d): %s", batch.tp, batch.attempts, error)
            self.metrics.record("record_retries", batch.record_count)
            if needs_metadata_refresh(error.error_code) or isinstance(
                error, (KafkaConnectionError, KafkaTimeoutError)
            ):
                self._metadata.request_update()
            self._accumulator.reenqueue(batch, now)
            return
        if needs_metadata_refresh(error.error_code):
            self._metadata.request_update()
        if tm is not None:
            tm.handle_failed_batch(batch, error, expired=False)
        self.metrics.record("record_errors", batch.record_count)
        batch.fail(error, record_errors)
        self._accumulator.deallocate(batch)

    def _can_retry(self, batch: ProducerBatch, error: KafkaError, now: float) -> bool:
        tm = self.transaction_manager
        if tm is not None and batch.base_sequence >= 0:
            retriable = tm.txn_partition_map.can_retry(batch, error)
        else:
            retriable = error.retriable
        return (
            retriable
            and batch.attempts <= self._retries
            and now - batch.created_ms < self._delivery_timeout_ms
            and not self._force_close
        )

    # -------------------------------------------------------------- idempotence

    def _has_batch_on_wire(self, tp: TopicPartition) -> bool:
        return any(b.on_wire and b.tp == tp for b in self._in_flight)

    def _maybe_init_producer_id(self, now: float) -> float:
        """Send InitProducerId when needed; returns ms until it is worth checking again."""
        if self._init_pending or self.fatal_error is not None:
            return math.inf
        if now < self._next_init_ms:
            return self._next_init_ms - now
        node_id = self._client.least_loaded_node()
        if node_id is None:
            return float(self._client.reconnect_backoff_ms)
        if not self._client.ready(node_id):
            return self._retry_backoff_ms  # connecting: a network event will wake us earlier
        ranges = self._client.api_version(node_id, ApiKey.INIT_PRODUCER_ID)
        if ranges is None:
            self._idempotence_unsupported(node_id)
            return 0.0
        version = min(ranges[1], _INIT_PRODUCER_ID_MAX_VERSION)
        request = make(
            request_class(ApiKey.INIT_PRODUCER_ID, version),
            transactional_id=None,
            transaction_timeout=2**31 - 1,
            producer_id=-1,
            producer_epoch=-1,
        )
        self._init_pending = True
        future = self._client.send(node_id, request)
        future.add_callback(self._handle_init_producer_id_response)
        return math.inf

    def _handle_init_producer_id_response(self, future: RequestFuture) -> None:
        self._init_pending = False
        tm = self.transaction_manager
        if tm is None:
            return
        now = now_ms()
        if future.failed():
            log.debug("InitProducerId failed: %s; retrying", future.exception)
            self._next_init_ms = now + self._retry_backoff_ms
            return
        response = future.value
        code = response.error_code
        if code == ErrorCode.none:
            tm.txn_partition_map.set_producer_id_and_epoch(
                int(response.producer_id), int(response.producer_epoch)
            )
            return
        if code in _INIT_RETRIABLE or error_for_code(code).retriable:
            log.debug("InitProducerId: %s; retrying in %.0f ms", error_for_code(code), self._retry_backoff_ms)
            self._next_init_ms = now + self._retry_backoff_ms
            return
        self._fail_fatally(error_for_code(code, "InitProducerId failed; the producer cannot send"))

    def _idempotence_unsupported(self, node_id: int) -> None:
        if self._idempotence_explicit:
            self._fail_fatally(
                UnsupportedVersionError(
                    f"enable.idempotence=true but node {node_id} does not support InitProducerId"
                )
            )
            return
        log.warning("node %s does not support InitProducerId: producing without idempotence", node_id)
        self.transaction_manager = None
        self._accumulator.transaction_manager = None

    def _fail_fatally(self, error: KafkaError) -> None:
        log.error("producer failed: %s", error)
        self.fatal_error = error
        self._accumulator.abort_incomplete(error)

    # -------------------------------------------------------------- transactions

    def _maybe_send_transactional_request(self, tm: TransactionManager, now: float) -> float | None:
        """Java ``maybeSendAndPollTransactionalRequest``: returns a poll timeout when this
        iteration is spent on transactions (no produce data), None to go on producing."""
        if tm.has_fatal_error():
            if self._accumulator.has_incomplete():
                self._accumulator.abort_incomplete(tm.fatal_error())
            return self._retry_backoff_ms
        if tm.in_flight_request is not None:
            return self._retry_backoff_ms  # its response wakes the poll
        if (tm.has_abortable_error() or tm.is_aborting()) and self._accumulator.has_incomplete():
            error = tm.last_error or TransactionAbortedError(
                "failing batch since the transaction was aborted"
            )
            self._accumulator.abort_undrained_batches(error)
        completing = tm.is_completing()
        if completing and not self._txn_flushing:
            self._accumulator.begin_flush()
            self._txn_flushing = True
        elif self._txn_flushing and not completing:
            self._accumulator.end_flush()
            self._txn_flushing = False
        tm.maybe_add_partitions(self._accumulator.queued_partitions())
        handler = tm.next_request(self._accumulator.has_incomplete())
        if handler is None:
            return None
        if handler.is_retry and now < handler.sent_ms + handler.retry_backoff_ms:
            tm.enqueue_request(handler)
            return handler.sent_ms + handler.retry_backoff_ms - now
        coordinator_type = handler.coordinator_type
        if coordinator_type is not None:
            found = tm.coordinator(coordinator_type)
            if found is None:
                with tm.lock:
                    tm.lookup_coordinator(coordinator_type, handler.coordinator_key)
                    tm.enqueue_request(handler)
                return 0.0
            node_id, host, port = found
            if self._metadata.fetch().nodes.get(node_id) is None:
                self._client.add_node(node_id, host, port)
        else:
            least_loaded = self._client.least_loaded_node()
            if least_loaded is None:
                tm.enqueue_request(handler)
                self._metadata.request_update()
                return float(self._client.reconnect_backoff_ms)
            node_id = least_loaded
        if not self._client.ready(node_id):
            if self._client.is_unavailable(node_id) and coordinator_type is not None:
                with tm.lock:
                    tm.lookup_coordinator(coordinator_type, handler.coordinator_key)
            tm.enqueue_request(handler)  # connecting: a network event wakes the poll
            return self._retry_backoff_ms
        if isinstance(handler, InitProducerIdHandler):
            ranges = self._client.api_version(node_id, ApiKey.INIT_PRODUCER_ID)
            tm.supports_epoch_bump = ranges is not None and ranges[1] >= 3
        handler.sent_ms = now
        tm.in_flight_request = handler
        log.debug("sending %s to node %s", type(handler).__name__, node_id)
        future = self._client.send(node_id, handler.request_builder())
        future.add_callback(handler.on_complete)
        return self._retry_backoff_ms

    def _has_pending_transactional_requests(self) -> bool:
        tm = self.transaction_manager
        return tm is not None and tm.is_transactional and tm.has_pending_requests() and not tm.has_error()

    def _maybe_abort_open_transaction(self) -> None:
        """Java: on a graceful close an open transaction is aborted."""
        tm = self.transaction_manager
        if self._force_close or tm is None or not tm.is_transactional:
            return
        if tm.state in (State.IN_TRANSACTION, State.ABORTABLE_ERROR):
            log.info("aborting the incomplete transaction of %s on close", tm.transactional_id)
            try:
                tm.begin_abort()
            except KafkaError as exc:
                log.info("could not abort the transaction on close: %s", exc)
