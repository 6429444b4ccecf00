"""``Fetcher``: fetch records for the assigned partitions (Java ``Fetcher`` / ``FetchCollector``).

``send_fetches`` groups fetchable partitions (valid position, not paused) by leader and sends
one FetchRequest per node that has none outstanding; responses are queued as
``CompletedFetch``es. A partition whose buffered data is being handed out is fetched ahead from
where that data ends (at most one fetch ahead), so the broker works while records are decoded;
if the position moves meanwhile (seek), the fetched-ahead data is discarded as stale. ``collect_fetch`` hands out up to ``max.poll.records`` records, decoding
one RecordBatch at a time (columnar ``decode_batch``), skipping records below the position
(a batch may start before it) and control batches, and discarding stale data whose fetch offset
no longer matches the position (after a seek). With ``isolation.level=read_committed`` fetches
ask for isolation level 1 (the broker answers up to the Last Stable Offset with the aborted
transactions of the range) and batches of aborted transactions are skipped whole, as control
batches are (``AbortedTransactions``, Java ``CompletedFetch``): the position moves past both. Partition errors are handled like Java's
``FetchCollector.handleInitializeErrors``: leader / topic errors refresh metadata,
OFFSET_OUT_OF_RANGE resets per ``auto.offset.reset`` or raises ``OffsetOutOfRangeError``.
"""

from __future__ import annotations

import functools
import logging
from bisect import bisect_left
from collections import deque
from collections.abc import Mapping
from itertools import repeat
from typing import Any

from spark_kafkalite.client.config import isolation_level_id
from spark_kafkalite.client.consumer.completed_fetch import AbortedTransactions, CompletedFetch
from spark_kafkalite.client.consumer.fetch_session_handler import (
    FetchRequestData,
    FetchSessionHandler,
    PartitionFetchData,
)
from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
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
    KafkaError,
    KafkaTimeoutError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    error_for_code,
    needs_metadata_refresh,
)
from spark_kafkalite.protocol.record_batch import decode_batch, iter_batch_headers

__all__ = ["Fetcher", "CompletedFetch"]

log = logging.getLogger(__name__)

_RETRY_ERRORS = {ErrorCode.unknown_server_error}


