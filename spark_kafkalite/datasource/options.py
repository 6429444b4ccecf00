"""Options of the ``kafkalite`` format: the same names, defaults and validation as Spark's
``kafka`` format (``KafkaSourceProvider``), so switching formats is one word.

Spark hands options to Python as a case-insensitive dict of strings; every lookup here is by
lower-cased key. Errors are :class:`KafkaLiteOptionError` (a ``ValueError``; Spark raises
``IllegalArgumentException``) whose message names the offending option, using Spark's wording
where Spark has one.

Pure logic: no I/O, no pyspark import.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.exactly_once import ExactlyOnceOptions, parse_exactly_once
from spark_kafkalite.datasource.offsets import (
    EARLIEST,
    LATEST,
    OffsetJsonError,
    PartitionOffsetMap,
    format_partitions,
    parse_offsets_with_topic_defaults,
    parse_partition_offsets,
    parse_partitions,
)
from spark_kafkalite.datasource.option_checks import (
    SINK_OPTIONS,
    SOURCE_OPTIONS,
    KafkaLiteOptionError,
    check_known,
    parse_bool,
    parse_non_negative,
    parse_positive,
    parse_time_ms,
    validate_kafka_params,
)

__all__ = [
    "KafkaLiteOptionError",
    "SubscribeStrategy",
    "SubscribePatternStrategy",
    "AssignStrategy",
    "Strategy",
    "OffsetRangeLimit",
    "SourceOptions",
    "SinkOptions",
    "parse_source_options",
    "parse_sink_options",
    "client_params",
    "parse_time_ms",
    "DEFAULT_POLL_TIMEOUT_MS",
    "DEFAULT_MAX_TRIGGER_DELAY_MS",
    "SOURCE_OPTIONS",
    "SINK_OPTIONS",
]

log = logging.getLogger(__name__)

DEFAULT_POLL_TIMEOUT_MS = 120_000
"""Spark's default ``kafkaConsumer.pollTimeoutMs`` (``spark.network.timeout`` = 120 s)."""
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
"""Spark's default ``maxTriggerDelay`` (``15m``)."""

_STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")
_STRATEGY_NAMES = "subscribe, subscribepattern, assign"


@dataclass(frozen=True, slots=True)
class SubscribeStrategy:
    """``subscribe``: a fixed list of topics (all their partitions, discovered each batch)."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SubscribePatternStrategy:
    """``subscribePattern``: every non-internal topic whose whole name matches the regex."""

    pattern: str

    def matches(self, topic: str) -> bool:
        return re.fullmatch(self.pattern, topic) is not None


@dataclass(frozen=True, slots=True)
class AssignStrategy:
    """``assign``: a fixed set of topic-partitions."""

    partitions: tuple[TopicPartition, ...]


Strategy = SubscribeStrategy | SubscribePatternStrategy | AssignStrategy


@dataclass(frozen=True, slots=True)
class OffsetRangeLimit:
    """Where a range starts or ends, before resolution against the brokers.

    ``kind``: ``earliest`` / ``latest``; ``specific`` (``offsets`` per partition, -2/-1 allowed,
    plus ``topic_offsets``: -2/-1 for every partition of a topic, SPARK-58774);
    ``timestamp`` (``timestamps`` per partition, ms); ``global_timestamp`` (``timestamp`` ms for
    every partition). ``no_match_latest``: for timestamps with no record at or after them, use the
    latest offset instead of failing (``startingOffsetsByTimestampStrategy=latest``).
    """

    kind: Literal["earliest", "latest", "specific", "timestamp", "global_timestamp"]
    offsets: PartitionOffsetMap = field(default_factory=dict)
    timestamps: PartitionOffsetMap = field(default_factory=dict)
    timestamp: int | None = None
    no_match_latest: bool = False
    topic_offsets: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Validated source options. ``client_config`` holds the ``kafka.*`` options with the prefix
    stripped (string values; the client coerces them)."""

    strategy: Strategy
    client_config: dict[str, str] = field(repr=False)  # may hold secrets (sasl.jaas.config, ...)
    starting: OffsetRangeLimit
    ending: OffsetRangeLimit | None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    max_bytes_per_trigger: int | None = None
    group_id_prefix: str | None = None
    commit_offsets_to_group: bool = False

    @property
    def bootstrap_servers(self) -> str:
        return self.client_config["bootstrap.servers"]

    @property
    def group_id(self) -> str | None:
        """``kafka.group.id`` if set (used only by ``commitOffsetsToGroup``)."""
        return self.client_config.get("group.id")


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Validated sink options: the default ``topic`` (overrides a ``topic`` column, as in Spark),
    the producer's ``kafka.*`` settings, and ``exactly_once`` (None for the default
    ``deliveryGuarantee=at-least-once``; see :mod:`.exactly_once`)."""

    topic: str | None
    client_config: dict[str, str] = field(repr=False)  # may hold secrets (sasl.jaas.config, ...)
    exactly_once: ExactlyOnceOptions | None = None

    @property
    def bootstrap_servers(self) -> str:
        return self.client_config["bootstrap.servers"]


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def client_params(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix stripped (keys lower-cased, as Kafka's are)."""
    return {k[len("kafka.") :]: v for k, v in _lower(options).items() if k.startswith("kafka.")}


