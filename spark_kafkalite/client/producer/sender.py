"""``Sender``: the producer's I/O thread (Java ``org.apache.kafka.clients.producer.internals.Sender``).

Loop: ask the accumulator which leader nodes have ready batches, keep those whose connection can
take another request (``max.in.flight.requests.per.connection``), drain one batch per partition
into one ProduceRequest per node, and poll the network. Per-partition errors that are retriable
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, disconnects, timeouts ...) put the batch back for
another try after ``retry.backoff.ms`` (refreshing metadata when the error says the leader moved),
as long as ``retries`` and ``delivery.timeout.ms`` allow; other errors fail the records' futures.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from typing import Any

from spark_kafkalite.client.metadata import Metadata
from spark_kafkalite.client.network_client import NetworkClient, now_ms
from spark_kafkalite.client.producer.producer_batch import ProducerBatch
from spark_kafkalite.client.producer.record_accumulator import RecordAccumulator
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import RequestBuilder, datetime_to_ms, make, nested
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)

__all__ = ["Sender"]

log = logging.getLogger(__name__)

#: Errors after which the cached leader is probably wrong (Java ``InvalidMetadataException``).
_METADATA_ERRORS = {
    ErrorCode.not_leader_or_follower,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.leader_not_available,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.kafka_storage_error,
}


class Sender(threading.Thread):
    """The daemon thread that owns the producer's ``NetworkClient``."""

    def __init__(
        self,
        client: NetworkClient,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        config: Mapping[str, Any],
        acks: int,
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
        self._in_flight: set[ProducerBatch] = set()
        self._running = True
        self._force_close = False
        self.requests_sent = 0  # ProduceRequests written (observability, tests)
        self.poll_deadline_ms = math.inf  # when the current poll ends (read by producers)

    # -------------------------------------------------------------- thread control

    def run(self) -> None:
        log.debug("sender thread started")
        try:
            while self._running:
                self._run_once()
            while not self._force_close and (self._accumulator.has_undrained() or self._in_flight):
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
        batches = self._accumulator.drain(cluster, ready_nodes, self._max_request_size, now)
        self._expire_batches(now)
        for node_id, node_batches in batches.items():
            self._send_produce_request(node_id, node_batches, now)
        if ready_nodes:
            timeout = 0.0
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
            self._accumulator.unmute(batch.tp)
            exc = KafkaTimeoutError(
                f"expiring {batch.record_count} record(s) for {batch.tp.topic}-{batch.tp.partition}: "
                f"{now - batch.created_ms:.0f} ms has passed since batch creation "
                f"(delivery.timeout.ms={self._delivery_timeout_ms:.0f})"
            )
            batch.fail(exc)
            self._accumulator.deallocate(batch)

    # -------------------------------------------------------------- produce requests

    def _send_produce_request(self, node_id: int, batches: list[ProducerBatch], now: float) -> None:
        by_topic: dict[str, list[tuple[int, bytes]]] = {}
        by_tp: dict[TopicPartition, ProducerBatch] = {}
        for batch in batches:
            try:
                data = batch.encoded()
            except KafkaError as exc:
                batch.fail(exc)
                self._accumulator.deallocate(batch)
                continue
            by_topic.setdefault(batch.tp.topic, []).append((batch.tp.partition, data))
            by_tp[batch.tp] = batch
            batch.attempts += 1
            batch.last_attempt_ms = now
            self._in_flight.add(batch)
        if not by_tp:
            return
        acks = self._acks
        timeout_ms = self._request_timeout_ms

        def build(version: int) -> Any:
            cls = request_class(ApiKey.PRODUCE, version)
            topic_cls = nested(cls, "TopicProduceData")
            part_cls = nested(cls, "PartitionProduceData")
            topic_data = tuple(
                topic_cls(name=topic, partition_data=tuple(part_cls(index=p, records=data) for p, data in parts))
                for topic, parts in by_topic.items()
            )
            return make(cls, transactional_id=None, acks=acks, timeout=timeout_ms, topic_data=topic_data)

        future = self._client.send(node_id, RequestBuilder(ApiKey.PRODUCE, build), expect_response=acks != 0)
        self.requests_sent += 1
        future.add_callback(lambda f: self._handle_produce_response(f, node_id, by_tp))

    def _handle_produce_response(
        self, future: RequestFuture, node_id: int, by_tp: dict[TopicPartition, ProducerBatch]
    ) -> None:
        now = now_ms()
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
                batch = by_tp.pop(TopicPartition(str(topic_response.name), int(p.index)), None)
                if batch is None:
                    continue
                if p.error_code == ErrorCode.none:
                    self._complete_batch(batch, None, int(p.base_offset), datetime_to_ms(p.log_append_time), now)
                else:
                    message = getattr(p, "error_message", None)
                    self._complete_batch(batch, error_for_code(p.error_code, message), -1, -1, now)
        for batch in by_tp.values():
            self._complete_batch(batch, KafkaError("partition missing from produce response"), -1, -1, now)

    def _complete_batch(
        self, batch: ProducerBatch, error: KafkaError | None, base_offset: int, log_append_time_ms: int, now: float
    ) -> None:
        if batch.done:  # expired while in flight
            return
        self._in_flight.discard(batch)
        self._accumulator.unmute(batch.tp)
        if error is None:
            batch.complete(base_offset, log_append_time_ms)
            self._accumulator.deallocate(batch)
            return
        if self._can_retry(batch, error, now):
            log.debug("retrying batch for %s (attempt %d): %s", batch.tp, batch.attempts, error)
            if error.error_code in _METADATA_ERRORS or isinstance(error, (KafkaConnectionError, KafkaTimeoutError)):
                self._metadata.request_update()
            self._accumulator.reenqueue(batch, now)
            return
        if error.error_code in _METADATA_ERRORS:
            self._metadata.request_update()
        batch.fail(error)
        self._accumulator.deallocate(batch)

    def _can_retry(self, batch: ProducerBatch, error: KafkaError, now: float) -> bool:
        return (
            error.retriable
            and batch.attempts <= self._retries
            and now - batch.created_ms < self._delivery_timeout_ms
            and not self._force_close
        )
