"""Sending transaction markers to partition leaders (Kafka's ``TransactionMarkerChannelManager``
and ``TransactionMarkerRequestCompletionHandler``).

Once a PrepareCommit / PrepareAbort is durable, every partition of the transaction gets a
COMMIT / ABORT control batch from its leader: one WriteTxnMarkers v1 request per leader broker,
sent over an inter-broker connection (to this broker too, through its own listener, as Kafka
does). Per partition result (Kafka's completion handler):

- NONE, or UNSUPPORTED_FOR_MESSAGE_FORMAT -> the partition is done;
- INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED -> a newer producer epoch or
  coordinator owns the transaction: stop sending for it (no Complete* is written);
- anything else (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS*,
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a lost connection, no leader yet) -> retried against
  the partition's current leader after ``retry_backoff_ms``, doubled while no partition makes
  progress, up to ``max_retry_backoff_ms``.

A partition whose topic was deleted is dropped. When no partition is left the CompleteCommit /
CompleteAbort transition is appended (retried while COORDINATOR_NOT_AVAILABLE). Sending stops
as soon as this broker no longer coordinates the transactional id at the same coordinator
epoch (the new coordinator resends them after loading).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from broker.coordinator.transaction.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from broker.coordinator.transaction.transaction_state_manager import TransactionStateManager
from broker.network.channel_builders import InterBrokerSecurity
from broker.replication.broker_connection import BrokerConnection, BrokerConnectionError
from broker.tasks import await_cancelled
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["TransactionMarkerChannelManager", "MarkerSender", "BrokerMarkerSender", "WRITE_TXN_MARKERS_KEY"]

logger = logging.getLogger(__name__)

E = ErrorCode
WRITE_TXN_MARKERS_KEY = ApiKey.WRITE_TXN_MARKERS
TopicPartition = tuple[str, int]

_DONE = frozenset({int(E.none), int(E.unsupported_for_message_format)})
_STOP = frozenset({int(E.invalid_producer_epoch), int(E.transaction_coordinator_fenced)})


class MarkerSender(Protocol):
    async def write_txn_markers(
        self,
        broker_id: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """Send one marker for ``partitions`` (all led by ``broker_id``); per-partition error codes.

        Raises:
            BrokerConnectionError: the broker could not be reached.
        """
        ...


class _MarkerQueue:
    """The markers waiting for one broker, and the task that sends them."""

    def __init__(self) -> None:
        self.connection: BrokerConnection | None = None
        self.waiting: list[tuple[int, Any, asyncio.Future[dict[TopicPartition, int]]]] = []
        self.task: asyncio.Task[None] | None = None


class BrokerMarkerSender:
    """WriteTxnMarkers v1 over one :class:`BrokerConnection` per broker, one request in flight
    per connection; the markers queued for a broker while a request is in flight go out
    together in the next request (one marker per producer id in a request), as Kafka's
    ``TransactionMarkerChannelManager`` drains its per-broker queues.

    Args:
        endpoint_of: broker id -> (host, port) of its inter-broker listener, or None.
        client_id: request header client id.
        request_timeout_ms: per request (``request.timeout.ms``).
        security: TLS/SASL of the inter-broker listener (None = PLAINTEXT).
    """

    def __init__(
        self,
        endpoint_of: Callable[[int], tuple[str, int] | None],
        client_id: str,
        request_timeout_ms: int,
        security: InterBrokerSecurity | None = None,
    ) -> None:
        self.endpoint_of = endpoint_of
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self._queues: dict[int, _MarkerQueue] = {}

    async def write_txn_markers(
        self,
        broker_id: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, int]:
        cls = request_class(WRITE_TXN_MARKERS_KEY, 1)
        topic_cls = nested(cls, "WritableTxnMarkerTopic")
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        marker = nested(cls, "WritableTxnMarker")(
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transaction_result=committed,
            topics=tuple(topic_cls(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items()),
            coordinator_epoch=coordinator_epoch,
        )
        queue = self._queues.setdefault(broker_id, _MarkerQueue())
        future: asyncio.Future[dict[TopicPartition, int]] = asyncio.get_running_loop().create_future()
        queue.waiting.append((producer_id, marker, future))
        if queue.task is None or queue.task.done():
            queue.task = asyncio.ensure_future(self._drain(broker_id, queue))
        return await future

    async def _drain(self, broker_id: int, queue: _MarkerQueue) -> None:
        cls = request_class(WRITE_TXN_MARKERS_KEY, 1)
        while queue.waiting:
            batch: list[tuple[int, Any, asyncio.Future[dict[TopicPartition, int]]]] = []
            later = []
            seen: set[int] = set()
            for item in queue.waiting:
                if item[2].done():
                    continue  # its sender gave up (cancelled)
                if item[0] in seen:
                    later.append(item)
                else:
                    seen.add(item[0])
                    batch.append(item)
            queue.waiting = later
            if not batch:
                continue
            try:
                connection = await self._connection(broker_id, queue)
                response = await connection.send(cls(markers=tuple(marker for _pid, marker, _f in batch)))
            except Exception as exc:  # noqa: BLE001 - every waiter retries (BrokerConnectionError)
                error = exc if isinstance(exc, BrokerConnectionError) else BrokerConnectionError(str(exc))
                for _pid, _marker, future in batch:
                    if not future.done():
                        future.set_exception(error)
                continue
            results: dict[int, dict[TopicPartition, int]] = {}
            for result in response.markers:
                per = results.setdefault(int(result.producer_id), {})
                for topic in result.topics:
                    for p in topic.partitions:
                        per[(topic.name, int(p.partition_index))] = int(p.error_code)
            for pid, _marker, future in batch:
                if not future.done():
                    future.set_result(results.get(pid, {}))

    async def _connection(self, broker_id: int, queue: _MarkerQueue) -> BrokerConnection:
        endpoint = self.endpoint_of(broker_id)
        if endpoint is None:
            raise BrokerConnectionError(f"broker {broker_id} has no known inter-broker endpoint")
        connection = queue.connection
        if connection is None or (connection.host, connection.port) != tuple(endpoint):
            if connection is not None:
                await connection.close()
            connection = queue.connection = BrokerConnection(
                endpoint[0], endpoint[1], self.client_id, self.request_timeout_ms, self.security
            )
        return connection

    async def close(self) -> None:
        queues, self._queues = self._queues, {}
        for queue in queues.values():
            if queue.task is not None:
                queue.task.cancel()
                await await_cancelled(queue.task, f"marker send task {queue.task.get_name()}")
            for _pid, _marker, future in queue.waiting:
                future.cancel()
            if queue.connection is not None:
                await queue.connection.close()


class TransactionMarkerChannelManager:
    """Args:
    state_manager: checks that this broker still coordinates a transaction, writes Complete*.
    leader_of: (topic, partition) -> leader broker id (-1 = none); None when the topic is gone.
    sender: sends WriteTxnMarkers (see :class:`MarkerSender`).
    retry_backoff_ms / max_retry_backoff_ms: pause before retrying partitions that failed.
    """

    def __init__(
        self,
        state_manager: TransactionStateManager,
        leader_of: Callable[[str, int], int | None],
        sender: MarkerSender,
        retry_backoff_ms: int = 100,
        max_retry_backoff_ms: int = 1000,
    ) -> None:
        self.state_manager = state_manager
        self.leader_of = leader_of
        self.sender = sender
        self.retry_backoff_ms = retry_backoff_ms
        self.max_retry_backoff_ms = max_retry_backoff_ms
        self._pending: dict[str, asyncio.Task[None]] = {}

    def pending_transactional_ids(self) -> list[str]:
        """Transactional ids whose markers are being written."""
        return list(self._pending)

    def add_txn_markers_to_send(
        self,
        coordinator_epoch: int,
        committed: bool,
        metadata: TransactionMetadata,
        complete: TxnTransitMetadata,
    ) -> asyncio.Task[None]:
        """Start writing the markers of ``metadata``'s transaction, then ``complete``."""
        transactional_id = metadata.transactional_id
        task = self._spawn(self._send_and_complete(coordinator_epoch, committed, metadata, complete))
        previous = self._pending.get(transactional_id)
        if previous is not None:
            previous.cancel()
        self._pending[transactional_id] = task
        task.add_done_callback(lambda t: self._forget(transactional_id, t))
        return task

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        return asyncio.ensure_future(coro)

    def _forget(self, transactional_id: str, task: asyncio.Task[None]) -> None:
        if self._pending.get(transactional_id) is task:
            del self._pending[transactional_id]
        if not task.cancelled() and task.exception() is not None:
            logger.error("writing the markers of %s failed", transactional_id, exc_info=task.exception())

    def shutdown(self) -> None:
        for task in list(self._pending.values()):
            task.cancel()
        self._pending.clear()

    async def close(self) -> None:
        self.shutdown()
        # getattr: a MarkerSender may hold connections to close (the protocol has no close)
        close = getattr(self.sender, "close", None)
        if close is not None:
            try:
                await close()
            except Exception:  # noqa: BLE001 - closing the rest of the coordinator goes on
                logger.exception("closing the transaction marker sender failed")

    def _still_coordinator(self, metadata: TransactionMetadata, coordinator_epoch: int) -> bool:
        error, current = self.state_manager.get_transaction_state(metadata.transactional_id)
        return (
            not error
            and current is not None
            and current.coordinator_epoch == coordinator_epoch
            and (current.metadata is metadata)
        )

    async def _send_and_complete(
        self,
        coordinator_epoch: int,
        committed: bool,
        metadata: TransactionMetadata,
        complete: TxnTransitMetadata,
    ) -> None:
        transactional_id = metadata.transactional_id
        producer_id, producer_epoch = metadata.producer_id, metadata.producer_epoch
        backoff_s = self.retry_backoff_ms / 1000
        delay_s = backoff_s
        while metadata.topic_partitions:
            before = len(metadata.topic_partitions)
            if not self._still_coordinator(metadata, coordinator_epoch):
                logger.info("no longer coordinating %s: stopped writing its markers", transactional_id)
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(metadata.topic_partitions):
                leader = self.leader_of(*tp)
                if leader is None:
                    logger.info("%s-%d was deleted: no marker for %s", tp[0], tp[1], transactional_id)
                    metadata.remove_partition(tp)
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            outcomes = await asyncio.gather(
                *(
                    self.sender.write_txn_markers(
                        broker, producer_id, producer_epoch, committed, coordinator_epoch, tps
                    )
                    for broker, tps in by_leader.items()
                ),
                return_exceptions=True,
            )
            if not self._still_coordinator(metadata, coordinator_epoch):
                logger.info("no longer coordinating %s: stopped writing its markers", transactional_id)
                return
            for (broker, tps), outcome in zip(by_leader.items(), outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    if not isinstance(outcome, BrokerConnectionError | OSError):
                        logger.error("WriteTxnMarkers to broker %d failed", broker, exc_info=outcome)
                    else:
                        logger.info("WriteTxnMarkers to broker %d failed (retried): %s", broker, outcome)
                    continue
                for tp in tps:
                    code = outcome.get(tp, int(E.unknown_server_error))
                    if code in _DONE:
                        metadata.remove_partition(tp)
                    elif code in _STOP:
                        logger.info(
                            "marker of %s (producer id %d, epoch %d) refused by %s-%d with error %d: "
                            "stopped writing its markers",
                            transactional_id,
                            producer_id,
                            producer_epoch,
                            tp[0],
                            tp[1],
                            code,
                        )
                        return
                    else:
                        logger.debug("marker for %s-%d failed with error %d: retried", tp[0], tp[1], code)
            if metadata.topic_partitions:
                delay_s = backoff_s if len(metadata.topic_partitions) < before else delay_s
                await asyncio.sleep(delay_s)
                delay_s = min(delay_s * 2, self.max_retry_backoff_ms / 1000)
        while True:
            error = await self.state_manager.append_transaction_to_log(
                transactional_id,
                coordinator_epoch,
                complete,
                retry_on_error=lambda code: code == E.coordinator_not_available,
            )
            if error != E.coordinator_not_available:
                break
            await asyncio.sleep(backoff_s)
        if error:
            logger.info("completing %s's transaction failed with error %d", transactional_id, error)
        else:
            logger.info(
                "transactional id %s (producer id %d, epoch %d): markers written, now %s",
                transactional_id,
                producer_id,
                producer_epoch,
                complete.state.state_name,
            )