def _parse_strategy(params: Mapping[str, str]) -> Strategy:
    specified = [k for k in _STRATEGY_KEYS if k in params]
    if not specified:
        raise KafkaLiteOptionError(
            f"One of the following options must be specified for Kafka source: {_STRATEGY_NAMES}. "
            "See the docs for more details."
        )
    if len(specified) > 1:
        raise KafkaLiteOptionError(
            f"Only one of the following options can be specified for Kafka source: {_STRATEGY_NAMES}. "
            "See the docs for more details."
        )
    key = specified[0]
    value = params[key]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise KafkaLiteOptionError(
                f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
            )
        try:
            return AssignStrategy(tuple(parse_partitions(value)))
        except OffsetJsonError as exc:
            raise KafkaLiteOptionError(f"Invalid value for option 'assign': {exc}") from None
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaLiteOptionError(
                f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'"
            )
        return SubscribeStrategy(topics)
    pattern = value.strip()
    if not pattern:
        raise KafkaLiteOptionError(
            f"Pattern to subscribe is empty as specified value for option 'subscribePattern' is '{value}'"
        )
    try:
        re.compile(pattern)
    except re.error as exc:
        raise KafkaLiteOptionError(f"Invalid regex '{value}' for option 'subscribePattern': {exc}") from None
    return SubscribePatternStrategy(pattern)