_new_tuple = tuple.__new__


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
        self.max_poll_records = int(config["max.poll.records"])
        self._check_crcs = bool(config["check.crcs"])
        self._isolation_level = isolation_level_id(config["isolation.level"])
        self._request_timeout_ms = int(config["request.timeout.ms"])
        # KIP-392: sent as the Fetch's rack_id (v11+); a preferred read replica the leader names
        # is used until the metadata would age out (Java: metadata.max.age.ms)
        self._client_rack = str(config.get("client.rack") or "")
        self._preferred_replica_ttl_ms = float(config.get("metadata.max.age.ms", 300000))
        self._completed: deque[CompletedFetch] = deque()
        self._next_in_line: CompletedFetch | None = None
        self._nodes_with_pending: set[int] = set()
        self._sessions: dict[int, FetchSessionHandler] = {}
        # KIP-227 sessions; "false" sends sessionless full fetches (0, -1) as librdkafka does.
        self._use_sessions = str(config.get("fetch.sessions.enable", True)).lower() not in ("false", "0")
        self.fetch_requests_sent = 0

    # -------------------------------------------------------------- sending

    def has_pending_fetches(self) -> bool:
        return bool(self._nodes_with_pending)

    def has_buffered_records(self) -> bool:
        return bool(self._completed) or (self._next_in_line is not None and not self._next_in_line.consumed)

    def _buffered_fetches(self) -> dict[TopicPartition, list[CompletedFetch]]:
        buffered: dict[TopicPartition, list[CompletedFetch]] = {}
        if self._next_in_line is not None and not self._next_in_line.consumed:
            buffered[self._next_in_line.tp] = [self._next_in_line]
        for cf in self._completed:
            buffered.setdefault(cf.tp, []).append(cf)
        return buffered

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
        """The offset a fetch can read up to: the high watermark, or under read_committed the
        Last Stable Offset (when the broker reported one)."""
        if self._isolation_level and last_stable_offset >= 0:
            return last_stable_offset
        return high_watermark

    def send_fetches(self, pipelined: bool = False) -> int:
        """Send a FetchRequest to every leader of fetchable partitions that has none pending.
        Returns the number of requests sent.

        ``pipelined`` (records are being returned to the caller): skip partitions already at
        their last known high watermark, whose fetch would only wait ``fetch.max.wait.ms`` on
        the broker and hold the connection (e.g. a bounded reader that is done with the range
        and reassigns the consumer); the caller's next ``poll`` fetches them."""
        cluster = self._metadata.fetch()
        buffered = self._buffered_fetches()
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
            future.add_callback(functools.partial(self._on_fetch_response, node=node, data=data))
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

    def _on_fetch_response(self, future: RequestFuture, node: int, data: FetchRequestData) -> None:
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
        for topic_response in response.responses:
            topic = str(topic_response.topic)
            for pd in topic_response.partitions:
                tp = TopicPartition(topic, int(pd.partition_index))
                asked = asked_by_tp.get(tp)
                if asked is None:
                    continue
                aborted = None
                if self._isolation_level:
                    aborted = AbortedTransactions(
                        (int(a.producer_id), int(a.first_offset)) for a in pd.aborted_transactions or ()
                    )
                self._completed.append(
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

    # -------------------------------------------------------------- collecting

    def collect_fetch(self, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` (default ``max.poll.records``) buffered records, in offset order
        per partition; advances positions.

        Raises:
            OffsetOutOfRangeError: out of range with ``auto.offset.reset=none`` (``.partitions``
                maps the partition to its position).
            KafkaError: another non-retriable partition error, or a corrupt batch.
        """
        out: dict[TopicPartition, list[ConsumerRecord]] = {}

        def take(cf: CompletedFetch, remaining: int) -> int:
            records = self._fetch_records(cf, remaining)
            if records:
                existing = out.get(cf.tp)
                if existing is None:
                    out[cf.tp] = records
                else:
                    existing.extend(records)
            return len(records)

        self._collect(max_records, take)
        return out

    def _finish_completed_fetch(self, cf: CompletedFetch, topic: str, partition: int, position: int) -> None:
        """Mark ``cf`` consumed at its end. Raises MessageTooLargeError when it held no complete
        batch below the high watermark: the next batch is larger than max.partition.fetch.bytes
        (Kafka's Fetcher/CompletedFetch RecordTooLargeException rule)."""
        cf.consumed = True
        if not cf.saw_batch and position < self._fetch_limit(cf.high_watermark, cf.last_stable_offset):
            raise MessageTooLargeError(
                f"fetch for {topic}-{partition} at offset {position} returned no complete record "
                f"batch; a batch may be larger than max.partition.fetch.bytes={self._max_partition_bytes}"
            )

    def collect_columns(
        self, max_records: int | None = None, include_headers: bool = False
    ) -> dict[TopicPartition, dict[str, Any]]:
        """Like :meth:`collect_fetch`, but each partition's records come as Arrow arrays decoded
        straight from the RecordBatch bytes (``key``, ``value``, ``offset``, ``timestamp``,
        ``timestampType``, ``headers``; see :mod:`spark_kafkalite.protocol.record_columns`),
        without a Python object per record. Same errors."""
        from spark_kafkalite.protocol.record_columns import new_builder, to_arrow_arrays

        builders: dict[TopicPartition, Any] = {}

        def take(cf: CompletedFetch, remaining: int) -> int:
            builder = builders.get(cf.tp)
            if builder is None:
                builder = builders[cf.tp] = new_builder(include_headers)
            return self._fetch_columns(cf, remaining, builder)

        self._collect(max_records, take)
        return {tp: to_arrow_arrays(b.finish()) for tp, b in builders.items() if len(b)}

    def _collect(self, max_records: int | None, take: Any) -> None:
        remaining = self.max_poll_records if max_records is None else max_records
        got = 0
        while remaining > 0:
            cf = self._next_in_line
            if cf is None or cf.consumed:
                if not self._completed:
                    break
                cf = self._completed[0]
                try:
                    usable = self._initialize(cf)
                except KafkaError:
                    if got:  # hand out what we have; raise on the next call
                        break
                    self._completed.popleft()
                    raise
                self._completed.popleft()
                if not usable:
                    continue
                self._next_in_line = cf
            try:
                n = take(cf, remaining)
            except KafkaError:
                if got:  # hand out what we have; the failing batch raises again on the next call
                    break
                raise
            got += n
            remaining -= n

    def _initialize(self, cf: CompletedFetch) -> bool:
        tp = cf.tp
        subs = self._subscriptions
        if not subs.is_assigned(tp):
            return False
        state = subs.state(tp)
        if (
            state.position is None
            or state.reset_strategy is not None
            or state.awaiting_validation
            or state.position != cf.fetch_offset
        ):
            log.debug(
                "discarding stale fetch response for %s at offset %s (position %s)",
                tp,
                cf.fetch_offset,
                state.position,
            )
            return False
        code = cf.error_code
        if code == ErrorCode.none:
            subs.update_fetch_metadata(tp, cf.high_watermark, cf.log_start_offset, cf.last_stable_offset)
            if cf.preferred_read_replica >= 0:  # KIP-392: read from there from now on
                log.debug("reading %s from its preferred read replica %s", tp, cf.preferred_read_replica)
                subs.update_preferred_read_replica(
                    tp, cf.preferred_read_replica, now_ms() + self._preferred_replica_ttl_ms
                )
            if not cf.records:
                return False
            cf.headers_iter = iter_batch_headers(cf.records)
            return True
        if needs_metadata_refresh(code):
            log.debug("fetch for %s: %s; refreshing metadata", tp, error_for_code(code))
            subs.clear_preferred_read_replica(tp)
            self._metadata.request_update()
            return False
        if code in _RETRY_ERRORS:
            log.warning(
                "fetch for %s at offset %s: %s; will retry", tp, cf.fetch_offset, error_for_code(code)
            )
            return False
        if code == ErrorCode.offset_out_of_range:
            cleared = subs.clear_preferred_read_replica(tp)
            if cleared is not None:  # a follower that is behind: ask the leader (Java FetchCollector)
                log.debug(
                    "fetch of %s at %s from replica %s is out of range there; back to the leader",
                    tp,
                    cf.fetch_offset,
                    cleared,
                )
                return False
            if subs.default_reset_strategy is OffsetResetStrategy.NONE:
                raise OffsetOutOfRangeError(
                    f"fetch position {cf.fetch_offset} is out of range for partition {tp.topic}-{tp.partition}",
                    partitions={tp: cf.fetch_offset},
                )
            log.info(
                "fetch position %s is out of range for %s-%s; resetting offset (%s)",
                cf.fetch_offset,
                tp.topic,
                tp.partition,
                subs.default_reset_strategy.name.lower(),
            )
            subs.request_offset_reset(tp)
            return False
        raise error_for_code(code, f"fetch for {tp.topic}-{tp.partition} at offset {cf.fetch_offset}")

    def _fetch_records(self, cf: CompletedFetch, max_records: int) -> list[ConsumerRecord]:
        tp = cf.tp
        subs = self._subscriptions
        if not subs.is_assigned(tp):
            cf.consumed = True
            return []
        state = subs.state(tp)
        if (
            state.position != cf.next_fetch_offset
            or state.reset_strategy is not None
            or state.paused
            or state.awaiting_validation
        ):
            cf.consumed = True  # sought, reset or paused since: drop the rest
            return []
        out: list[ConsumerRecord] = []
        position = cf.next_fetch_offset
        offset_epoch = state.offset_epoch
        topic, partition = tp
        records = cf.records
        if records is None or cf.headers_iter is None:  # set when the fetch was initialized
            raise RuntimeError(f"completed fetch of {tp.topic}-{tp.partition} read before it was initialized")
        while len(out) < max_records:
            batch = cf.batch
            if batch is None:
                item = cf.failed_header or cf.pending_item or next(cf.headers_iter, None)
                cf.failed_header = cf.pending_item = None
                if item is None:
                    self._finish_completed_fetch(cf, topic, partition, position)
                    break
                pos, header = item
                cf.saw_batch = True
                aborted = cf.aborted_transactions
                try:
                    if aborted is not None and aborted.is_aborted(records, pos, header):
                        position = max(position, header.next_offset)
                        continue
                    if header.next_offset <= position:
                        continue
                    if header.is_control:
                        position = header.next_offset
                        continue
                    batch = decode_batch(records, pos, verify_crc=self._check_crcs)
                except KafkaError:
                    # Like Java's Fetcher: keep the records decoded so far and the position after
                    # them; the failing batch stays next, so the next poll raises at its offset.
                    cf.failed_header = item
                    cf.next_fetch_offset = position
                    state.position = position
                    state.offset_epoch = offset_epoch
                    if out:
                        return out
                    raise
                offsets = batch.offsets
                cf.index = bisect_left(offsets, position) if offsets and offsets[0] < position else 0
                cf.batch = batch
                cf.batch_item = item
            offsets = batch.offsets
            start = cf.index
            end = min(len(offsets), start + max_records - len(out))
            if end > start:
                ttype = batch.header.timestamp_type
                if start == 0 and end == len(offsets):
                    cols = (offsets, batch.timestamps_ms, batch.keys, batch.values, batch.headers)
                else:
                    cols = (
                        offsets[start:end],
                        batch.timestamps_ms[start:end],
                        batch.keys[start:end],
                        batch.values[start:end],
                        batch.headers[start:end],
                    )
                out.extend(
                    map(
                        _new_tuple,
                        repeat(ConsumerRecord),
                        zip(
                            repeat(topic),
                            repeat(partition),
                            cols[0],
                            cols[1],
                            repeat(ttype),
                            cols[2],
                            cols[3],
                            cols[4],
                        ),
                    )
                )
                position = offsets[end - 1] + 1
                epoch = batch.header.partition_leader_epoch
                offset_epoch = epoch if epoch >= 0 else None
            cf.index = end
            if end >= len(offsets):
                position = max(position, batch.header.next_offset)
                cf.batch = None
        cf.next_fetch_offset = position
        state.position = position
        state.offset_epoch = offset_epoch
        return out

    def _fetch_columns(self, cf: CompletedFetch, max_records: int, builder: Any) -> int:
        """Append up to ``max_records`` records of ``cf`` from the position to ``builder``, one
        batch at a time (per batch, never per record); same position, control-batch and
        corrupt-batch rules as :meth:`_fetch_records`. Returns the number appended."""
        from spark_kafkalite.protocol.record_columns import append_batch

        tp = cf.tp
        subs = self._subscriptions
        if not subs.is_assigned(tp):
            cf.consumed = True
            return 0
        state = subs.state(tp)
        if (
            state.position != cf.next_fetch_offset
            or state.reset_strategy is not None
            or state.paused
            or state.awaiting_validation
        ):
            cf.consumed = True
            return 0
        position = cf.next_fetch_offset
        offset_epoch = state.offset_epoch
        records = cf.records
        if records is None or cf.headers_iter is None:  # set when the fetch was initialized
            raise RuntimeError(f"completed fetch of {tp.topic}-{tp.partition} read before it was initialized")
        appended = 0
        while appended < max_records:
            if cf.batch is not None:  # left part-way by collect_fetch: decode it again from the position
                item = cf.batch_item
                cf.batch = None
            else:
                item = cf.failed_header or cf.pending_item or next(cf.headers_iter, None)
                cf.failed_header = cf.pending_item = None
            if item is None:
                self._finish_completed_fetch(cf, tp.topic, tp.partition, position)
                break
            pos, header = item
            cf.saw_batch = True
            want = max_records - appended
            aborted = cf.aborted_transactions
            try:
                if aborted is not None and aborted.is_aborted(records, pos, header):
                    position = max(position, header.next_offset)
                    continue
                if header.next_offset <= position:
                    continue
                if header.is_control:
                    position = header.next_offset
                    continue
                n = append_batch(
                    builder,
                    records,
                    pos,
                    header,
                    verify_crc=self._check_crcs,
                    min_offset=position,
                    max_records=want,
                )
            except KafkaError:
                cf.failed_header = item
                cf.next_fetch_offset = position
                state.position = position
                state.offset_epoch = offset_epoch
                if appended:
                    return appended
                raise
            if n:
                appended += n
                position = builder.last_offset + 1
                epoch = header.partition_leader_epoch
                offset_epoch = epoch if epoch >= 0 else None
            if n == want and builder.last_offset < header.last_offset:
                cf.pending_item = item  # records of this batch are left for the next call
            else:
                position = max(position, header.next_offset)
        cf.next_fetch_offset = position
        state.position = position
        state.offset_epoch = offset_epoch
        return appended

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
        if tps is None:
            self._completed.clear()
            self._next_in_line = None
            return
        self._completed = deque(cf for cf in self._completed if cf.tp not in tps)
        if self._next_in_line is not None and self._next_in_line.tp in tps:
            self._next_in_line = None
