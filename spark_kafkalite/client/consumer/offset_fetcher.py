"""``OffsetFetcher``: ListOffsets lookups grouped by partition leader (Java ``OffsetFetcher``).

Two uses: blocking lookups (``list_offsets``: beginning/end offsets, offsets for times, the
admin client's ``list_offsets``) that retry retriable errors with metadata refreshes until the
timeout, and asynchronous position resets for the consumer (``reset_positions_if_needed``),
driven by the consumer's ``poll``. ``-2`` asks for the earliest offset (log start), ``-1`` for
the latest (the high watermark for read_uncommitted), other values for the first offset whose
timestamp is at least that many ms since the epoch (ListOffsets v1+, KIP-79).

Position validation (KIP-320, Java ``OffsetFetcher.validatePositionsIfNeeded``): when metadata
shows a new leader epoch for a partition whose position knows the epoch of its last record, the
consumer asks the new leader (OffsetForLeaderEpoch) where that epoch ends. An end offset below
the position means the log was truncated (an unclean leader change): the position moves back to
that end offset when ``auto.offset.reset`` is earliest/latest, or ``LogTruncationError`` is
raised with ``none``. An undefined answer (epoch unknown to the leader) resets the position per
``auto.offset.reset`` (or raises with ``none``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

from spark_kafkalite.client.config import isolation_level_id
from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from spark_kafkalite.client.errors import (
    IllegalStateError,
    NoOffsetForPartitionError,
    is_authentication_error,
)
from spark_kafkalite.client.metadata import Cluster, Metadata
from spark_kafkalite.client.network_client import NetworkClient, now_ms
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import (
    METADATA_REFRESH_ERRORS,
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_for_code,
)

__all__ = [
    "OffsetFetcher",
    "ListOffsetsResult",
    "list_offsets_request",
    "offset_for_leader_epoch_request",
    "LogTruncationError",
]

log = logging.getLogger(__name__)

#: (offset, timestamp_ms) per partition; ``None`` when no record matches a timestamp query.
ListOffsetsResult = dict[TopicPartition, "tuple[int, int] | None"]

#: ListOffsets errors retried after a metadata refresh (Kafka's ``OffsetFetcherUtils
#: .handleListOffsetResponse`` retry list is a subset of the refresh family), plus a timeout.
_RETRIABLE = METADATA_REFRESH_ERRORS | {ErrorCode.request_timed_out}


class LogTruncationError(OffsetOutOfRangeError):  # type: ignore[valid-type, misc]
    """The leader's log was truncated below the consumer's position and ``auto.offset.reset`` is
    ``none`` (Java ``LogTruncationException``, KIP-320).

    Attributes:
        partitions: ``{tp: position}`` that failed validation.
        divergent_offsets: ``{tp: end offset of the last common epoch}``; None when the leader
            does not know the epoch at all.
    """

    def __init__(
        self,
        message: str,
        partitions: dict[TopicPartition, int],
        divergent_offsets: dict[TopicPartition, int | None],
    ) -> None:
        super().__init__(message)
        self.partitions = partitions
        self.divergent_offsets = divergent_offsets


def offset_for_leader_epoch_request(requests: Mapping[TopicPartition, tuple[int, int]]) -> RequestBuilder:
    """OffsetForLeaderEpoch for ``{tp: (current_leader_epoch, leader_epoch)}`` (replica_id -1)."""
    by_topic: dict[str, list[tuple[int, int, int]]] = {}
    for tp, (current, epoch) in requests.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, current, epoch))

    def build(version: int) -> Any:
        cls = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
        topic_cls = nested(cls, "OffsetForLeaderTopic")
        part_cls = nested(cls, "OffsetForLeaderPartition")
        topics = tuple(
            topic_cls(
                topic=topic,
                partitions=tuple(
                    part_cls(partition=p, current_leader_epoch=current, leader_epoch=epoch)
                    for p, current, epoch in parts
                ),
            )
            for topic, parts in by_topic.items()
        )
        return make(cls, replica_id=-1, topics=topics)

    return RequestBuilder(ApiKey.OFFSET_FOR_LEADER_EPOCH, build)


def list_offsets_request(
    timestamps: Mapping[TopicPartition, int],
    isolation_level: int,
    leader_epochs: Mapping[TopicPartition, int],
) -> RequestBuilder:
    """A ListOffsetsRequest builder (replica_id -1, one entry per partition)."""
    by_topic: dict[str, list[tuple[int, int, int]]] = {}
    for tp, ts in timestamps.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, int(ts), leader_epochs.get(tp, -1)))

    def build(version: int) -> Any:
        cls = request_class(ApiKey.LIST_OFFSETS, version)
        topic_cls = nested(cls, "ListOffsetsTopic")
        part_cls = nested(cls, "ListOffsetsPartition")
        topics = tuple(
            topic_cls(
                name=topic,
                partitions=tuple(
                    make(
                        part_cls,
                        partition_index=p,
                        current_leader_epoch=epoch,
                        timestamp=ts,
                        max_num_offsets=1,
                    )
                    for p, ts, epoch in parts
                ),
            )
            for topic, parts in by_topic.items()
        )
        return make(cls, replica_id=-1, isolation_level=isolation_level, topics=topics)

    return RequestBuilder(ApiKey.LIST_OFFSETS, build)


class OffsetFetcher:
    """See module docstring. Runs on the thread that owns ``client``."""

    def __init__(
        self,
        client: NetworkClient,
        metadata: Metadata,
        subscriptions: SubscriptionState | None,
        config: Mapping[str, Any],
    ) -> None:
        self._client = client
        self._metadata = metadata
        self._subscriptions = subscriptions
        self._retry_backoff_ms = float(config.get("retry.backoff.ms", 100))
        self._request_timeout_ms = float(config.get("request.timeout.ms", 30000))
        self._isolation_level = isolation_level_id(config.get("isolation.level", "read_uncommitted"))
        self._cached_validation_error: KafkaError | None = None

    def _positions(self) -> SubscriptionState:
        """The consumer's positions this fetcher resets and validates.

        Raises:
            IllegalStateError: the fetcher was built without ``subscriptions`` (offset lookups only).
        """
        if self._subscriptions is None:
            raise IllegalStateError("this OffsetFetcher manages no positions: it has no subscriptions")
        return self._subscriptions

    # -------------------------------------------------------------- blocking lookups

    def list_offsets(self, timestamps: Mapping[TopicPartition, int], timeout_ms: float) -> ListOffsetsResult:
        """Look up offsets for ``{tp: timestamp}`` (``-2`` earliest, ``-1`` latest).

        Raises:
            UnknownTopicOrPartitionError: fresh metadata says the topic or partition does not exist.
            KafkaTimeoutError: not all answers within ``timeout_ms``.
            KafkaError: a non-retriable error from the broker.
        """
        remaining = {TopicPartition(tp[0], int(tp[1])): int(ts) for tp, ts in timestamps.items()}
        result: ListOffsetsResult = {}
        if not remaining:
            return result
        deadline = now_ms() + timeout_ms
        self._metadata.add_topics(*{tp.topic for tp in remaining})
        fresh_version = self._metadata.version
        last_error: KafkaError | None = None
        while remaining:
            cluster = self._metadata.fetch()
            metadata_fresh = self._metadata.version > fresh_version
            by_node: dict[int, dict[TopicPartition, int]] = {}
            need_metadata = False
            retry = False  # an error, not just a topic missing from the cache: back off first
            for tp, ts in remaining.items():
                leader = cluster.leader_for(tp)
                if leader is None:
                    if metadata_fresh:
                        self._raise_if_unknown(cluster, tp)
                    need_metadata = True
                    if tp.topic in cluster.partitions or tp.topic in cluster.topic_errors:
                        retry = True  # known topic without a leader (election), not a cache miss
                else:
                    by_node.setdefault(leader, {})[tp] = ts
            futures = {
                node: self._client.send(node, self._request(tps, cluster)) for node, tps in by_node.items()
            }
            while any(not f.is_done() for f in futures.values()):
                left = deadline - now_ms()
                if left <= 0:
                    break
                self._client.poll(left)
            for node, future in futures.items():
                if not future.is_done():
                    continue
                if future.failed():
                    if is_authentication_error(future.exception):
                        raise future.exception  # type: ignore[misc]
                    last_error = future.exception if isinstance(future.exception, KafkaError) else None
                    need_metadata = retry = True
                    continue
                errors = self._handle_response(future.value, by_node[node], result)
                for tp in by_node[node]:
                    if tp in result:
                        remaining.pop(tp, None)
                for tp, code in errors.items():
                    if code in _RETRIABLE:
                        need_metadata = retry = True
                        last_error = error_for_code(code, f"{tp.topic}-{tp.partition}")
                    else:
                        raise error_for_code(code, f"ListOffsets for {tp.topic}-{tp.partition}")
            if not remaining:
                break
            if now_ms() >= deadline:
                raise KafkaTimeoutError(
                    f"failed to get offsets for {sorted(remaining)} within {timeout_ms:.0f} ms"
                    + (f" (last error: {last_error})" if last_error else "")
                )
            if need_metadata:
                fresh_version = self._metadata.request_update()
                self._await_metadata(fresh_version, deadline, backoff=retry)
        return result

    def _raise_if_unknown(self, cluster: Cluster, tp: TopicPartition) -> None:
        code = cluster.topic_errors.get(tp.topic)
        if code == ErrorCode.unknown_topic_or_partition:
            raise UnknownTopicOrPartitionError(f"topic {tp.topic} does not exist")
        parts = cluster.partitions.get(tp.topic)
        if parts is not None and code is None and tp.partition not in parts:
            raise UnknownTopicOrPartitionError(
                f"partition {tp.partition} of topic {tp.topic} does not exist ({len(parts)} partitions)"
            )

    def _await_metadata(self, version: int, deadline: float, backoff: bool = True) -> None:
        """Poll until metadata newer than ``version`` arrived and (``backoff``: after an error)
        ``retry.backoff.ms`` passed. A first look-up of a topic not yet in the cache is no
        retry and does not wait (Java's ``OffsetFetcher`` only backs off after a failure)."""
        backoff_end = now_ms() + (self._retry_backoff_ms if backoff else 0.0)
        while True:
            now = now_ms()
            if now >= deadline:
                return
            self._metadata.maybe_throw_fatal_error()
            if self._metadata.version > version:
                if now >= backoff_end:
                    return
                self._client.poll(min(backoff_end, deadline) - now)
            else:
                self._client.poll(deadline - now)

    def _request(self, tps: Mapping[TopicPartition, int], cluster: Cluster) -> RequestBuilder:
        epochs = {}
        for tp in tps:
            pm = cluster.partition(tp)
            if pm is not None:
                epochs[tp] = pm.leader_epoch
        min_version = 1 if any(ts >= 0 for ts in tps.values()) else None
        builder = list_offsets_request(tps, self._isolation_level, epochs)
        return RequestBuilder(builder.api_key, builder.build, min_version=min_version)

    @staticmethod
    def _handle_response(
        response: Any, asked: Mapping[TopicPartition, int], result: ListOffsetsResult
    ) -> dict[TopicPartition, int]:
        errors: dict[TopicPartition, int] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.name), int(p.partition_index))
                if tp not in asked:
                    continue
                code = int(p.error_code)
                if code == ErrorCode.none:
                    offset = int(p.offset)
                    if offset < 0 and asked[tp] >= 0:
                        result[tp] = None  # no record at or after that timestamp
                    else:
                        result[tp] = (offset, int(p.timestamp))
                elif code == ErrorCode.unsupported_for_message_format:
                    result[tp] = None
                else:
                    errors[tp] = code
        for tp in asked:
            if tp not in result and tp not in errors:
                errors[tp] = int(ErrorCode.unknown_topic_or_partition)
        return errors

    # -------------------------------------------------------------- async resets

    def reset_positions_if_needed(self) -> None:
        """Start ListOffsets for assigned partitions that need a position (non-blocking).

        Raises:
            NoOffsetForPartitionError: a partition has no position and the reset strategy is none.
        """
        subs = self._positions()
        missing = subs.partitions_missing_position()
        if missing:
            if subs.default_reset_strategy is OffsetResetStrategy.NONE:
                raise NoOffsetForPartitionError(missing)
            for tp in missing:
                subs.request_offset_reset(tp)
        now = now_ms()
        tps = subs.partitions_needing_reset(now)
        if not tps:
            return
        cluster = self._metadata.fetch()
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp in tps:
            leader = cluster.leader_for(tp)
            if leader is None or self._client.is_unavailable(leader):
                self._metadata.add_topics(tp.topic)
                self._metadata.request_update()
                subs.reset_failed(tp, now + self._retry_backoff_ms)
                continue
            strategy = subs.state(tp).reset_strategy
            if strategy is None:  # partitions_missing_position() lists partitions awaiting a reset
                raise RuntimeError(f"{tp.topic}-{tp.partition} awaits a reset without a strategy")
            by_node.setdefault(leader, {})[tp] = int(strategy)
        for node, asked in by_node.items():
            subs.set_reset_pending(asked, now + self._request_timeout_ms)
            future = self._client.send(node, self._request(asked, cluster))
            future.add_callback(functools.partial(self._on_reset_response, asked=asked))

    def _on_reset_response(self, future: RequestFuture, asked: Mapping[TopicPartition, int]) -> None:
        subs = self._positions()
        retry_at = now_ms() + self._retry_backoff_ms
        if future.failed():
            log.debug("offset reset request failed: %s", future.exception)
            self._metadata.request_update()
            for tp in asked:
                subs.reset_failed(tp, retry_at)
            return
        result: ListOffsetsResult = {}
        errors = self._handle_response(future.value, asked, result)
        for tp, found in result.items():
            if found is not None:
                strategy = OffsetResetStrategy(asked[tp])
                if subs.maybe_complete_reset(tp, strategy, found[0]):
                    log.info(
                        "reset offset of %s-%s to %s (%s)",
                        tp.topic,
                        tp.partition,
                        found[0],
                        strategy.name.lower(),
                    )
        for tp, code in errors.items():
            log.debug("offset reset for %s failed: %s", tp, error_for_code(code))
            if code in _RETRIABLE:
                self._metadata.request_update()
            subs.reset_failed(tp, retry_at)

    # -------------------------------------------------------------- position validation (KIP-320)

    def validate_positions_if_needed(self) -> None:
        """Start OffsetForLeaderEpoch requests for partitions whose leader epoch changed since
        their position was validated (non-blocking; see module docstring).

        Raises:
            LogTruncationError: a previous validation found truncation and the reset policy is none.
            KafkaError: e.g. TOPIC_AUTHORIZATION_FAILED from a previous validation.
        """
        error = self._cached_validation_error
        if error is not None:
            self._cached_validation_error = None
            raise error
        subs = self._positions()
        cluster = self._metadata.fetch()
        for tp in subs.assigned_partitions():
            pm = cluster.partition(tp)
            if pm is not None and pm.leader >= 0:
                subs.maybe_validate_position_for_current_leader(tp, pm.leader_epoch)
        now = now_ms()
        tps = subs.partitions_needing_validation(now)
        if not tps:
            return
        by_node: dict[int, dict[TopicPartition, tuple[int, int, int]]] = {}
        for tp in tps:
            pm = cluster.partition(tp)
            state = subs.state(tp)
            if pm is None or pm.leader < 0 or self._client.is_unavailable(pm.leader):
                self._metadata.request_update()
                subs.validation_failed(tp, now + self._retry_backoff_ms)
                continue
            if state.position is None or state.offset_epoch is None:  # listed as awaiting validation
                raise RuntimeError(
                    f"{tp.topic}-{tp.partition} awaits validation without a position and epoch"
                )
            by_node.setdefault(pm.leader, {})[tp] = (pm.leader_epoch, state.offset_epoch, state.position)
        for node, asked in by_node.items():
            subs.set_validation_pending(asked, now + self._request_timeout_ms)
            request = offset_for_leader_epoch_request(
                {tp: (cur, epoch) for tp, (cur, epoch, _) in asked.items()}
            )
            future = self._client.send(node, request)
            future.add_callback(functools.partial(self._on_validation_response, asked=asked))

    def _on_validation_response(
        self, future: RequestFuture, asked: Mapping[TopicPartition, tuple[int, int, int]]
    ) -> None:
        subs = self._positions()
        retry_at = now_ms() + self._retry_backoff_ms
        if future.failed():
            exc = future.exception
            if isinstance(exc, UnsupportedVersionError):
                # Brokers without OffsetForLeaderEpoch v2+: no validation (as Java does).
                for tp, (_cur, epoch, position) in asked.items():
                    subs.complete_validation(tp, position, epoch)
                return
            log.debug("position validation request failed: %s", exc)
            self._metadata.request_update()
            for tp in asked:
                subs.validation_failed(tp, retry_at)
            return
        answered: set[TopicPartition] = set()
        truncated: dict[TopicPartition, int] = {}
        divergent: dict[TopicPartition, int | None] = {}
        for topic in future.value.topics:
            for p in topic.partitions:
                tp = TopicPartition(str(topic.topic), int(p.partition))
                if tp not in asked:
                    continue
                answered.add(tp)
                _cur, epoch, position = asked[tp]
                code = int(p.error_code)
                if code != ErrorCode.none:
                    if code == ErrorCode.topic_authorization_failed:
                        self._cached_validation_error = error_for_code(code, f"topic {tp.topic}")
                    else:
                        log.debug("validating the position of %s: %s; retrying", tp, error_for_code(code))
                        self._metadata.request_update()
                    subs.validation_failed(tp, retry_at)
                    continue
                state = subs.state(tp) if subs.is_assigned(tp) else None
                if state is None or not state.awaiting_validation or state.position != position:
                    continue  # reassigned, sought or reset meanwhile
                end_epoch, end_offset = int(p.leader_epoch), int(p.end_offset)
                if end_offset < 0 or end_epoch < 0:
                    log.info(
                        "the leader of %s-%s does not know epoch %s of position %s",
                        tp.topic,
                        tp.partition,
                        epoch,
                        position,
                    )
                    if subs.default_reset_strategy is OffsetResetStrategy.NONE:
                        truncated[tp], divergent[tp] = position, None
                    else:
                        subs.request_offset_reset(tp)
                elif end_offset < position:
                    if subs.default_reset_strategy is OffsetResetStrategy.NONE:
                        truncated[tp], divergent[tp] = position, end_offset
                        log.warning(
                            "truncation detected for %s-%s at offset %s (epoch %s ends at %s) and "
                            "auto.offset.reset is none",
                            tp.topic,
                            tp.partition,
                            position,
                            epoch,
                            end_offset,
                        )
                    else:
                        log.info(
                            "truncation detected for %s-%s at offset %s; resetting to %s, the end of "
                            "epoch %s on the leader",
                            tp.topic,
                            tp.partition,
                            position,
                            end_offset,
                            end_epoch,
                        )
                        subs.seek(tp, end_offset)
                        state.offset_epoch = end_epoch
                else:
                    subs.complete_validation(tp, position, epoch)
        for tp in asked:
            if tp not in answered:
                subs.validation_failed(tp, retry_at)
        if truncated:
            for tp in truncated:
                subs.validation_failed(tp, retry_at)
            self._cached_validation_error = LogTruncationError(
                f"truncation detected for partitions {sorted(truncated)} with no reset policy "
                f"(divergent offsets {divergent})",
                truncated,
                divergent,
            )