def _parse_timestamp(raw: str, name: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise KafkaLiteOptionError(
            f"Expected a single long value, got {raw.strip()} (option '{name}')"
        ) from None


def _parse_offset_range_limit(
    params: Mapping[str, str],
    *,
    global_ts_key: str,
    by_ts_key: str,
    offsets_key: str,
    names: tuple[str, str, str],
    default: OffsetRangeLimit,
) -> OffsetRangeLimit:
    """Spark's ``getKafkaOffsetRangeLimit``: global timestamp > per-partition timestamps > offsets."""
    strategy_raw = params.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy_raw not in ("error", "latest"):
        raise KafkaLiteOptionError(
            f"Invalid value '{strategy_raw}' for option 'startingOffsetsByTimestampStrategy': "
            "expected 'error' or 'latest'"
        )
    no_match_latest = strategy_raw == "latest"
    global_name, by_ts_name, offsets_name = names
    if global_ts_key in params:
        return OffsetRangeLimit(
            "global_timestamp",
            timestamp=_parse_timestamp(params[global_ts_key], global_name),
            no_match_latest=no_match_latest,
        )
    if by_ts_key in params:
        try:
            timestamps = parse_partition_offsets(params[by_ts_key].strip())
        except OffsetJsonError as exc:
            raise KafkaLiteOptionError(f"Invalid value for option '{by_ts_name}': {exc}") from None
        return OffsetRangeLimit("timestamp", timestamps=timestamps, no_match_latest=no_match_latest)
    raw = params.get(offsets_key)
    if raw is None:
        return default
    text = raw.strip()
    if text.lower() == "latest":
        return OffsetRangeLimit("latest")
    if text.lower() == "earliest":
        return OffsetRangeLimit("earliest")
    try:
        offsets, topic_offsets = parse_offsets_with_topic_defaults(text)
    except OffsetJsonError as exc:
        raise KafkaLiteOptionError(f"Invalid value for option '{offsets_name}': {exc}") from None
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise KafkaLiteOptionError(
                f"Invalid offset {offset} for {tp.topic}-{tp.partition} in option '{offsets_name}': "
                "use -2 for earliest, -1 for latest, or an offset >= 0"
            )
    return OffsetRangeLimit("specific", offsets=offsets, topic_offsets=topic_offsets)


def _starting(params: Mapping[str, str], default: OffsetRangeLimit) -> OffsetRangeLimit:
    return _parse_offset_range_limit(
        params,
        global_ts_key="startingtimestamp",
        by_ts_key="startingoffsetsbytimestamp",
        offsets_key="startingoffsets",
        names=("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets"),
        default=default,
    )


def _ending(params: Mapping[str, str]) -> OffsetRangeLimit:
    return _parse_offset_range_limit(
        params,
        global_ts_key="endingtimestamp",
        by_ts_key="endingoffsetsbytimestamp",
        offsets_key="endingoffsets",
        names=("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"),
        default=OffsetRangeLimit("latest"),
    )


def _refuse_in_batch(
    limit: OffsetRangeLimit, kind: str, sentinel: int, what: str, option: str, per_partition: str
) -> None:
    """Raise KafkaLiteOptionError if a batch query's ``limit`` is ``kind`` ("latest" for the
    starting limit, "earliest" for the ending one) as a whole or as the ``sentinel`` offset of a
    partition or topic (Spark's ``KafkaSourceProvider.validateBatchOptions``)."""
    if limit.kind == kind:
        raise KafkaLiteOptionError(f"{what} can't be {kind} for batch queries on Kafka (option '{option}')")
    for tp, offset in limit.offsets.items():
        if offset == sentinel:
            raise KafkaLiteOptionError(
                f"{per_partition} for {tp.topic}-{tp.partition} can't be {kind} for batch queries on Kafka"
            )
    for topic, offset in limit.topic_offsets.items():
        if offset == sentinel:
            raise KafkaLiteOptionError(
                f"{per_partition} for topic {topic} can't be {kind} for batch queries on Kafka"
            )


def _check_offset_limit_validity(start: OffsetRangeLimit, end: OffsetRangeLimit) -> None:
    """Spark's ``checkOffsetLimitValidity`` for two specific (or two per-partition timestamp) limits."""
    if start.kind == "specific" and end.kind == "specific":
        if start.topic_offsets or end.topic_offsets:
            return  # topic-level values expand only against the real partitions (offset_reader)
        start_map, end_map = start.offsets, end.offsets
    elif start.kind == "timestamp" and end.kind == "timestamp":
        start_map, end_map = start.timestamps, end.timestamps
    else:
        return
    if set(start_map) != set(end_map):
        raise KafkaLiteOptionError(
            "[MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET] The specified start offset "
            "and end offset should have the same topic-partitions. Topic-partitions for start offset: "
            f"{format_partitions(start_map)}, topic-partitions for end offset: {format_partitions(end_map)}."
        )
    for tp, start_offset in start_map.items():
        end_offset = end_map[tp]
        if start_offset > end_offset and start_offset >= 0 and end_offset >= 0:
            raise KafkaLiteOptionError(
                f"[UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The specified start offset {start_offset} "
                f"is greater than the end offset {end_offset} for topic {tp.topic} partition {tp.partition}."
            )


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validate source options as Spark's ``KafkaSourceProvider`` does.

    Batch (``streaming=False``): ``startingOffsets`` defaults to earliest and may not be ``latest``
    (or -1 for a partition); ``endingOffsets`` defaults to latest and may not be ``earliest`` (or
    -2); ``maxOffsetsPerTrigger`` is ignored with a warning. Streaming: ``startingOffsets``
    defaults to latest; ``endingOffsets`` / ``endingOffsetsByTimestamp`` are rejected.

    Raises:
        KafkaLiteOptionError: naming the offending option.
    """
    params = _lower(options)
    check_known(params, SOURCE_OPTIONS, "source")
    if streaming:
        if "endingoffsets" in params:
            raise KafkaLiteOptionError(
                "ending offset not valid in streaming queries (option 'endingOffsets')"
            )
        if "endingoffsetsbytimestamp" in params:
            raise KafkaLiteOptionError(
                "ending timestamp not valid in streaming queries (option 'endingOffsetsByTimestamp')"
            )
        if "endingtimestamp" in params:
            raise KafkaLiteOptionError(
                "ending timestamp not valid in streaming queries (option 'endingTimestamp')"
            )
        starting = _starting(params, OffsetRangeLimit("latest"))
        ending = None
    else:
        starting = _starting(params, OffsetRangeLimit("earliest"))
        _refuse_in_batch(starting, "latest", LATEST, "starting offset", "startingOffsets", "startingOffsets")
        ending = _ending(params)
        _refuse_in_batch(ending, "earliest", EARLIEST, "ending offset", "endingOffsets", "ending offset")
        _check_offset_limit_validity(starting, ending)
        for ignored in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if ignored in params:
                log.warning("%s option ignored in batch queries", ignored)

    strategy = _parse_strategy(params)
    min_partitions = parse_positive(params, "minpartitions", "minPartitions")
    max_records = parse_positive(params, "maxrecordsperpartition", "maxRecordsPerPartition")
    kafka = validate_kafka_params(params, sink=False)
    max_offsets = (
        parse_positive(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger") if streaming else None
    )
    min_offsets: int | None = None
    max_trigger_delay_ms = DEFAULT_MAX_TRIGGER_DELAY_MS
    max_bytes: int | None = None
    if streaming:
        min_offsets = parse_positive(params, "minoffsetspertrigger", "minOffsetsPerTrigger")
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise KafkaLiteOptionError(
                f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
                f"maxOffsetsPerTrigger({max_offsets})."
            )
        if "maxtriggerdelay" in params:
            max_trigger_delay_ms = parse_time_ms(params["maxtriggerdelay"], "maxTriggerDelay")
        max_bytes = parse_positive(params, "maxbytespertrigger", "maxBytesPerTrigger")
    elif "maxbytespertrigger" in params:
        log.warning("maxbytespertrigger option ignored in batch queries")
    group_id_prefix = params.get("groupidprefix")
    if group_id_prefix is not None and not group_id_prefix.strip():
        raise KafkaLiteOptionError("Invalid value '' for option 'groupIdPrefix': the prefix is empty")
    commit_to_group = parse_bool(params, "commitoffsetstogroup", "commitOffsetsToGroup", False)
    if commit_to_group:
        if not streaming:
            raise KafkaLiteOptionError(
                "Option 'commitOffsetsToGroup' is only valid in streaming queries (batch reads have no "
                "progress to commit)"
            )
        if not kafka.get("group.id", "").strip():
            raise KafkaLiteOptionError(
                "Option 'commitOffsetsToGroup' requires option 'kafka.group.id' (the consumer group that "
                "receives the query's processed offsets)"
            )

    return SourceOptions(
        strategy=strategy,
        client_config=kafka,
        starting=starting,
        ending=ending,
        fail_on_data_loss=parse_bool(params, "failondataloss", "failOnDataLoss", True),
        include_headers=parse_bool(params, "includeheaders", "includeHeaders", False),
        max_offsets_per_trigger=max_offsets,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        poll_timeout_ms=parse_positive(params, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs")
        or DEFAULT_POLL_TIMEOUT_MS,
        fetch_offset_num_retries=parse_non_negative(
            params, "fetchoffset.numretries", "fetchOffset.numRetries", 3
        ),
        fetch_offset_retry_interval_ms=parse_non_negative(
            params, "fetchoffset.retryintervalms", "fetchOffset.retryIntervalMs", 1000
        ),
        min_offsets_per_trigger=min_offsets,
        max_trigger_delay_ms=max_trigger_delay_ms,
        max_bytes_per_trigger=max_bytes,
        group_id_prefix=group_id_prefix.strip() if group_id_prefix else None,
        commit_offsets_to_group=commit_to_group,
    )


def parse_sink_options(options: Mapping[str, str], *, streaming: bool = False) -> SinkOptions:
    """Validate sink options: ``kafka.bootstrap.servers`` required, serializers rejected,
    ``topic`` optional (trimmed; it overrides a ``topic`` column), ``deliveryGuarantee`` and its
    companions (:func:`.exactly_once.parse_exactly_once`; ``streaming`` tells a
    ``writeStream`` from a batch ``df.write``).

    Raises:
        KafkaLiteOptionError: naming the offending option.
    """
    params = _lower(options)
    check_known(params, SINK_OPTIONS, "sink")
    kafka = validate_kafka_params(params, sink=True)
    topic = params.get("topic")
    if topic is not None:
        topic = topic.strip()
        if not topic:
            raise KafkaLiteOptionError("Invalid value '' for option 'topic': the topic name is empty")
    exactly_once = parse_exactly_once(params, kafka, streaming=streaming)
    return SinkOptions(topic=topic, client_config=kafka, exactly_once=exactly_once)
