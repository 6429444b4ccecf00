"""One replica fetcher: pulls the partitions this broker follows from one source broker
(Kafka's ``ReplicaFetcherThread`` / ``AbstractFetcherThread``, as an asyncio task).

Each round sends one multi-partition Fetch v12 with ``replica_id`` = this broker,
``replica.fetch.wait.max.ms``, ``replica.fetch.min.bytes``, ``replica.fetch.response.max.bytes``
and per partition ``replica.fetch.max.bytes``, the fetch offset (= local log end offset), the
current leader epoch (KIP-320 fencing), the last fetched epoch (KIP-595 truncation on fetch) and
the local log start offset; over a KIP-227 incremental fetch session
(:class:`spark_kafkalite.protocol.fetch_session.FetchSessionHandler`).

Per partition in the response (``processPartitionData`` / ``truncateOnFetchResponse``):

* ``DivergingEpoch`` -> truncate the local log per Kafka's ``getOffsetTruncationState`` (possibly
  in several steps: the next fetch carries the new last fetched epoch) and fetch on
  (:mod:`broker.replication.fetcher_truncation`);
* records -> ``append_as_follower`` (batches keep the leader's offsets and epochs); the follower
  HW becomes ``min(leader HW, LEO)``; the log start offset follows the leader's;
* ``OFFSET_OUT_OF_RANGE`` -> ListOffsets to the leader: truncate to its log end offset if ours is
  larger, or restart the log at its log start offset if we are behind it
  (``fetchOffsetAndTruncate``);
* leadership / epoch errors -> back off the partition until metadata moves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.network.channel_builders import InterBrokerSecurity
from broker.replication.broker_connection import BrokerConnection, BrokerConnectionError
from broker.replication.fetcher_truncation import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    fetch_leader_offset,
    truncate_on_diverging,
)
from broker.tasks import await_cancelled
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError, needs_metadata_refresh
from spark_kafkalite.protocol.fetch_response_encode import FetchPartitionResult
from spark_kafkalite.protocol.fetch_session import FetchRequestData, FetchSessionHandler, PartitionFetchData
from spark_kafkalite.protocol.replica_fetch_codec import (
    REPLICA_FETCH_VERSION,
    ReplicaFetchPartition,
    decode_replica_fetch_response,
    encode_replica_fetch_request,
)
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from broker.cluster.partition import Partition

__all__ = ["ReplicaFetcher", "FetcherSettings", "PartitionFetchState"]

logger = logging.getLogger(__name__)

FETCH_VERSION = REPLICA_FETCH_VERSION


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """Replica fetch configs (Kafka keys ``replica.fetch.*``, ``replica.socket.timeout.ms``)."""

    max_wait_ms: int = 500
    min_bytes: int = 1
    partition_max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000
    socket_timeout_ms: int = 30000
    #: backoff of a partition after a leadership/epoch error (metadata is about to change).
    epoch_error_backoff_ms: int = 100
    #: TLS/SASL of the inter-broker listener (None = PLAINTEXT).
    security: InterBrokerSecurity | None = None


@dataclass(slots=True)
class PartitionFetchState:
    """A partition being fetched: the leader epoch we follow and when it may be fetched next."""

    topic: str
    partition: int
    leader_epoch: int
    delayed_until: float = 0.0  # time.monotonic()
    #: (epoch, end offset, our LEO, our last epoch) after the last diverging-epoch answer was
    #: handled; the same answer again means the truncation did not help (see _truncate_on_diverging).
    last_diverging: tuple[int, int, int, int | None] | None = None
    diverging_repeats: int = 0
    #: the leader's high watermark minus our log end offset after the last answer (Kafka's
    #: ``FetcherLagStats``, the source of ReplicaFetcherManager MaxLag)
    lag: int = 0

    @property
    def key(self) -> TopicPartitionKey:
        """``(topic, partition)``."""
        return (self.topic, self.partition)


class ReplicaFetcher:
    """Fetches a set of partitions from one source broker.

    Args:
        node_id: this broker (the Fetch ``replica_id``).
        source_broker_id: the leader to fetch from.
        fetcher_id: index within ``num.replica.fetchers``.
        endpoint: ``fn(broker_id) -> (host, port) | None``: the source's inter-broker endpoint
            from the current metadata (resolved on every connect).
        partition_lookup: ``fn(key) -> Partition | None`` (the ReplicaManager's).
        settings: fetch configs.
        on_appended: ``fn(partition)`` after an append that moved the follower's HW, and after
            a truncation: consumers reading this replica (KIP-392) wait for those.
    """

    def __init__(
        self,
        node_id: int,
        source_broker_id: int,
        fetcher_id: int,
        endpoint: Callable[[int], tuple[str, int] | None],
        partition_lookup: Callable[[TopicPartitionKey], Partition | None],
        settings: FetcherSettings,
        on_appended: Callable[[Partition], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.source_broker_id = source_broker_id
        self.fetcher_id = fetcher_id
        self.name = f"ReplicaFetcherThread-{fetcher_id}-{source_broker_id}"
        self._endpoint = endpoint
        self._lookup = partition_lookup
        self.settings = settings
        self._on_appended = on_appended
        self.partitions: dict[TopicPartitionKey, PartitionFetchState] = {}
        #: what the last request wanted per partition; ``_changed``: partitions to look at
        #: again before the next request (added, removed, answered, backed off), so that an
        #: incremental fetch costs in proportion to the changes, not to ``partitions``;
        #: ``_delayed``: partitions backing off, until when (``time.monotonic()``).
        self._wanted: dict[TopicPartitionKey, PartitionFetchData] = {}
        self._changed: set[TopicPartitionKey] = set()
        self._delayed: dict[TopicPartitionKey, float] = {}
        #: partitions looked at to build requests since creation (a count, for tests of cost).
        self.partitions_examined = 0
        self._session = FetchSessionHandler(source_broker_id)
        self._connection: BrokerConnection | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.rounds = 0
        self.restarts = 0

    # -- partitions ----------------------------------------------------------------------------
    def add_partitions(self, states: dict[TopicPartitionKey, PartitionFetchState]) -> None:
        """Fetch ``states``' partitions from the next round on (replacing a partition's state
        when it is fetched already: a new leader epoch)."""
        self.partitions.update(states)
        self._changed.update(states)
        self._wake.set()

    def remove_partitions(self, keys: set[TopicPartitionKey] | list[TopicPartitionKey]) -> None:
        """Stop fetching ``keys`` (unknown keys are ignored); the fetch session forgets them."""
        for key in keys:
            self.partitions.pop(key, None)
            self._changed.add(key)
        self._wake.set()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the fetch loop (once; not after :meth:`shutdown`). Must run on the loop."""
        if self._task is None and not self._stopped:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
            self._task.add_done_callback(self._on_task_done)

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        """A fetcher task that ends without :meth:`shutdown` (cancelled by someone else, or a
        BaseException escaped ``_run``) leaves its partitions unreplicated for good: log it and
        start a new task after ``replica.fetch.backoff.ms``."""
        if self._stopped or self._task is not task:
            return
        self._task = None
        self.restarts += 1
        cause = "cancelled" if task.cancelled() else repr(task.exception())
        logger.error(
            "%s: fetcher task died (%s) while following %d partition(s); restarting in %d ms",
            self.name,
            cause,
            len(self.partitions),
            self.settings.backoff_ms,
        )
        self._session = FetchSessionHandler(self.source_broker_id)  # a request may have been cut midway
        with contextlib.suppress(RuntimeError):  # the loop is closing
            asyncio.get_running_loop().call_later(self.settings.backoff_ms / 1000, self.start)

    async def shutdown(self) -> None:
        """Stop the fetch loop for good and close the connection to the source broker."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await await_cancelled(task, f"{self.name}")
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    # -- the loop ----------------------------------------------------------------------------------
    async def _run(self) -> None:
        logger.info("%s: started", self.name)
        if self.restarts and self._connection is not None:  # a request may have been cut midway
            connection, self._connection = self._connection, None
            await connection.close()  # BrokerConnection.close raises nothing but CancelledError
        while True:
            try:
                await self._do_work()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("%s: unexpected error; backing off", self.name)
                await asyncio.sleep(self.settings.backoff_ms / 1000)

    def _refresh_wanted(self, now: float) -> tuple[dict[TopicPartitionKey, PartitionFetchData], list[Any]]:
        """Bring ``_wanted`` up to date from the changed partitions (all of them before a full
        fetch, which opens a session); returns (updated entries, removed keys)."""
        if self._session.next_metadata.is_full:
            self._changed.update(self.partitions)
            self._changed.update(self._wanted)
        if self._delayed:
            for key, until in list(self._delayed.items()):
                if until <= now:
                    del self._delayed[key]
                    self._changed.add(key)
        changed, self._changed = self._changed, set()
        self.partitions_examined += len(changed)
        updates: dict[TopicPartitionKey, PartitionFetchData] = {}
        removed: list[Any] = []
        for key in changed:
            state = self.partitions.get(key)
            partition = self._lookup(key) if state is not None else None
            if state is None or partition is None or partition.is_leader or state.delayed_until > now:
                if state is not None and state.delayed_until > now:
                    self._delayed[key] = state.delayed_until
                else:
                    self._delayed.pop(key, None)
                if self._wanted.pop(key, None) is not None:
                    removed.append(key)
                continue
            log = partition.log
            last_epoch = log.leader_epoch_cache.latest_epoch
            data = PartitionFetchData(
                fetch_offset=log.log_end_offset,
                max_bytes=self.settings.partition_max_bytes,
                current_leader_epoch=state.leader_epoch,
                log_start_offset=log.log_start_offset,
                last_fetched_epoch=-1 if last_epoch is None else last_epoch,
            )
            self._wanted[key] = data
            updates[key] = data
        return updates, removed

    async def _do_work(self) -> None:
        now = time.monotonic()
        updates, removed = self._refresh_wanted(now)
        if not self._wanted:
            self._wake.clear()
            next_ready = min(self._delayed.values(), default=None)
            timeout = self.settings.backoff_ms / 1000 if next_ready is None else max(0.0, next_ready - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._changed.update(updates)  # not sent: look at them again
            self._changed.update(removed)
            return
        connection = await self._connect()
        if connection is None:
            self._changed.update(updates)
            self._changed.update(removed)
            await asyncio.sleep(self.settings.backoff_ms / 1000)
            return
        encode, request_data = self._build_request(updates, removed)
        try:
            response = await connection.send_encoded(
                encode,
                decode_replica_fetch_response,
                "Fetch",
                self.settings.socket_timeout_ms + self.settings.max_wait_ms,
            )
        except BrokerConnectionError as exc:
            logger.info("%s: fetch failed: %s", self.name, exc)
            self._session.handle_error(exc)
            await asyncio.sleep(min(self.settings.backoff_ms, 1000) / 1000)
            return
        self.rounds += 1
        if not self._session.handle_response(response, FETCH_VERSION):
            if response.error_code != ErrorCode.none:
                logger.info("%s: fetch error %s", self.name, ErrorCode(response.error_code).name)
            return
        for topic_response in response.responses:
            for pd in topic_response.partitions:
                key = (topic_response.topic, pd.partition_index)
                self._changed.add(key)
                out_of_range = self._process_partition_now(key, pd, request_data.session_partitions.get(key))
                if out_of_range is not None:
                    await self._handle_out_of_range(*out_of_range)

    async def _connect(self) -> BrokerConnection | None:
        if self._connection is not None and self._connection.connected:
            return self._connection
        endpoint = self._endpoint(self.source_broker_id)
        if endpoint is None:
            logger.info("%s: no endpoint for broker %d", self.name, self.source_broker_id)
            return None
        host, port = endpoint
        if self._connection is None or (self._connection.host, self._connection.port) != (host, port):
            if self._connection is not None:
                await self._connection.close()
            self._connection = BrokerConnection(
                host,
                port,
                f"broker-{self.node_id}-fetcher-{self.fetcher_id}",
                self.settings.socket_timeout_ms,
                self.settings.security,
            )
        return self._connection

    def _build_request(
        self, updates: dict[TopicPartitionKey, PartitionFetchData], removed: list[Any]
    ) -> tuple[Callable[[int], bytes], FetchRequestData]:
        """(``encode(correlation_id) -> frame`` of the next FetchRequest v12, its session data);
        the request is written by :func:`encode_replica_fetch_request`, no kio entity per
        partition."""
        data = self._session.build_changes(self._wanted, updates, removed)
        by_topic: dict[str, list[ReplicaFetchPartition]] = {}
        for (topic, index), pdata in data.to_send.items():
            partitions = by_topic.get(topic)
            if partitions is None:
                partitions = by_topic[topic] = []
            partitions.append(
                ReplicaFetchPartition(
                    index,
                    pdata.current_leader_epoch,
                    pdata.fetch_offset,
                    pdata.last_fetched_epoch,
                    pdata.log_start_offset,
                    pdata.max_bytes,
                )
            )
        forgotten: dict[str, list[int]] = {}
        for topic, index in data.to_forget:
            forgotten.setdefault(topic, []).append(index)
        settings = self.settings
        client_id = self._connection.client_id if self._connection is not None else self.name

        def encode(correlation_id: int) -> bytes:
            return encode_replica_fetch_request(
                correlation_id,
                client_id,
                replica_id=self.node_id,
                max_wait_ms=settings.max_wait_ms,
                min_bytes=settings.min_bytes,
                max_bytes=settings.response_max_bytes,
                session_id=data.session_id,
                session_epoch=data.epoch,
                topics=by_topic,
                forgotten=forgotten,
            )

        return encode, data

    # -- responses -------------------------------------------------------------------------------
    async def _process_partition(
        self, key: TopicPartitionKey, pd: FetchPartitionResult, sent: PartitionFetchData | None
    ) -> None:
        out_of_range = self._process_partition_now(key, pd, sent)
        if out_of_range is not None:
            await self._handle_out_of_range(*out_of_range)

    def _process_partition_now(
        self, key: TopicPartitionKey, pd: FetchPartitionResult, sent: PartitionFetchData | None
    ) -> tuple[Partition, PartitionFetchState] | None:
        """The synchronous part of handling one partition of a response (no coroutine per
        partition); returns what ``_handle_out_of_range`` must handle (OFFSET_OUT_OF_RANGE), else
        None."""
        state = self.partitions.get(key)
        partition = self._lookup(key)
        if state is None or partition is None or partition.is_leader or sent is None:
            return None  # removed meanwhile
        if partition.leader_epoch != state.leader_epoch or partition.log.log_end_offset != sent.fetch_offset:
            return None  # the partition changed (new epoch, truncation) while the fetch was in flight
        code = pd.error_code
        if code == ErrorCode.none:
            diverging = pd.diverging_epoch  # KIP-595 (NO_DIVERGING_EPOCH: -1, -1)
            if diverging.epoch >= 0 or diverging.end_offset >= 0:
                truncate_on_diverging(
                    partition,
                    diverging.epoch,
                    diverging.end_offset,
                    state,
                    name=self.name,
                    backoff_ms=self.settings.backoff_ms,
                )
                if self._on_appended is not None:
                    self._on_appended(partition)
                return None
            state.last_diverging = None
            self._append(partition, pd)
        elif code == ErrorCode.offset_out_of_range:
            return partition, state
        elif needs_metadata_refresh(code):
            logger.debug("%s: %s-%d: %s; backing off", self.name, key[0], key[1], ErrorCode(code).name)
            state.delayed_until = time.monotonic() + self.settings.epoch_error_backoff_ms / 1000
        else:
            logger.warning("%s: %s-%d: fetch error %s", self.name, key[0], key[1], ErrorCode(code).name)
            state.delayed_until = time.monotonic() + self.settings.backoff_ms / 1000
        return None

    def _append(self, partition: Partition, pd: Any) -> None:
        log = partition.log
        records = pd.records
        if records:
            try:
                log.append_as_follower(records)
            except KafkaError as exc:
                logger.error(
                    "%s: %s-%d: cannot append fetched records at %d: %s",
                    self.name,
                    partition.topic,
                    partition.partition,
                    log.log_end_offset,
                    exc,
                )
                state = self.partitions.get(partition.key)
                if state is not None:
                    state.delayed_until = time.monotonic() + self.settings.backoff_ms / 1000
                return
        high_watermark_moved = partition.update_follower_high_watermark(pd.high_watermark)
        state = self.partitions.get(partition.key)
        if state is not None:
            state.lag = max(0, pd.high_watermark - log.log_end_offset)
        leader_start = pd.log_start_offset
        if leader_start > log.log_start_offset:
            with contextlib.suppress(KafkaError):
                log.maybe_increment_log_start_offset(min(leader_start, log.high_watermark))
        if high_watermark_moved and self._on_appended is not None:
            self._on_appended(partition)

    async def _handle_out_of_range(self, partition: Partition, state: PartitionFetchState) -> None:
        """Kafka's ``fetchOffsetAndTruncate``."""
        log = partition.log
        leo = log.log_end_offset
        try:
            leader_end = await self._list_offset(partition, state, LATEST_TIMESTAMP)
            if not self._unchanged_since(partition, state, leo):
                return
            if leader_end is not None and leader_end < log.log_end_offset:
                logger.warning(
                    "%s: %s-%d: leader's log end %d is below ours %d: truncating (unclean leader election?)",
                    self.name,
                    partition.topic,
                    partition.partition,
                    leader_end,
                    log.log_end_offset,
                )
                log.truncate_to(leader_end)
                return
            leader_start = await self._list_offset(partition, state, EARLIEST_TIMESTAMP)
            if not self._unchanged_since(partition, state, leo):
                return
            if leader_start is not None and leader_start > log.log_end_offset:
                logger.warning(
                    "%s: %s-%d: behind the leader's log start %d: restarting the log there",
                    self.name,
                    partition.topic,
                    partition.partition,
                    leader_start,
                )
                log.truncate_fully_and_start_at(leader_start)
                return
        except BrokerConnectionError as exc:
            logger.info("%s: ListOffsets failed: %s", self.name, exc)
        state.delayed_until = time.monotonic() + self.settings.backoff_ms / 1000

    async def _list_offset(
        self, partition: Partition, state: PartitionFetchState, timestamp: int
    ) -> int | None:
        """The leader's offset for ``timestamp`` (see :func:`fetch_leader_offset`), or None."""
        connection = await self._connect()
        if connection is None:
            return None
        return await fetch_leader_offset(
            connection, self.node_id, partition, state.leader_epoch, timestamp, name=self.name
        )

    def _unchanged_since(self, partition: Partition, state: PartitionFetchState, leo: int) -> bool:
        """After an ``await``: is this still the same follower state (same fetch state and
        leader epoch, still a follower, same log end)? Otherwise a truncation decided before the
        await must not run: the partition may have become leader meanwhile (Kafka checks the
        current leader epoch under ``partitionMapLock`` for the same reason)."""
        return (
            self.partitions.get(partition.key) is state
            and self._lookup(partition.key) is partition
            and not partition.is_leader
            and partition.leader_epoch == state.leader_epoch
            and partition.log.log_end_offset == leo
        )
