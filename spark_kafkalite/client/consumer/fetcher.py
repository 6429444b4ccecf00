"""``Fetcher``: send fetches for the assigned partitions (Java ``Fetcher`` / ``AbstractFetch``).

``send_fetches`` groups fetchable partitions (valid position, not paused) by leader (or KIP-392
preferred read replica) and sends one FetchRequest per node that has none outstanding, through a
KIP-227 fetch session per node; responses are queued in the ``FetchBuffer`` as
``CompletedFetch``es. A partition whose buffered data is being handed out is fetched ahead from
where that data ends (at most one fetch ahead), so the broker works while records are decoded; if
the position moves meanwhile (seek), the fetched-ahead data is discarded as stale. With
``isolation.level=read_committed`` fetches ask for isolation level 1 (the broker answers up to
the Last Stable Offset with the aborted transactions of the range). The ``FetchCollector``
(``fetch_collector``) hands the buffered records out.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

from spark_kafkalite.client.client_metrics import consumer_fetch_metrics
from spark_kafkalite.client.config import isolation_level_id
from spark_kafkalite.client.consumer.completed_fetch import AbortedTransactions, CompletedFetch
from spark_kafkalite.client.consumer.fetch_buffer import FetchBuffer
from spark_kafkalite.client.consumer.fetch_collector import FetchCollector, fetch_limit
from spark_kafkalite.client.consumer.fetch_session_handler import (
    FetchRequestData,
    FetchSessionHandler,
    PartitionFetchData,
)
from spark_kafkalite.client.consumer.subscription_state import SubscriptionState
from spark_kafkalite.client.errors import is_authentication_error
from spark_kafkalite.client.metadata import Metadata
from spark_kafkalite.client.network_client import NetworkClient, now_ms
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import ConsumerRecord, TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaTimeoutError,
    error_for_code,
)
from spark_kafkalite.protocol.record_batch import iter_batch_headers

__all__ = ["Fetcher", "CompletedFetch", "FetchBuffer"]

log = logging.getLogger(__name__)


class Fetcher:
    """See module docstring. Runs on the consumer's thread.

    Config: ``fetch.min.bytes`` (1), ``fetch.max.wait.ms`` (500), ``fetch.max.bytes`` (50 MiB),
    ``max.partition.fetch.bytes`` (1 MiB), ``max.poll.records`` (500), ``check.crcs`` (true),
    ``isolation.level`` (read_uncommitted), ``request.timeout.ms``.
    """

    def __init__(
        self,
        client: NetworkClient,
        metadata: Metadata,
        subscriptions: SubscriptionState,
        config: Mapping[str, Any],
    ) -> None:
        self._client = client
        self._metadata = metadata
        self._subscriptions = subscriptions
        self._min_bytes = int(config["fetch.min.bytes"])
        self._max_wait_ms = int(config["fetch.max.wait.ms"])
        self._max_bytes = int(config["fetch.max.bytes"])
        self._max_partition_bytes = int(config["max.partition.fetch.bytes"])
        self._isolation_level = isolation_level_id(config["isolation.level"])
        self._request_timeout_ms = int(config["request.timeout.ms"])
        # KIP-392: sent as the Fetch's rack_id (v11+); a preferred read replica the leader names
        # is used until the metadata would age out (Java: metadata.max.age.ms)
        self._client_rack = str(config.get("client.rack") or "")
        self.buffer = FetchBuffer()
        self._collector = FetchCollector(metadata, subscriptions, self.buffer, config)
        self._nodes_with_pending: set[int] = set()
        self._sessions: dict[int, FetchSessionHandler] = {}
        # KIP-227 sessions; "false" sends sessionless full fetches (0, -1) as librdkafka does.
        self._use_sessions = str(config.get("fetch.sessions.enable", True)).lower() not in ("false", "0")
        self.fetch_requests_sent = 0
        #: Kafka's ``consumer-fetch-manager-metrics`` (``KafkaConsumer.metrics()``)
        self.metrics = consumer_fetch_metrics()

    # -------------------------------------------------------------- sending

    def has_pending_fetches(self) -> bool:
        """True while a FetchRequest is outstanding to some node."""
        return bool(self._nodes_with_pending)

    def has_buffered_records(self) -> bool:
        """True while fetched data is waiting to be handed out."""
        return self.buffer.has_buffered_records()

    def _fetch_ahead_offset(self, fetches: list[CompletedFetch]) -> int | None:
        """Where the data buffered for a partition ends, if the next fetch may start there: only
        one buffered fetch, without error and holding at least one complete batch."""
        if len(fetches) != 1:
            return None
        cf = fetches[0]
        if cf.error_code != ErrorCode.none or not cf.records:
            return None
        if cf.end_offset is None:
            end = -1
            for _pos, header in iter_batch_headers(cf.records):
                end = header.next_offset
            cf.end_offset = end
        if cf.end_offset < 0 or cf.end_offset >= self._fetch_limit(cf.high_watermark, cf.last_stable_offset):
            return None  # nothing to fetch ahead (yet): a fetch there would only long-poll
        return cf.end_offset

    def _fetch_limit(self, high_watermark: int, last_stable_offset: int) -> int:
        return fetch_limit(self._isolation_level, high_watermark, last_stable_offset)

    def send_fetches(self, pipelined: bool = False) -> int:
        """Send a FetchRequest to every leader of fetchable partitions that has none pending.
        Returns the number of requests sent.

        ``pipelined`` (records are being returned to the caller): skip partitions already at
        their last known high watermark, whose fetch would only wait ``fetch.max.wait.ms`` on
        the broker and hold the connection (e.g. a bounded reader that is done with the range
        and reassigns the consumer); the caller's next ``poll`` fetches them."""
        cluster = self._metadata.fetch()
        buffered = self.buffer.by_partition()
        now = now_ms()
        by_node: dict[int, dict[TopicPartition, PartitionFetchData]] = {}
        for tp in self._subscriptions.fetchable_partitions():
            fetch_offset = self._subscriptions.position(tp)
            if fetch_offset is None:  # fetchable_partitions() lists partitions with a position
                raise RuntimeError(f"fetchable partition {tp.topic}-{tp.partition} has no position")
            if tp in buffered:
                # Fetch ahead: ask for what follows the buffered data while it is handed out.
                fetch_offset = self._fetch_ahead_offset(buffered[tp])
                if fetch_offset is None:
                    continue
            if pipelined or tp in buffered:
                state = self._subscriptions.state(tp)
                limit = self._fetch_limit(state.high_watermark, state.last_stable_offset)
                if 0 <= limit <= fetch_offset:
                    continue
            pm = cluster.partition(tp)
            if pm is None or pm.leader < 0:
                self._metadata.add_topics(tp.topic)
                self._metadata.request_update()
                continue
            node = self._select_read_replica(tp, pm.leader, pm.offline_replicas, cluster.nodes, now)
            if node in self._nodes_with_pending or self._client.is_unavailable(node):
                continue
            by_node.setdefault(node, {})[tp] = PartitionFetchData(
                fetch_offset=fetch_offset,
                max_bytes=self._max_partition_bytes,
                current_leader_epoch=pm.leader_epoch,
            )
        for node, partitions in by_node.items():
            session = self._sessions.get(node)
            if session is None:
                session = self._sessions[node] = FetchSessionHandler(node, use_sessions=self._use_sessions)
            data = session.build(partitions)
            future = self._client.send(
                node, self._fetch_request(data), timeout_ms=self._request_timeout_ms + self._max_wait_ms
            )
            self._nodes_with_pending.add(node)
            self.fetch_requests_sent += 1
            future.add_callback(functools.partial(self._on_fetch_response, node=node, data=data, sent_ms=now))
        return len(by_node)

    def _select_read_replica(
        self,
        tp: TopicPartition,
        leader: int,
        offline_replicas: tuple[int, ...],
        nodes: Mapping[int, Any],
        now: float,
    ) -> int:
        """The node to fetch ``tp`` from (Java ``AbstractFetch.selectReadReplica``): its
        preferred read replica (KIP-392) while that is known, unexpired and online in the
        metadata, else the leader (and a replica that went offline is forgotten)."""
        preferred = self._subscriptions.preferred_read_replica(tp, now)
        if preferred is None:
            return leader
        if preferred in nodes and preferred not in offline_replicas:
            return preferred
        log.debug(
            "preferred read replica %s of %s is offline or unknown; reading from the leader", preferred, tp
        )
        self._subscriptions.clear_preferred_read_replica(tp)
        return leader

    def _fetch_request(self, data: FetchRequestData, max_wait_ms: int | None = None) -> RequestBuilder:
        by_topic: dict[str, list[tuple[int, PartitionFetchData]]] = {}
        for tp, pd in data.to_send.items():
            by_topic.setdefault(tp.topic, []).append((tp.partition, pd))
        forgotten: dict[str, list[int]] = {}
        for tp in data.to_forget:
            forgotten.setdefault(tp[0], []).append(tp[1])
        min_bytes, max_wait, max_bytes, isolation, rack = (
            self._min_bytes,
            self._max_wait_ms if max_wait_ms is None else max_wait_ms,
            self._max_bytes,
            self._isolation_level,
            self._client_rack,
        )

        def build(version: int) -> Any:
            cls = request_class(ApiKey.FETCH, version)
            topic_cls = nested(cls, "FetchTopic")
            part_cls = nested(cls, "FetchPartition")
            topics = tuple(
                topic_cls(
                    topic=topic,
                    partitions=tuple(
                        make(
                            part_cls,
                            partition=p,
                            current_leader_epoch=pd.current_leader_epoch,
                            fetch_offset=pd.fetch_offset,
                            last_fetched_epoch=pd.last_fetched_epoch,
                            log_start_offset=pd.log_start_offset,
                            partition_max_bytes=pd.max_bytes,
                        )
                        for p, pd in parts
                    ),
                )
                for topic, parts in by_topic.items()
            )
            forgotten_topics: tuple[Any, ...] = ()
            if forgotten and version >= 7:
                forgotten_cls = nested(cls, "ForgottenTopic")
                forgotten_topics = tuple(
                    forgotten_cls(topic=t, partitions=tuple(ps)) for t, ps in forgotten.items()
                )
            return make(
                cls,
                replica_id=-1,
                max_wait=max_wait,
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                isolation_level=isolation,
                session_id=data.session_id,
                session_epoch=data.epoch,
                topics=topics,
                forgotten_topics_data=forgotten_topics,
                rack_id=rack,
            )

        return RequestBuilder(ApiKey.FETCH, build)

    def _on_fetch_response(
        self, future: RequestFuture, node: int, data: FetchRequestData, sent_ms: float
    ) -> None:
        self._nodes_with_pending.discard(node)
        session = self._sessions.get(node)
        if future.failed():
            exc = future.exception
            log.debug("fetch from node %s failed: %s", node, exc)
            if session is not None:
                session.handle_error(exc)  # type: ignore[arg-type]
            for tp in data.session_partitions:  # Java handleFetchFailure: back to the leaders
                self._subscriptions.clear_preferred_read_replica(tp)
            if isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
                self._metadata.request_update()
            elif is_authentication_error(exc):  # raised by the consumer's next poll
                self._metadata.fatal_error(exc)  # type: ignore[arg-type]
            return
        response = future.value
        if session is not None and not session.handle_response(response):
            code = int(getattr(response, "error_code", 0))
            if code:
                log.info("fetch from node %s failed: %s", node, error_for_code(code))
            if code == ErrorCode.fetch_session_topic_id_error:
                self._metadata.request_update()
            return
        # An incremental response may name any partition of the session, not only those sent.
        asked_by_tp = data.session_partitions
        metrics = self.metrics
        metrics.record("fetches", 1)
        metrics.record("fetch_latency_ms", now_ms() - sent_ms)
        fetched = 0
        for topic_response in response.responses:
            topic = str(topic_response.topic)
            for pd in topic_response.partitions:
                tp = TopicPartition(topic, int(pd.partition_index))
                asked = asked_by_tp.get(tp)
                if asked is None:
                    continue
                fetched += len(pd.records) if pd.records is not None else 0
                aborted = None
                if self._isolation_level:
                    aborted = AbortedTransactions(
                        (int(a.producer_id), int(a.first_offset)) for a in pd.aborted_transactions or ()
                    )
                self.buffer.add(
                    CompletedFetch(
                        tp,
                        asked.fetch_offset,
                        int(pd.error_code),
                        int(pd.high_watermark),
                        int(getattr(pd, "log_start_offset", -1)),
                        int(pd.last_stable_offset),
                        pd.records,
                        aborted,
                        int(getattr(pd, "preferred_read_replica", -1)),
                    )
                )
        metrics.record("fetch_bytes", fetched)
        metrics.record("bytes_fetched", fetched)

    # -------------------------------------------------------------- collecting

    def collect_fetch(self, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` (default ``max.poll.records``) buffered records, in offset order
        per partition; advances positions (``FetchCollector.collect_fetch``).

        Raises:
            OffsetOutOfRangeError: out of range with ``auto.offset.reset=none`` (``.partitions``
                maps the partition to its position).
            KafkaError: another non-retriable partition error, or a corrupt batch.
        """
        return self._count_consumed(self._collector.collect_fetch(max_records))

    def collect_columns(
        self, max_records: int | None = None, include_headers: bool = False
    ) -> dict[TopicPartition, dict[str, Any]]:
        """Like :meth:`collect_fetch`, with each partition's records as Arrow arrays
        (``FetchCollector.collect_columns``). Same errors."""
        collected = self._collector.collect_columns(max_records, include_headers)
        self._record_consumed({tp: _column_length(columns) for tp, columns in collected.items()})
        return collected

    def _count_consumed(
        self, records: dict[TopicPartition, list[ConsumerRecord]]
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        self._record_consumed({tp: len(batch) for tp, batch in records.items()})
        return records

    def _record_consumed(self, counts: Mapping[TopicPartition, int]) -> None:
        """records-consumed, records-per-request and, per partition returned, records-lag (high
        watermark minus the new position, Kafka's ``FetchManagerMetrics.recordPartitionLag``)."""
        if not counts:
            return
        metrics = self.metrics
        total = sum(counts.values())
        metrics.record("records_consumed", total)
        metrics.record("records_per_poll", total)
        for tp in counts:
            position = self._subscriptions.position(tp)
            high_watermark = self._subscriptions.state(tp).high_watermark
            if position is not None and high_watermark >= 0:
                metrics.record("records_lag", max(high_watermark - position, 0))

    def close_sessions(self, timeout_ms: float) -> None:
        """Close the fetch sessions on the brokers (a full fetch with epoch -1 and no partitions,
        Java ``AbstractFetch.close``), waiting at most ``timeout_ms`` for the answers; best effort."""
        futures = []
        for node, session in self._sessions.items():
            if node in self._nodes_with_pending or self._client.is_unavailable(node):
                continue
            data = session.close_request()
            if data is not None:
                futures.append(
                    self._client.send(node, self._fetch_request(data, max_wait_ms=0), timeout_ms=timeout_ms)
                )
        self._sessions.clear()
        deadline = now_ms() + timeout_ms
        while any(not f.is_done() for f in futures) and now_ms() < deadline:
            self._client.poll(max(0.0, deadline - now_ms()))

    def clear_buffered(self, tps: set[TopicPartition] | None = None) -> None:
        """Drop buffered data (all, or for ``tps``)."""
        self.buffer.clear(tps)


def _column_length(columns: Mapping[str, Any]) -> int:
    """Records in one partition's columns (the length of its ``offset`` array)."""
    offsets = columns.get("offset")
    return len(offsets) if offsets is not None else 0
