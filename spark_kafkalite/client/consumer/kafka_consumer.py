"""``KafkaConsumer`` (Java ``org.apache.kafka.clients.consumer.KafkaConsumer``).

Single-threaded: ``poll`` resolves missing positions (ListOffsets per ``auto.offset.reset``),
hands out buffered records and sends the next fetches before returning, so the network works
while the caller processes records. With ``group.id``, ``subscribe`` joins a consumer group
(``ConsumerCoordinator``, or ``ConsumerProtocolCoordinator`` with ``group.protocol=consumer``,
KIP-848: rebalances, heartbeats, auto-commit, ``commit_sync`` /
``commit_async`` / ``committed``; see ``group_consumer.py``); without it, ``assign`` only.
Not thread-safe: use one consumer per thread.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, overload

from spark_kafkalite.client.config import parse_config
from spark_kafkalite.client.consumer.consumer_coordinator import (
    ConsumerRebalanceListener,
    OffsetCommitCallback,
)
from spark_kafkalite.client.consumer.fetcher import Fetcher
from spark_kafkalite.client.consumer.group_consumer import GROUP_DEFAULTS, ConsumerGroup
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.consumer.offset_fetcher import OffsetFetcher
from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.client.metadata import (
    Cluster,
    Metadata,
    fetch_cluster,
)
from spark_kafkalite.client.network_client import NetworkClient, now_ms
from spark_kafkalite.client.types import ConsumerRecord, OffsetAndTimestamp, TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaTimeoutError,
    error_for_code,
)

__all__ = ["KafkaConsumer", "CONSUMER_DEFAULTS"]

log = logging.getLogger(__name__)

CONSUMER_DEFAULTS: dict[str, Any] = {
    "group.id": "",
    "auto.offset.reset": "latest",
    "fetch.min.bytes": 1,
    "fetch.max.wait.ms": 500,
    "fetch.max.bytes": 52428800,
    "max.partition.fetch.bytes": 1048576,
    "max.poll.records": 500,
    "check.crcs": True,
    "isolation.level": "read_uncommitted",
    "client.rack": "",
    "exclude.internal.topics": True,
    "allow.auto.create.topics": False,
    # KIP-848: classic (JoinGroup/SyncGroup, client-side assignors) or consumer (the broker
    # assigns, ConsumerGroupHeartbeat); Java ConsumerConfig GROUP_PROTOCOL_CONFIG
    "group.protocol": "classic",
    "group.remote.assignor": None,
    **GROUP_DEFAULTS,  # group.instance.id, session/heartbeat/poll timeouts, auto-commit, assignors
}


def _tp(value: Any) -> TopicPartition:
    if isinstance(value, TopicPartition):
        return value
    topic, partition = value
    return TopicPartition(str(topic), int(partition))


class KafkaConsumer:
    """Consume records from manually assigned partitions, or as a member of the consumer group
    ``group.id`` with ``subscribe`` (group methods delegate to a ``group_consumer.ConsumerGroup``).

    Config (Kafka's names; values may be strings): ``bootstrap.servers`` (required),
    ``auto.offset.reset`` (earliest | latest | none; default latest), ``fetch.min.bytes`` (1),
    ``fetch.max.wait.ms`` (500), ``fetch.max.bytes`` (50 MiB), ``max.partition.fetch.bytes``
    (1 MiB), ``max.poll.records`` (500), ``request.timeout.ms`` (30000),
    ``default.api.timeout.ms`` (60000, for blocking lookups), ``client.id``,
    ``allow.auto.create.topics`` (false here, unlike Java: reading never creates topics),
    ``client.rack`` (KIP-392: the consumer's rack; with the brokers' ``broker.rack`` and
    ``replica.selector.class`` set, it reads from a replica in its rack), ``group.protocol``
    (classic | consumer; consumer is KIP-848's protocol: the broker assigns, rebalances are
    incremental; classic-only keys are then rejected) and ``group.remote.assignor`` (consumer
    protocol only: the broker-side assignor, ``uniform`` or ``range``; default the broker's).

    Raises:
        InvalidConfigError: a bad setting.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(config or {})
        merged.update({k.replace("_", "."): v for k, v in kwargs.items()})
        self.config = parse_config(merged, CONSUMER_DEFAULTS, "consumer")
        cfg = self.config
        self._default_timeout_ms = float(cfg["default.api.timeout.ms"])
        self._retry_backoff_ms = float(cfg["retry.backoff.ms"])
        self._exclude_internal = bool(cfg["exclude.internal.topics"])
        self._metadata = Metadata(cfg, allow_auto_topic_creation=bool(cfg["allow.auto.create.topics"]))
        self._client = NetworkClient(cfg, self._metadata)
        self._subscriptions = SubscriptionState(OffsetResetStrategy.parse(cfg["auto.offset.reset"]))
        self._fetcher = Fetcher(self._client, self._metadata, self._subscriptions, cfg)
        self._offset_fetcher = OffsetFetcher(self._client, self._metadata, self._subscriptions, cfg)
        self._closed = False
        self._group = ConsumerGroup(
            cfg,
            self._client,
            self._metadata,
            self._subscriptions,
            self._fetcher.clear_buffered,
            self._default_timeout_ms,
            merged.keys(),
        )

    # -------------------------------------------------------------- assignment and positions

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Replace the assignment with ``partitions`` (positions of kept partitions are kept)."""
        self._ensure_open()
        tps = [_tp(p) for p in partitions]
        self._group.check_manual_assign(tps)
        removed = self._subscriptions.assigned_partitions() - set(tps)
        if removed:
            self._fetcher.clear_buffered(removed)
        self._subscriptions.assign(tps)
        self._metadata.set_topics({tp.topic for tp in tps})

    def unsubscribe(self) -> None:
        """Drop the assignment, or the group subscription (revoke callbacks, auto-commit,
        LeaveGroup)."""
        self._group.unsubscribe()
        self.assign([])

    def assignment(self) -> set[TopicPartition]:
        """The partitions assigned to this consumer now, by ``assign`` or by the group (Java
        ``KafkaConsumer.assignment``); a copy."""
        return self._subscriptions.assigned_partitions()

    def _assigned(self, tp: Any) -> TopicPartition:
        tp = _tp(tp)
        if not self._subscriptions.is_assigned(tp):
            raise IllegalStateError(f"partition {tp.topic}-{tp.partition} is not assigned to this consumer")
        return tp

    def seek(
        self, partition: TopicPartition | tuple[str, int], offset: int, leader_epoch: int | None = None
    ) -> None:
        """Fetch from ``offset`` next. With ``leader_epoch`` (the epoch of the record before
        ``offset``, e.g. of a committed offset), the position is first validated against the
        current leader (KIP-320, as Java's ``seek(tp, OffsetAndMetadata)``).

        Raises:
            IllegalStateError: the partition is not assigned.
            ValueError: negative offset.
        """
        tp = self._assigned(partition)
        if offset < 0:
            raise ValueError(f"seek offset must not be negative: {offset}")
        epoch = leader_epoch if leader_epoch is not None and leader_epoch >= 0 else None
        self._subscriptions.seek(tp, offset, offset_epoch=epoch)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Reset the partitions (all assigned when none given) to their log start offset,
        evaluated lazily on the next ``poll``/``position``."""
        for tp in partitions or tuple(self.assignment()):
            self._subscriptions.request_offset_reset(self._assigned(tp), OffsetResetStrategy.EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Reset the partitions (all assigned when none given) to their high watermark, lazily."""
        for tp in partitions or tuple(self.assignment()):
            self._subscriptions.request_offset_reset(self._assigned(tp), OffsetResetStrategy.LATEST)

    def position(self, partition: TopicPartition | tuple[str, int], timeout_ms: float | None = None) -> int:
        """The offset of the next record to be returned, resolving a pending reset first.

        Raises:
            IllegalStateError: not assigned. NoOffsetForPartitionError: no position, reset none.
            KafkaTimeoutError: not resolved within ``timeout_ms`` (default.api.timeout.ms).
        """
        self._ensure_open()
        tp = self._assigned(partition)
        deadline = now_ms() + (self._default_timeout_ms if timeout_ms is None else timeout_ms)
        while not self._subscriptions.has_valid_position(tp):
            if not self._group.refresh_committed_positions(deadline):  # group: committed offsets first
                raise KafkaTimeoutError(
                    f"cannot fetch the committed offset of {tp.topic}-{tp.partition} in time"
                )
            self._offset_fetcher.validate_positions_if_needed()
            self._offset_fetcher.reset_positions_if_needed()
            remaining = deadline - now_ms()
            if remaining <= 0:
                raise KafkaTimeoutError(f"cannot determine the position of {tp.topic}-{tp.partition} in time")
            self._client.poll(min(remaining, self._retry_backoff_ms))
            self._metadata.maybe_throw_fatal_error()
        position = self._subscriptions.position(tp)
        if position is None:  # has_valid_position(tp) held when the loop ended
            raise RuntimeError(f"{tp.topic}-{tp.partition} lost its position while it was resolved")
        return position

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching ``partitions`` until :meth:`resume`; their positions stay and ``poll``
        returns none of their records meanwhile (Java ``KafkaConsumer.pause``).

        Raises:
            IllegalStateError: a partition is not assigned to this consumer."""
        for tp in partitions:
            self._subscriptions.pause(self._assigned(tp))

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch ``partitions`` again after :meth:`pause` (Java ``KafkaConsumer.resume``).

        Raises:
            IllegalStateError: a partition is not assigned to this consumer."""
        for tp in partitions:
            self._subscriptions.resume(self._assigned(tp))

    def paused(self) -> set[TopicPartition]:
        """The assigned partitions that are paused (Java ``KafkaConsumer.paused``)."""
        return self._subscriptions.paused_partitions()

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark seen in the last fetch response for ``partition`` (None if none)."""
        hw = self._subscriptions.state(self._assigned(partition)).high_watermark
        return None if hw < 0 else hw

    # -------------------------------------------------------------- polling

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records of the assigned partitions, waiting up to ``timeout_ms`` for some.

        Returns ``{tp: [ConsumerRecord, ...]}`` with at most ``max_records`` (default
        ``max.poll.records``) records in total, in offset order per partition; ``{}`` on timeout.

        Raises:
            OffsetOutOfRangeError: out of range with ``auto.offset.reset=none``.
            NoOffsetForPartitionError: a partition has no position and the reset policy is none.
            KafkaError: other non-retriable fetch errors (e.g. a corrupt batch).
        """
        return self._poll(timeout_ms, lambda: self._fetcher.collect_fetch(max_records))

    def poll_columns(
        self, timeout_ms: float = 0, max_records: int | None = None, include_headers: bool = False
    ) -> dict[TopicPartition, dict[str, Any]]:
        """:meth:`poll` for columnar readers (the ``kafkalite`` Spark source): per partition, Arrow
        arrays ``key``, ``value``, ``offset``, ``timestamp``, ``timestampType`` (and ``headers``)
        decoded straight from the fetched RecordBatch bytes, without a ``ConsumerRecord`` per
        record. Same positions, limits and errors as :meth:`poll`."""
        return self._poll(timeout_ms, lambda: self._fetcher.collect_columns(max_records, include_headers))

    def _poll(
        self, timeout_ms: float, collect: Callable[[], dict[TopicPartition, Any]]
    ) -> dict[TopicPartition, Any]:
        self._ensure_open()
        if not self._subscriptions.assigned_partitions() and not self._group.is_subscribed():
            raise IllegalStateError("consumer is not subscribed to any topics or assigned any partitions")
        deadline = now_ms() + max(0.0, float(timeout_ms))
        while True:
            if not self._group.update_assignment_metadata(deadline):  # group (re)join, committed offsets
                return {}
            self._offset_fetcher.validate_positions_if_needed()
            self._offset_fetcher.reset_positions_if_needed()
            records = collect()
            if records:
                self._keep_fetches_flowing()
                return records
            self._fetcher.send_fetches()
            now = now_ms()
            wait = min(
                deadline - now,
                self._subscriptions.next_reset_delay_ms(now),
                self._subscriptions.next_validation_delay_ms(now),
                self._group.poll_wait_ms(now),
            )
            if self._metadata.update_requested():
                wait = min(wait, self._retry_backoff_ms)
            self._client.poll(max(0.0, wait))
            self._metadata.maybe_throw_fatal_error()
            records = collect()
            if records:
                self._keep_fetches_flowing()
                return records
            if now_ms() >= deadline:
                return {}

    def _keep_fetches_flowing(self) -> None:
        """Records are being returned: send the next fetches (fetch ahead, Java's
        ``Fetcher.sendFetches`` at the end of ``poll``) and, without blocking, read whatever part
        of an outstanding fetch response has arrived. A large response (``max.partition.fetch.bytes``)
        does not fit the socket buffers: read only when the buffered records ran out, it stalled the
        broker mid-write and the caller then waited for the rest (measured with bench/spark_read.py:
        ~5 blocking waits per 250k-row read task, 2-3 with this). At most the data being handed out
        plus one fetch ahead stays buffered, as before."""
        if self._fetcher.send_fetches(pipelined=True) or self._fetcher.has_pending_fetches():
            self._client.poll(0)

    def __iter__(self) -> Any:
        """Iterate records forever (``poll`` in a loop)."""
        while True:
            for records in self.poll(1000).values():
                yield from records

    # -------------------------------------------------------------- offsets lookups

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """Log start offset per partition (ListOffsets -2).

        Raises:
            UnknownTopicOrPartitionError: a topic/partition does not exist. KafkaTimeoutError.
        """
        return self._offsets({_tp(tp): -2 for tp in partitions}, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """High watermark per partition (ListOffsets -1, read_uncommitted).

        Raises:
            UnknownTopicOrPartitionError: a topic/partition does not exist. KafkaTimeoutError.
        """
        return self._offsets({_tp(tp): -1 for tp in partitions}, timeout_ms)

    def _offsets(
        self, query: dict[TopicPartition, int], timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        self._ensure_open()
        found = self._offset_fetcher.list_offsets(
            query, self._default_timeout_ms if timeout_ms is None else timeout_ms
        )
        return {tp: value[0] for tp, value in found.items() if value is not None}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given ms per partition; None when no
        such record exists.

        Raises:
            ValueError: a negative timestamp. UnknownTopicOrPartitionError. KafkaTimeoutError.
        """
        self._ensure_open()
        query = {}
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must not be negative: {ts}")
            query[_tp(tp)] = int(ts)
        found = self._offset_fetcher.list_offsets(
            query, self._default_timeout_ms if timeout_ms is None else timeout_ms
        )
        return {
            tp: None if value is None else OffsetAndTimestamp(value[0], value[1])
            for tp, value in found.items()
        }

    # -------------------------------------------------------------- metadata

    def _fetch_topic_metadata(self, topics: list[str] | None, timeout_ms: float | None) -> Cluster:
        self._ensure_open()
        return fetch_cluster(
            self._client,
            topics,
            self._default_timeout_ms if timeout_ms is None else timeout_ms,
            self._retry_backoff_ms,
            frozenset((ErrorCode.leader_not_available,)),
        )

    def partitions_for_topic(self, topic: str, timeout_ms: float | None = None) -> set[int] | None:
        """Partition ids of ``topic``, or None if it does not exist.

        Raises:
            KafkaTimeoutError: no metadata in time. KafkaError: e.g. INVALID_TOPIC_EXCEPTION.
        """
        cached = self._metadata.fetch().partitions.get(topic)
        if cached:
            return set(cached)
        cluster = self._fetch_topic_metadata([topic], timeout_ms)
        code = cluster.topic_errors.get(topic)
        if code == ErrorCode.unknown_topic_or_partition:
            return None
        if code is not None:
            raise error_for_code(code, f"topic {topic}")
        parts = cluster.partitions.get(topic)
        return set(parts) if parts is not None else None

    def list_topics(self, timeout_ms: float | None = None) -> dict[str, set[int]]:
        """Every topic (internal ones excluded unless ``exclude.internal.topics=false``) and
        its partition ids."""
        cluster = self._fetch_topic_metadata(None, timeout_ms)
        return {
            topic: set(parts)
            for topic, parts in cluster.partitions.items()
            if not (self._exclude_internal and topic in cluster.internal_topics)
        }

    # -------------------------------------------------------------- lifecycle

    def metrics(self) -> dict[str, dict[str, float]]:
        """Kafka's consumer fetch metrics, ``{"consumer-fetch-manager-metrics": {name: value}}``
        as kafka-python's ``KafkaConsumer.metrics()``: ``fetch-rate`` / ``-total``,
        ``fetch-latency-avg`` / ``-max`` (ms), ``fetch-size-avg`` / ``-max`` and
        ``bytes-consumed-rate`` / ``-total`` (bytes of records fetched), ``records-consumed-rate``
        / ``-total``, ``records-per-request-avg`` (records per poll), ``records-lag-max`` (high
        watermark minus position, over the partitions polled); rates per second over Kafka's
        default sample windows (2 x 30 s), averages and maxima NaN before any sample
        (``spark_kafkalite.client.client_metrics``)."""
        return self._fetcher.metrics.snapshot()

    # -------------------------------------------------------------- consumer group
    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str] = (),
        listener: ConsumerRebalanceListener | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Join the group ``group.id`` for ``topics`` (names, or a compiled regex / ``pattern=``
        matched in full against every topic, re-evaluated every ``metadata.max.age.ms``; with
        ``group.protocol=consumer`` the pattern is sent to the broker, which evaluates it as RE2).
        The assignment arrives in ``poll``; ``listener`` gets the rebalance callbacks. An empty
        topic list equals ``unsubscribe()``.

        Raises:
            InvalidGroupIdError: no ``group.id``. IllegalStateError: partitions were assigned
            manually. ValueError: an empty topic name.
        """
        self._ensure_open()
        if not self._group.subscribe(topics, listener, pattern=pattern):
            self.unsubscribe()

    def subscription(self) -> set[str]:
        """Topics of the current subscription (for a pattern: the topics it matches now)."""
        return self._group.subscription()

    def commit_sync(
        self, offsets: Mapping[Any, int | OffsetAndMetadata] | None = None, timeout_ms: float | None = None
    ) -> None:
        """Commit ``offsets`` (``{tp: next offset to consume}`` or OffsetAndMetadata values;
        default: the position of every assigned partition) and wait.

        Raises:
            InvalidGroupIdError: no ``group.id``. CommitFailedError: the member left the group
            (rebalanced away). RebalanceInProgressError: a rebalance is under way; ``poll`` and
            retry. KafkaTimeoutError: not done within ``timeout_ms`` (default.api.timeout.ms).
            KafkaError: other broker errors (OFFSET_METADATA_TOO_LARGE, authorization ...).
        """
        self._ensure_open()
        self._group.commit_sync(offsets, timeout_ms)

    def commit_async(
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata] | None = None,
        callback: OffsetCommitCallback | None = None,
    ) -> None:
        """Send a commit without waiting; ``callback(offsets, exception_or_None)`` runs during a
        later ``poll``/``commit_*``/``close`` on this thread.

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        self._ensure_open()
        self._group.commit_async(offsets, callback)

    @overload
    def committed(
        self, partitions: TopicPartition, timeout_ms: float | None = None
    ) -> OffsetAndMetadata | None: ...

    @overload
    def committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]: ...

    def committed(
        self, partitions: TopicPartition | Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> OffsetAndMetadata | None | dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (OffsetFetch): for one TopicPartition its
        ``OffsetAndMetadata`` or None; for several ``{tp: OffsetAndMetadata | None}``.

        Raises:
            InvalidGroupIdError: no ``group.id``. KafkaTimeoutError. KafkaError.
        """
        self._ensure_open()
        return self._group.committed(partitions, timeout_ms)

    def group_metadata(self) -> dict[str, Any]:
        """``{"group_id", "generation_id", "member_id", "group_instance_id"}`` (Java
        ``ConsumerGroupMetadata``).

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        return self._group.group_metadata()

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("this consumer has already been closed")

    def close(self) -> None:
        """Close connections. Idempotent."""
        if self._closed:
            return
        try:
            self._group.close(min(30000.0, self._default_timeout_ms))  # commit, revoke, LeaveGroup
        except Exception:  # noqa: BLE001 - closing must not fail on a group error
            log.warning("closing the group membership failed", exc_info=True)
        self._closed = True
        try:
            self._fetcher.close_sessions(min(1000.0, self._default_timeout_ms))
        except Exception:  # noqa: BLE001 - closing must not fail on a broker's answer
            log.debug("closing fetch sessions failed", exc_info=True)
        self._client.close()
        self._metadata.close()

    def __enter__(self) -> KafkaConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
