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
from spark_kafkalite.datasource.offsets import (
    EARLIEST,
    LATEST,
    OffsetJsonError,
    PartitionOffsetMap,
    format_partitions,
    parse_partition_offsets,
    parse_partitions,
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
    "DEFAULT_POLL_TIMEOUT_MS",
]

log = logging.getLogger(__name__)

DEFAULT_POLL_TIMEOUT_MS = 120_000
"""Spark's default ``kafkaConsumer.pollTimeoutMs`` (``spark.network.timeout`` = 120 s)."""

_STRATEGY_KEYS = ("subscribe", "subscribepattern", "assign")
_STRATEGY_NAMES = "subscribe, subscribepattern, assign"

_AUTO_OFFSET_RESET_MESSAGE = (
    "Kafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingoffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details."
)


class KafkaLiteOptionError(ValueError):
    """An invalid or conflicting ``kafkalite`` option; the message names the option."""


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

    ``kind``: ``earliest`` / ``latest``; ``specific`` (``offsets`` per partition, -2/-1 allowed);
    ``timestamp`` (``timestamps`` per partition, ms); ``global_timestamp`` (``timestamp`` ms for
    every partition). ``no_match_latest``: for timestamps with no record at or after them, use the
    latest offset instead of failing (``startingOffsetsByTimestampStrategy=latest``).
    """

    kind: Literal["earliest", "latest", "specific", "timestamp", "global_timestamp"]
    offsets: PartitionOffsetMap = field(default_factory=dict)
    timestamps: PartitionOffsetMap = field(default_factory=dict)
    timestamp: int | None = None
    no_match_latest: bool = False


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """Validated source options. ``client_config`` holds the ``kafka.*`` options with the prefix
    stripped (string values; the client coerces them)."""

    strategy: Strategy
    client_config: dict[str, str]
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

    @property
    def bootstrap_servers(self) -> str:
        return self.client_config["bootstrap.servers"]


@dataclass(frozen=True, slots=True)
class SinkOptions:
    """Validated sink options: the default ``topic`` (overrides a ``topic`` column, as in Spark)
    and the producer's ``kafka.*`` settings."""

    topic: str | None
    client_config: dict[str, str]

    @property
    def bootstrap_servers(self) -> str:
        return self.client_config["bootstrap.servers"]


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def client_params(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix stripped (keys lower-cased, as Kafka's are)."""
    return {k[len("kafka.") :]: v for k, v in _lower(options).items() if k.startswith("kafka.")}


def _parse_bool(params: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = params.get(key)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise KafkaLiteOptionError(f"Invalid value '{raw}' for option '{name}': expected 'true' or 'false'")
    return lowered == "true"


def _parse_positive(params: Mapping[str, str], key: str, name: str) -> int | None:
    raw = params.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise KafkaLiteOptionError(
            f"Invalid value '{raw}' for option '{name}': expected a positive integer"
        ) from None
    if value <= 0:
        raise KafkaLiteOptionError(f"{name} must be positive (option '{name}' is '{raw}')")
    return value


def _parse_non_negative(params: Mapping[str, str], key: str, name: str, default: int) -> int:
    raw = params.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise KafkaLiteOptionError(
            f"Invalid value '{raw}' for option '{name}': expected a non-negative integer"
        ) from None
    if value < 0:
        raise KafkaLiteOptionError(f"Invalid value '{raw}' for option '{name}': must not be negative")
    return value


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


def _validate_kafka_params(params: Mapping[str, str], *, sink: bool) -> dict[str, str]:
    kafka = {k[len("kafka.") :]: v for k, v in params.items() if k.startswith("kafka.")}
    if sink:
        if "key.serializer" in kafka:
            raise KafkaLiteOptionError(
                "Kafka option 'key.serializer' is not supported as keys are serialized with ByteArraySerializer."
            )
        if "value.serializer" in kafka:
            raise KafkaLiteOptionError(
                "Kafka option 'value.serializer' is not supported as value are serialized with "
                "ByteArraySerializer."
            )
    else:
        if "auto.offset.reset" in kafka:
            raise KafkaLiteOptionError(_AUTO_OFFSET_RESET_MESSAGE)
        if "key.deserializer" in kafka:
            raise KafkaLiteOptionError(
                "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays "
                "with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize the keys."
            )
        if "value.deserializer" in kafka:
            raise KafkaLiteOptionError(
                "Kafka option 'value.deserializer' is not supported as values are deserialized as byte "
                "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
                "the values."
            )
        for unsupported in ("enable.auto.commit", "interceptor.classes"):
            if unsupported in kafka:
                raise KafkaLiteOptionError(f"Kafka option '{unsupported}' is not supported")
        if "group.id" in kafka:
            log.warning(
                "Kafka option 'kafka.group.id' has been set on this query; kafkalite never joins a "
                "consumer group or commits offsets, so it is ignored."
            )
    if not kafka.get("bootstrap.servers", "").strip():
        role = "producer" if sink else "consumer"
        raise KafkaLiteOptionError(
            f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}"
        )
    return kafka


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
        offsets = parse_partition_offsets(text)
    except OffsetJsonError as exc:
        raise KafkaLiteOptionError(f"Invalid value for option '{offsets_name}': {exc}") from None
    for tp, offset in offsets.items():
        if offset < EARLIEST:
            raise KafkaLiteOptionError(
                f"Invalid offset {offset} for {tp.topic}-{tp.partition} in option '{offsets_name}': "
                "use -2 for earliest, -1 for latest, or an offset >= 0"
            )
    return OffsetRangeLimit("specific", offsets=offsets)


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


def _check_offset_limit_validity(start: OffsetRangeLimit, end: OffsetRangeLimit) -> None:
    """Spark's ``checkOffsetLimitValidity`` for two specific (or two per-partition timestamp) limits."""
    if start.kind == "specific" and end.kind == "specific":
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
        if starting.kind == "latest":
            raise KafkaLiteOptionError(
                "starting offset can't be latest for batch queries on Kafka (option 'startingOffsets')"
            )
        for tp, offset in starting.offsets.items():
            if offset == LATEST:
                raise KafkaLiteOptionError(
                    f"startingOffsets for {tp.topic}-{tp.partition} can't be latest for batch queries on Kafka"
                )
        ending = _ending(params)
        if ending.kind == "earliest":
            raise KafkaLiteOptionError(
                "ending offset can't be earliest for batch queries on Kafka (option 'endingOffsets')"
            )
        for tp, offset in ending.offsets.items():
            if offset == EARLIEST:
                raise KafkaLiteOptionError(
                    f"ending offset for {tp.topic}-{tp.partition} can't be earliest for batch queries on Kafka"
                )
        _check_offset_limit_validity(starting, ending)
        for ignored in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if ignored in params:
                log.warning("%s option ignored in batch queries", ignored)

    strategy = _parse_strategy(params)
    min_partitions = _parse_positive(params, "minpartitions", "minPartitions")
    max_records = _parse_positive(params, "maxrecordsperpartition", "maxRecordsPerPartition")
    kafka = _validate_kafka_params(params, sink=False)
    max_offsets = (
        _parse_positive(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger") if streaming else None
    )
    if streaming:
        min_offsets = _parse_positive(params, "minoffsetspertrigger", "minOffsetsPerTrigger")
        if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
            raise KafkaLiteOptionError(
                f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
                f"maxOffsetsPerTrigger({max_offsets})."
            )
        if min_offsets is not None:
            log.warning("minOffsetsPerTrigger/maxTriggerDelay are not supported by kafkalite yet; ignored")

    return SourceOptions(
        strategy=strategy,
        client_config=kafka,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_parse_bool(params, "failondataloss", "failOnDataLoss", True),
        include_headers=_parse_bool(params, "includeheaders", "includeHeaders", False),
        max_offsets_per_trigger=max_offsets,
        min_partitions=min_partitions,
        max_records_per_partition=max_records,
        poll_timeout_ms=_parse_positive(params, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs")
        or DEFAULT_POLL_TIMEOUT_MS,
        fetch_offset_num_retries=_parse_non_negative(
            params, "fetchoffset.numretries", "fetchOffset.numRetries", 3
        ),
        fetch_offset_retry_interval_ms=_parse_non_negative(
            params, "fetchoffset.retryintervalms", "fetchOffset.retryIntervalMs", 1000
        ),
    )


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Validate sink options: ``kafka.bootstrap.servers`` required, serializers rejected,
    ``topic`` optional (trimmed; it overrides a ``topic`` column).

    Raises:
        KafkaLiteOptionError: naming the offending option.
    """
    params = _lower(options)
    kafka = _validate_kafka_params(params, sink=True)
    topic = params.get("topic")
    if topic is not None:
        topic = topic.strip()
        if not topic:
            raise KafkaLiteOptionError("Invalid value '' for option 'topic': the topic name is empty")
    return SinkOptions(topic=topic, client_config=kafka)
