"""Driver-side discovery of topic-partitions and offsets (Spark's ``KafkaOffsetReaderAdmin``).

Used by the batch reader's ``partitions()`` and by the stream reader's ``initialOffset`` /
``latestOffset`` / ``partitions``. One consumer (never subscribed, never in a group) answers
Metadata and ListOffsets; it is created lazily so that pickled readers carry no sockets.
Retriable client errors are retried ``fetchOffset.numRetries`` times,
``fetchOffset.retryIntervalMs`` apart, with a fresh consumer each time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.client_protocols import SourceConsumer
from spark_kafkalite.datasource.errors import OffsetsMismatchError, TopicNotFoundError
from spark_kafkalite.datasource.offsets import EARLIEST, LATEST, PartitionOffsetMap, format_partitions
from spark_kafkalite.datasource.options import (
    AssignStrategy,
    OffsetRangeLimit,
    Strategy,
    SubscribePatternStrategy,
    SubscribeStrategy,
)
from spark_kafkalite.protocol.errors import KafkaError, UnknownTopicOrPartitionError
from spark_kafkalite.protocol.internal_topics import INTERNAL_TOPICS

__all__ = ["KafkaOffsetReader"]

log = logging.getLogger(__name__)

"""Topics a pattern subscription never matches (Kafka's ``exclude.internal.topics=true``)."""

T = TypeVar("T")


class KafkaOffsetReader:
    """Resolves the partitions of a subscription strategy and their earliest / latest offsets.

    Args:
        strategy: subscribe / subscribePattern / assign.
        client_config: ``kafka.*`` options without the prefix (must hold ``bootstrap.servers``).
        num_retries: extra attempts after a retriable ``KafkaError``.
        retry_interval_ms: sleep between attempts.
    """

    def __init__(
        self,
        strategy: Strategy,
        client_config: Mapping[str, str],
        *,
        num_retries: int = 3,
        retry_interval_ms: int = 1000,
    ) -> None:
        self.strategy = strategy
        self.client_config = dict(client_config)
        self.num_retries = num_retries
        self.retry_interval_ms = retry_interval_ms
        self._consumer: SourceConsumer | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def _get_consumer(self) -> SourceConsumer:
        if self._consumer is None:
            from spark_kafkalite.client import KafkaConsumer

            config: dict[str, Any] = dict(self.client_config)
            config.setdefault("client.id", "kafkalite-spark-driver")
            config["auto.offset.reset"] = "earliest"
            config["enable.auto.commit"] = "false"  # Spark's kafkaParamsForDriver
            config.pop("group.id", None)  # never a group member (see group_commit)
            self._consumer = KafkaConsumer(config)
        return self._consumer

    def close(self) -> None:
        """Close the consumer (safe to call twice)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                consumer.close()
            except Exception:  # noqa: BLE001 - closing must not mask the real error
                log.debug("error closing driver consumer", exc_info=True)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_consumer"] = None
        return state

    def _with_retries(self, body: Callable[[SourceConsumer], T]) -> T:
        attempt = 0
        while True:
            try:
                return body(self._get_consumer())
            except KafkaError as exc:
                attempt += 1
                # A missing topic/partition is an answer (the client already refreshed metadata).
                if (
                    not exc.retriable
                    or isinstance(exc, UnknownTopicOrPartitionError)
                    or attempt > self.num_retries
                ):
                    raise
                log.warning("attempt %d getting Kafka offsets failed (%s); retrying", attempt, exc)
                self.close()
                time.sleep(self.retry_interval_ms / 1000.0)

    # -- partitions --------------------------------------------------------------------------
    def topic_partitions(self, *, missing_ok: bool = False) -> set[TopicPartition]:
        """Partitions the strategy reads now.

        Args:
            missing_ok: leave out missing topics / partitions instead of raising (a running
                stream reports them as data loss when it plans the next batch).

        Raises:
            TopicNotFoundError: a ``subscribe`` topic, or an ``assign`` topic or partition, does not
                exist (a ``subscribePattern`` matching nothing yields an empty set).
        """
        return self._with_retries(lambda consumer: self._topic_partitions(consumer, missing_ok))

    def _bootstrap(self) -> str:
        return self.client_config.get("bootstrap.servers", "?")

    @staticmethod
    def _fresh_partitions(
        consumer: SourceConsumer, all_topics: Mapping[str, set[int]], topic: str
    ) -> set[int] | None:
        """Partitions of ``topic`` from a fresh Metadata answer (the consumer's cache would miss
        partitions added since it was filled); internal topics are only in the cache path."""
        if topic in all_topics:
            return set(all_topics[topic])
        if topic in INTERNAL_TOPICS:
            return consumer.partitions_for_topic(topic)
        return None

    def _topic_partitions(self, consumer: SourceConsumer, missing_ok: bool) -> set[TopicPartition]:
        strategy = self.strategy
        # One Metadata request per call (Spark's KafkaOffsetReaderAdmin describes topics every
        # time): partitions added or topics deleted since the last call are seen at once.
        all_topics: Mapping[str, set[int]] = consumer.list_topics()
        if isinstance(strategy, SubscribeStrategy):
            result: set[TopicPartition] = set()
            for topic in strategy.topics:
                partitions = self._fresh_partitions(consumer, all_topics, topic)
                if not partitions:
                    if missing_ok:
                        continue
                    raise TopicNotFoundError(
                        f"Topic '{topic}' does not exist on kafka.bootstrap.servers={self._bootstrap()} "
                        f"(option 'subscribe'). Create it first, e.g. `kafkalite topics create --topic {topic}`."
                    )
                result.update(TopicPartition(topic, p) for p in partitions)
            return result
        if isinstance(strategy, SubscribePatternStrategy):
            return {
                TopicPartition(topic, p)
                for topic, partitions in all_topics.items()
                if topic not in INTERNAL_TOPICS and strategy.matches(topic)
                for p in partitions
            }
        if not isinstance(strategy, AssignStrategy):
            raise TypeError(f"unknown subscription strategy {type(strategy).__name__}")
        existing: dict[str, set[int] | None] = {}
        present: set[TopicPartition] = set()
        for topic, partition in strategy.partitions:
            if topic not in existing:
                existing[topic] = self._fresh_partitions(consumer, all_topics, topic)
            partitions = existing[topic]
            if missing_ok:
                if partitions and partition in partitions:
                    present.add(TopicPartition(topic, partition))
                continue
            if not partitions:
                raise TopicNotFoundError(
                    f"Topic '{topic}' does not exist on kafka.bootstrap.servers={self._bootstrap()} "
                    "(option 'assign')."
                )
            if partition not in partitions:
                raise TopicNotFoundError(
                    f"Partition {topic}-{partition} does not exist (topic '{topic}' has partitions "
                    f"{sorted(partitions)}; option 'assign')."
                )
        return present if missing_ok else set(strategy.partitions)

    # -- offsets -----------------------------------------------------------------------------
    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> PartitionOffsetMap:
        """Log start offsets of ``partitions`` (missing from the result when a partition is gone)."""
        return self._list_offsets(partitions, lambda c, tps: c.beginning_offsets(tps))

    def _list_offsets(
        self,
        partitions: Iterable[TopicPartition],
        query: Callable[[SourceConsumer, list[TopicPartition]], Mapping[TopicPartition, int]],
    ) -> PartitionOffsetMap:
        """``query`` for all partitions at once; when one is gone (UNKNOWN_TOPIC_OR_PARTITION),
        again one by one, leaving the missing ones out."""
        tps = list(partitions)
        if not tps:
            return {}
        try:
            return dict(self._with_retries(lambda c: query(c, tps)))
        except UnknownTopicOrPartitionError:
            result: PartitionOffsetMap = {}
            for tp in tps:
                try:
                    result.update(self._with_retries(lambda c, one=tp: query(c, [one])))  # type: ignore[misc]
                except UnknownTopicOrPartitionError:
                    log.info("partition %s-%d is gone", tp.topic, tp.partition)
            return result

    def latest_offsets(
        self, partitions: Iterable[TopicPartition], known: Mapping[TopicPartition, int] | None = None
    ) -> PartitionOffsetMap:
        """High watermarks of ``partitions``.

        When ``known`` offsets are given and a fetched one is smaller (a stale answer, KAFKA-7703),
        fetch again up to ``num_retries`` times, as Spark does.
        """
        tps = list(partitions)
        if not tps:
            return {}
        attempt = 0
        while True:
            latest = self._list_offsets(tps, lambda c, some: c.end_offsets(some))
            if not known:
                return latest
            incorrect = [
                (tp, known[tp], off)
                for tp, off in latest.items()
                if known.get(tp, -1) >= 0 and off < known[tp]
            ]
            attempt += 1
            if not incorrect or attempt > self.num_retries:
                if incorrect:
                    log.warning("latest offsets went backwards (partition, previous, fetched): %s", incorrect)
                return latest
            log.warning("found incorrect latest offsets %s; retrying", incorrect)
            time.sleep(self.retry_interval_ms / 1000.0)

    def offsets_for_timestamps(
        self, timestamps: Mapping[TopicPartition, int], *, is_starting: bool, no_match_latest: bool
    ) -> PartitionOffsetMap:
        """First offset whose timestamp >= the given ms per partition (``offsetsForTimes``).

        No match: for an ending limit, or a starting one with ``no_match_latest``, the latest offset;
        otherwise an error.

        Raises:
            OffsetsMismatchError: no offset matched a starting timestamp (strategy ``error``).
        """
        found = self._with_retries(lambda c: c.offsets_for_times(dict(timestamps)))
        result: PartitionOffsetMap = {}
        unmatched: list[TopicPartition] = []
        for tp, ts in timestamps.items():
            hit = found.get(tp)
            if hit is None:
                if is_starting and not no_match_latest:
                    raise OffsetsMismatchError(
                        f"No offset matched from request of topic-partition {tp.topic}-{tp.partition} and "
                        f"timestamp {ts}. Set option 'startingOffsetsByTimestampStrategy' to 'latest' to "
                        "start from the latest offset instead."
                    )
                unmatched.append(tp)
            else:
                result[tp] = hit.offset
        if unmatched:
            result.update(self.latest_offsets(unmatched))
        return result

    def log_sizes(
        self, partitions: Iterable[TopicPartition]
    ) -> tuple[PartitionOffsetMap, PartitionOffsetMap]:
        """On-disk bytes of ``partitions`` summed over replicas (DescribeLogDirs) and their
        replica counts (Metadata), for the ``maxBytesPerTrigger`` estimate. Empty maps when the
        cluster cannot answer (the byte limit is then not applied; logged)."""
        from spark_kafkalite.client import KafkaAdminClient

        wanted = set(partitions)
        if not wanted:
            return {}, {}
        topics = sorted({tp.topic for tp in wanted})
        try:
            with KafkaAdminClient(dict(self.client_config)) as admin:
                described = admin.describe_topics(topics)
                sizes = admin.describe_log_dirs(topics)
        except (KafkaError, OSError) as exc:
            log.warning("cannot estimate partition sizes for maxBytesPerTrigger: %s", exc)
            return {}, {}
        replicas = {
            TopicPartition(topic, info.partition): len(info.replicas) or 1
            for topic, infos in described.items()
            for info in infos
        }
        return (
            {tp: size for tp, size in sizes.items() if tp in wanted},
            {tp: n for tp, n in replicas.items() if tp in wanted},
        )

    def resolve(
        self,
        limit: OffsetRangeLimit,
        partitions: set[TopicPartition],
        *,
        is_starting: bool,
        keep_latest_markers: bool = False,
    ) -> PartitionOffsetMap:
        """Concrete offsets for ``limit`` over exactly ``partitions``.

        ``-2`` resolves to earliest. ``-1`` resolves to latest unless ``keep_latest_markers`` (the
        stream reader keeps it, see ``stream_reader``).

        Raises:
            OffsetsMismatchError: a specific (or per-partition timestamp) map does not name exactly
                ``partitions`` (Spark's ``KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED``).
        """
        if limit.kind == "earliest":
            return self.earliest_offsets(partitions)
        if limit.kind == "latest":
            if keep_latest_markers:
                return dict.fromkeys(partitions, LATEST)
            return self.latest_offsets(partitions)
        if limit.kind == "global_timestamp":
            if limit.timestamp is None:
                raise ValueError("a global_timestamp offset limit needs its timestamp")
            return self.offsets_for_timestamps(
                dict.fromkeys(partitions, limit.timestamp),
                is_starting=is_starting,
                no_match_latest=limit.no_match_latest,
            )
        if limit.kind == "timestamp":
            if set(limit.timestamps) != partitions:
                position = "start" if is_starting else "end"
                raise OffsetsMismatchError(
                    f"[KAFKA_TIMESTAMP_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka timestamp "
                    f"based {position} offsets don't match what are assigned. Maybe topic partitions are created "
                    "or deleted while the query is running, or you didn't specify all the partitions. "
                    f"Specified: {format_partitions(limit.timestamps)} Assigned: {format_partitions(partitions)}"
                )
            return self.offsets_for_timestamps(
                limit.timestamps, is_starting=is_starting, no_match_latest=limit.no_match_latest
            )
        specified = dict(limit.offsets)
        for tp in partitions:
            if tp.topic in limit.topic_offsets and tp not in specified:
                specified[tp] = limit.topic_offsets[tp.topic]
        if set(specified) != partitions:
            option = "startingOffsets" if is_starting else "endingOffsets"
            raise OffsetsMismatchError(
                "[KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED] Partitions specified for Kafka "
                f"{'start' if is_starting else 'end'} offsets (option '{option}') don't match what are "
                "assigned. Maybe topic partitions are created or deleted while the query is running. "
                f"Use -1 for latest, -2 for earliest. Specified: {format_partitions(specified)} "
                f"Assigned: {format_partitions(partitions)}"
            )
        result = specified
        need_earliest = [tp for tp, off in result.items() if off == EARLIEST]
        need_latest = [tp for tp, off in result.items() if off == LATEST and not keep_latest_markers]
        result.update(self.earliest_offsets(need_earliest))
        result.update(self.latest_offsets(need_latest))
        return result
