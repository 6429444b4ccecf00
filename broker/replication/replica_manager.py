"""``ReplicaManager``: the partitions hosted on this broker, as leaders or followers (Kafka's
``ReplicaManager``; contract in contracts2.md).

* :meth:`apply_delta` turns committed metadata into ``Partition.make_leader`` /
  ``make_follower`` (KRaft's ``applyDelta``), starts/stops replica fetchers and calls the
  leadership listeners (``onLeadershipChange``).
* :meth:`append_records` appends as leader; ``acks=-1`` parks a DelayedProduce until the high
  watermark covers the batch (NOT_ENOUGH_REPLICAS before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND
  or REQUEST_TIMED_OUT after it, exactly as Kafka).
* :meth:`read_for_fetch` serves Fetch for consumers (up to the HW) and followers (up to the
  LEO; their fetch offset updates the leader's view of them, the HW, and may expand the ISR).
* ISR changes go to the controller (``alter_partition``, compare-and-set on the partition
  epoch); the committed result comes back as metadata. A periodic task shrinks the ISR of
  followers not caught up within ``replica.lag.time.max.ms`` (interval: half of it):
  :mod:`broker.replication.isr_change_manager`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.cluster.partition import LogReadResult, Partition
from broker.errors import error_code_for, error_message_for
from broker.log.log_results import FetchDataInfo
from broker.log.producer_state_entry import AppendOrigin
from broker.metrics.meters import BrokerTopicStats, IsrChangeMeters
from broker.replication.append_order import AppendOrder, AppendTicket
from broker.replication.delayed_produce import DelayedProduce, ProducePurgatory
from broker.replication.isr_change_manager import IsrChangeManager
from broker.replication.replica_fetcher import FetcherSettings
from broker.replication.replica_fetcher_manager import ReplicaFetcherManager
from broker.replication.replica_selector import preferred_read_replica
from broker.tasks import await_cancelled
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    RecordError,
    UnknownTopicOrPartitionError,
)
from spark_kafkalite.protocol.internal_topics import INTERNAL_TOPICS
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from broker.config import KafkaConfig
    from broker.controller.metadata_image import MetadataDelta, MetadataImage
    from broker.log.log_manager import LogManager
    from broker.replication.delayed_fetch import FetchPurgatory

__all__ = ["ReplicaManager", "PartitionAppendResult"]

logger = logging.getLogger(__name__)

LeadershipListener = Callable[[str, int, bool, int], None]


@dataclass(slots=True)
class PartitionAppendResult:
    """Per-partition outcome of :meth:`ReplicaManager.append_records` (ProduceResponse fields)."""

    error_code: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[RecordError, ...] = ()  # KIP-467: the records that failed validation


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReplicaManager:
    """Leader/follower state of every local partition.

    Args:
        config: broker config (replica.* keys, num.replica.fetchers, inter.broker.listener.name).
        node_id: this broker.
        log_manager: the logs.
        fetch_purgatory: parked fetches (woken on appends and HW moves).
        image: ``fn() -> MetadataImage`` (the current committed image).
        controller: ``fn() -> controller`` (``alter_partition`` is used when it has it).
    """

    def __init__(
        self,
        config: KafkaConfig,
        node_id: int,
        log_manager: LogManager,
        fetch_purgatory: FetchPurgatory,
        *,
        image: Callable[[], MetadataImage],
        controller: Callable[[], Any],
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        self.config = config
        self.node_id = node_id
        self.log_manager = log_manager
        self.fetch_purgatory = fetch_purgatory
        self._image = image
        self._controller = controller
        self.time_ms: Callable[[], int] = time_ms or _now_ms
        self.replica_lag_time_max_ms = int(config["replica.lag.time.max.ms"])
        #: KIP-392: ``replica.selector.class`` is set (its one value: the rack-aware selector)
        self._replica_selector_enabled = config["replica.selector.class"] is not None
        self._partitions: dict[TopicPartitionKey, Partition] = {}
        #: MessagesIn / BytesIn per topic (counted here, per appended batch) and the meters the
        #: fetch and produce handlers add to (Kafka's ``BrokerTopicStats``)
        self.broker_topic_stats = BrokerTopicStats()
        #: IsrShrinksPerSec / IsrExpandsPerSec of the partitions led here
        self.isr_change_meters = IsrChangeMeters()
        self._listeners: list[LeadershipListener] = []
        self.produce_purgatory = ProducePurgatory(self._partitions.get)
        #: per-partition order of appends that wait for a worker thread (broker.apis.produce)
        self.append_order = AppendOrder()
        self.fetcher_manager = ReplicaFetcherManager(
            node_id,
            int(config["num.replica.fetchers"]),
            FetcherSettings(
                max_wait_ms=int(config["replica.fetch.wait.max.ms"]),
                min_bytes=int(config["replica.fetch.min.bytes"]),
                partition_max_bytes=int(config["replica.fetch.max.bytes"]),
                response_max_bytes=int(config["replica.fetch.response.max.bytes"]),
                backoff_ms=int(config["replica.fetch.backoff.ms"]),
                socket_timeout_ms=int(config["replica.socket.timeout.ms"]),
                security=config.inter_broker_security,
            ),
            self.broker_endpoint,
            self._partitions.get,
            # KIP-392: consumers' fetches parked on a follower wait for its HW
            lambda partition: fetch_purgatory.notify_high_watermark(partition.key),
        )
        self.isr_changes = IsrChangeManager(
            node_id,
            self.replica_lag_time_max_ms,
            partition=self._partitions.get,
            image=image,
            controller=controller,
            time_ms=self.time_ms,
            spawn=self._spawn,
            on_isr_changed=self._complete_delayed,
            meters=self.isr_change_meters,
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        self._shrink_task: asyncio.Task[None] | None = None

    # -- lookup ----------------------------------------------------------------------------
    def partition(self, topic: str, partition: int) -> Partition | None:
        """The local replica of ``topic``-``partition`` (leader or follower), or None."""
        return self._partitions.get((topic, partition))

    def partitions(self) -> dict[TopicPartitionKey, Partition]:
        """A copy of key -> local replica, for every partition hosted here."""
        return dict(self._partitions)

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1) -> Partition:
        """The partition if this broker leads it (Kafka's ``getPartitionOrException`` +
        leader/epoch checks).

        Raises:
            UnknownTopicOrPartitionError, NotLeaderOrFollowerError, FencedLeaderEpochError,
            UnknownLeaderEpochError.
        """
        p = self._partitions.get((topic, partition))
        if p is None:
            if self._image().partition(topic, partition) is None:
                raise UnknownTopicOrPartitionError(
                    f"This server does not host this topic-partition {topic}-{partition}"
                )
            raise NotLeaderOrFollowerError(f"Broker {self.node_id} hosts no replica of {topic}-{partition}")
        p.check_leader(current_leader_epoch)
        return p

    def add_leadership_listener(self, cb: LeadershipListener) -> None:
        """Call ``cb(topic, partition, is_leader_now, leader_epoch)`` on every leadership change
        of a local partition; it is called at once for the partitions led now."""
        self._listeners.append(cb)
        for p in list(self._partitions.values()):
            if p.is_leader:
                self._call_listener(cb, p.topic, p.partition, True, p.leader_epoch)

    def _call_listener(
        self, cb: LeadershipListener, topic: str, partition: int, leader: bool, epoch: int
    ) -> None:
        try:
            cb(topic, partition, leader, epoch)
        except Exception:
            logger.exception("leadership listener failed for %s-%d", topic, partition)

    def _notify_listeners(self, p: Partition, leader: bool) -> None:
        for cb in list(self._listeners):
            self._call_listener(cb, p.topic, p.partition, leader, p.leader_epoch)

    # -- metadata ----------------------------------------------------------------------------
    def broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """``(host, port)`` of ``broker_id``'s inter-broker listener, or None when unknown."""
        broker = self._image().brokers.get(broker_id)
        if broker is None or not broker.endpoints:
            return None
        endpoints = broker.endpoints
        name = self.config.values.get("inter.broker.listener.name")
        if name and name in endpoints:
            return tuple(endpoints[name])  # type: ignore[return-value]
        controller_names = set(self.config.values.get("controller.listener.names") or ())
        for preferred in ("PLAINTEXT", "INTERNAL", "BROKER"):
            if preferred in endpoints:
                return tuple(endpoints[preferred])  # type: ignore[return-value]
        for listener, endpoint in endpoints.items():
            if listener not in controller_names:
                return tuple(endpoint)  # type: ignore[return-value]
        return None

    def _isr_eligible(self, broker_id: int) -> bool:
        broker = self._image().brokers.get(broker_id)
        return broker is not None and not broker.fenced

    def _new_partition(self, topic: str, index: int, topic_id: uuid.UUID) -> Partition:
        log = self.log_manager.get_or_create_log(topic, index, topic_id)
        p = Partition(
            topic,
            index,
            topic_id,
            self.node_id,
            log,
            replica_lag_time_max_ms=self.replica_lag_time_max_ms,
            isr_eligible=self._isr_eligible,
            time_ms=self.time_ms,
        )
        self._register(p)
        return p

    def _register(self, p: Partition) -> None:
        p.isr_watcher = self.isr_changes.watch
        self._partitions[p.key] = p

    def apply_delta(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """Apply committed partition changes (KRaft ``ReplicaManager.applyDelta``): leaders
        make_leader, followers make_follower and (re)start fetching from the new leader; deleted
        topics and partitions no longer assigned here stop. Call before logs are deleted."""
        to_follow: dict[TopicPartitionKey, tuple[int, int]] = {}
        to_unfollow: set[TopicPartitionKey] = set()
        touched: list[TopicPartitionKey] = []
        for topic in delta.deleted_topics:
            for index in topic.partitions:
                self._stop_partition((topic.name, index), to_unfollow)
                touched.append((topic.name, index))
        for name, registration in delta.changed_partitions:
            key = (name, registration.partition)
            touched.append(key)
            if self.node_id not in registration.replicas:
                self._stop_partition(key, to_unfollow)
                continue
            topic_image = image.topic(name)
            if topic_image is None:
                continue
            p = self._partitions.get(key)
            if p is None:
                p = self._new_partition(name, registration.partition, topic_image.topic_id)
            was_leader = p.is_leader
            if registration.leader == self.node_id:
                new_epoch = p.make_leader(registration)
                to_unfollow.add(key)
                if new_epoch:
                    self._notify_listeners(p, True)
            else:
                changed = p.make_follower(registration)
                if was_leader:
                    self._notify_listeners(p, False)
                if registration.leader >= 0:
                    if changed or self.fetcher_manager.fetching(key) is None:
                        to_follow[key] = (registration.leader, registration.leader_epoch)
                else:
                    to_unfollow.add(key)
        if to_unfollow:
            self.fetcher_manager.remove_fetcher_for_partitions(to_unfollow - set(to_follow))
        if to_follow:
            self.fetcher_manager.add_fetcher_for_partitions(to_follow)
        if any(not f.partitions for f in self.fetcher_manager.fetchers.values()):
            self._spawn(self.fetcher_manager.shutdown_idle_fetchers(), "shutdown-idle-fetchers")
        for key in touched:
            self._complete_delayed(key)

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _stop_partition(self, key: TopicPartitionKey, to_unfollow: set[TopicPartitionKey]) -> None:
        p = self._partitions.pop(key, None)
        to_unfollow.add(key)
        if p is not None and p.is_leader:
            p.leader_id = -1
            self._notify_listeners(p, False)

    def _complete_delayed(self, key: TopicPartitionKey) -> None:
        """Wake what may now complete: parked acks=all produces and fetches of ``key``."""
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.notify(key)

    def _complete_delayed_on_high_watermark(self, key: TopicPartitionKey) -> None:
        """:meth:`_complete_delayed` after a follower's fetch moved the HW of ``key`` (and
        nothing else): the parked produces and consumers' fetches; followers' fetches wait
        for records (``FetchPurgatory.notify_high_watermark``)."""
        self.produce_purgatory.check_and_complete(key)
        self.fetch_purgatory.notify_high_watermark(key)

    # -- lifecycle -------------------------------------------------------------------------
    def startup(self) -> None:
        """Start the ISR-expiration task (every ``replica.lag.time.max.ms / 2``)."""
        if self._shrink_task is None:
            self._shrink_task = asyncio.get_running_loop().create_task(
                self.isr_changes.run(), name="isr-expiration"
            )

    async def shutdown(self) -> None:
        """Stop the ISR-expiration and background tasks and the replica fetchers; parked
        acks=all produces complete (with their current state)."""
        for task in [self._shrink_task, *self._tasks]:
            if task is not None:
                task.cancel()
        for task in [self._shrink_task, *self._tasks]:
            if task is not None:
                await await_cancelled(task, f"replica manager task {task.get_name()}")
        self._shrink_task = None
        self._tasks.clear()
        await self.fetcher_manager.shutdown()
        self.produce_purgatory.complete_all()

    # -- produce -----------------------------------------------------------------------------
    async def append_records(
        self,
        entries: Mapping[TopicPartitionKey, bytearray | memoryview],
        required_acks: int,
        timeout_ms: int,
        *,
        internal: bool = False,
        ticket: AppendTicket | None = None,
        on_park: Callable[[], None] | None = None,
    ) -> dict[TopicPartitionKey, PartitionAppendResult]:
        """Append one validated RecordBatch per partition as leader (Kafka's
        ``ReplicaManager.appendRecords``). ``required_acks`` -1 waits up to ``timeout_ms`` for
        the HW to pass every appended batch. ``internal`` appends come from this broker's
        coordinators (``AppendOrigin.COORDINATOR``: internal topics allowed, transaction markers,
        no sequence checks). ``ticket``: the request's place in :attr:`append_order`, taken when
        it arrived (released here once appended); without one, an append to a partition that an
        earlier ticket holds waits for it. ``on_park`` is called if the request parks in the
        produce purgatory. Never raises: errors are per partition."""
        if ticket is None and self.append_order.must_wait(entries):
            ticket = self.append_order.reserve(entries)
        if ticket is not None:
            try:
                await ticket.turn()
                results, required = self._append_entries(entries, required_acks, internal)
            finally:
                ticket.release()
        else:
            results, required = self._append_entries(entries, required_acks, internal)
        if required_acks == -1 and required:
            op = DelayedProduce(required)
            settled = await self.produce_purgatory.try_complete_else_watch(op, timeout_ms, on_park)
            for key, code in settled.items():
                if code != ErrorCode.none:
                    result = results[key]
                    result.error_code = code
                    result.error_message = None
                    if code == ErrorCode.request_timed_out:
                        result.error_message = f"acks=all timed out after {timeout_ms} ms waiting for the ISR"
        return results

    def _append_entries(
        self, entries: Mapping[TopicPartitionKey, bytearray | memoryview], required_acks: int, internal: bool
    ) -> tuple[dict[TopicPartitionKey, PartitionAppendResult], dict[TopicPartitionKey, int]]:
        """The synchronous part of :meth:`append_records`: (results, offset each acks=-1 waits for)."""
        results: dict[TopicPartitionKey, PartitionAppendResult] = {}
        required: dict[TopicPartitionKey, int] = {}
        for key, batch in entries.items():
            topic, index = key
            try:
                if topic in INTERNAL_TOPICS and not internal:
                    raise InvalidTopicError(f"Cannot append to internal topic {topic}")
                p = self.leader_partition(topic, index)
                info = self._append_to_leader(
                    p, batch, required_acks, AppendOrigin.COORDINATOR if internal else AppendOrigin.CLIENT
                )
                results[key] = PartitionAppendResult(
                    ErrorCode.none, info.first_offset, info.log_append_time_ms, p.log.log_start_offset
                )
                self.broker_topic_stats.record_produce(topic, info.records_count, info.valid_bytes)
                required[key] = info.last_offset + 1
                self._complete_delayed(key)
            except Exception as exc:  # noqa: BLE001 - per-partition wire error
                results[key] = PartitionAppendResult(
                    error_code_for(exc, f"append to {topic}-{index}"),
                    error_message=error_message_for(exc),
                    record_errors=exc.record_errors if isinstance(exc, KafkaError) else (),
                )
        return results, required

    def _append_to_leader(
        self, p: Partition, batch: bytearray | memoryview, required_acks: int, origin: AppendOrigin
    ) -> Any:
        manager = self.log_manager
        offline = manager.offline_dir_of(p.topic, p.partition)
        if offline is not None:
            raise KafkaStorageError(f"Log dir {offline} of {p.topic}-{p.partition} is offline")
        try:
            return p.append_records_to_leader(batch, required_acks, origin)
        except OSError as exc:
            log_dir = manager.mark_log_dir_offline(p.topic, p.partition, exc)
            raise KafkaStorageError(
                f"Error while appending records to {p.topic}-{p.partition} in dir {log_dir}: {exc}"
            ) from exc

    # -- fetch ---------------------------------------------------------------------------------
    def read_for_fetch(
        self,
        topic: str,
        index: int,
        fetch_offset: int,
        max_bytes: int,
        *,
        replica_id: int,
        current_leader_epoch: int = -1,
        last_fetched_epoch: int = -1,
        log_start_offset: int = -1,
        min_one_message: bool = True,
        isolation_level: int = 0,
        defer_above: int | None = None,
        client_rack: str | None = None,
    ) -> LogReadResult:
        """Read one partition for a Fetch (Kafka's ``readFromLog`` + follower fetch-state
        update). ``defer_above``: see ``UnifiedLog.read``. ``replica_id >= 0`` is a follower: reads up to the LEO, records its fetch
        offset (advancing the HW, completing parked produces, maybe expanding the ISR).
        Consumers read up to the HW, or the LSO with ``isolation_level`` 1 (read_committed).
        ``result.pending`` says whether the fetcher has more to get here (see LogReadResult).

        ``client_rack`` (a consumer's Fetch v11+ ``rack_id``; None before v11) is KIP-392's
        client metadata: with it a consumer may read a replica that follows, and the leader,
        with ``replica.selector.class`` set, may answer with no records and the
        ``preferred_read_replica`` to read from instead (``broker/replication/replica_selector.py``).
        On a follower, an offset past its log end is an empty read when the consumer sent no
        leader epoch (it may be there on stale metadata; KAFKA-14274), else OFFSET_OUT_OF_RANGE.

        Raises:
            KafkaError subclasses (mapped to the partition's error code by the caller).
        """
        is_follower = replica_id >= 0
        if is_follower or client_rack is None:
            p = self.leader_partition(topic, index, current_leader_epoch)
        else:
            p = self._consumer_readable_partition(topic, index)
            if p.is_leader and self._replica_selector_enabled:
                preferred = preferred_read_replica(
                    p, client_rack, fetch_offset, self._broker_rack, self.time_ms()
                )
                if preferred is not None:
                    p.check_current_leader_epoch(current_leader_epoch)
                    log = p.log
                    return LogReadResult(
                        FetchDataInfo(b""),
                        log.high_watermark,
                        log.log_start_offset,
                        log.log_end_offset,
                        None,
                        log.last_stable_offset,
                        preferred_read_replica=preferred,
                    )
            if not p.is_leader:
                return self._read_as_follower_for_consumer(
                    p,
                    fetch_offset,
                    max_bytes,
                    current_leader_epoch,
                    min_one_message,
                    isolation_level,
                    defer_above,
                )
            p.check_current_leader_epoch(current_leader_epoch)
        result = p.read_records(
            fetch_offset,
            max_bytes,
            is_follower=is_follower,
            last_fetched_epoch=last_fetched_epoch,
            min_one_message=min_one_message,
            isolation_level=isolation_level,
            defer_above=defer_above,
        )
        if is_follower and result.diverging_epoch is None:
            if p.update_follower_fetch_state(replica_id, fetch_offset, log_start_offset):
                self._complete_delayed_on_high_watermark(p.key)
            result.high_watermark = p.high_watermark
            result.last_stable_offset = p.log.last_stable_offset
            if p.isr_expansion_candidate(replica_id):
                self.isr_changes.alter_isr(p, tuple(sorted({*p.isr, replica_id})), "expand")
            # a follower outside the ISR is read on each fetch so that its expansion is retried
            result.pending = fetch_offset < result.log_end_offset or replica_id not in p.isr
        elif not is_follower:
            bound = result.last_stable_offset if isolation_level == 1 else result.high_watermark
            result.pending = fetch_offset < bound
        return result

    def _consumer_readable_partition(self, topic: str, index: int) -> Partition:
        """The local replica a consumer with KIP-392 client metadata may read, leader or
        follower (Kafka's ``localLogWithEpochOrThrow`` with ``requireLeader`` false).

        Raises:
            UnknownTopicOrPartitionError, NotLeaderOrFollowerError (no local replica).
        """
        p = self._partitions.get((topic, index))
        if p is None:
            return self.leader_partition(topic, index)  # raises the error naming why
        return p

    def _read_as_follower_for_consumer(
        self,
        p: Partition,
        fetch_offset: int,
        max_bytes: int,
        current_leader_epoch: int,
        min_one_message: bool,
        isolation_level: int,
        defer_above: int | None,
    ) -> LogReadResult:
        """A consumer's read of a partition this broker follows (KIP-392), up to its own HW or
        LSO."""
        log = p.log
        if current_leader_epoch < 0 and fetch_offset > log.log_end_offset:
            return LogReadResult(
                FetchDataInfo(b""),
                log.high_watermark,
                log.log_start_offset,
                log.log_end_offset,
                None,
                log.last_stable_offset,
            )
        result = p.read_records(
            fetch_offset,
            max_bytes,
            is_follower=False,
            current_leader_epoch=current_leader_epoch,
            min_one_message=min_one_message,
            isolation_level=isolation_level,
            defer_above=defer_above,
            fetch_only_from_leader=False,
        )
        bound = result.last_stable_offset if isolation_level == 1 else result.high_watermark
        result.pending = fetch_offset < bound
        return result

    def _broker_rack(self, broker_id: int) -> tuple[bool, str | None]:
        """(registered, ``broker.rack``) of ``broker_id`` from the metadata image."""
        registration = self._image().brokers.get(broker_id)
        if registration is None or registration.fenced:
            return False, None
        return True, registration.rack
