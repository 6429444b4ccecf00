"""Checks shared by the ``kafkalite`` source and sink options: the option names, Spark's rules
for ``kafka.*`` keys, and value parsers (booleans, positive integers, Spark time strings). Each
error is a :class:`KafkaLiteOptionError` naming the option, in Spark's words where Spark has them.

Pure logic: no I/O, no pyspark import.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Mapping

__all__ = [
    "KafkaLiteOptionError",
    "SOURCE_OPTIONS",
    "SINK_OPTIONS",
    "check_known",
    "validate_kafka_params",
    "parse_bool",
    "parse_positive",
    "parse_non_negative",
    "parse_time_ms",
]

log = logging.getLogger("spark_kafkalite.datasource.options")

SOURCE_OPTIONS = (
    "subscribe",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "failOnDataLoss",
    "maxOffsetsPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "minPartitions",
    "maxRecordsPerPartition",
    "includeHeaders",
    "groupIdPrefix",
    "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs",
    "maxBytesPerTrigger",
    "commitOffsetsToGroup",
)
"""Every source option besides ``kafka.*`` (Spark's names, plus kafkalite's ``maxBytesPerTrigger``
and ``commitOffsetsToGroup``)."""

SINK_OPTIONS = ("topic", "includeHeaders", "deliveryGuarantee", "transactionalIdPrefix", "batchId")
"""Every sink option besides ``kafka.*`` (``includeHeaders`` is accepted as Spark's docs list it;
a ``headers`` column is always written when present; ``deliveryGuarantee``,
``transactionalIdPrefix`` and ``batchId`` are kafkalite's exactly-once mode)."""

_SPARK_GENERIC_OPTIONS = frozenset({"path", "paths", "checkpointlocation", "queryname"})
"""Options Spark itself may place in a data source's option map; never rejected."""

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


def parse_bool(params: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = params.get(key)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise KafkaLiteOptionError(f"Invalid value '{raw}' for option '{name}': expected 'true' or 'false'")
    return lowered == "true"


def parse_positive(params: Mapping[str, str], key: str, name: str) -> int | None:
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


def parse_non_negative(params: Mapping[str, str], key: str, name: str, default: int) -> int:
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


_TIME_SUFFIX_MS = {
    "us": 0.001,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


def parse_time_ms(raw: str, name: str) -> int:
    """Spark's ``Utils.timeStringAsMs``: ``"15m"``, ``"100ms"``, ``"5s"``, ``"1h"``, ``"2d"``,
    ``"250us"`` or a bare number of milliseconds.

    Raises:
        KafkaLiteOptionError: naming option ``name``.
    """
    match = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", raw.strip().lower())
    if match is None:
        raise KafkaLiteOptionError(
            f"Invalid value '{raw}' for option '{name}': time must be specified as seconds (s), milliseconds "
            "(ms), microseconds (us), minutes (m or min), hour (h), or day (d). E.g. 50s, 100ms, or 250us."
        )
    number, suffix = int(match.group(1)), match.group(2) or "ms"
    if suffix not in _TIME_SUFFIX_MS:
        raise KafkaLiteOptionError(f"Invalid value '{raw}' for option '{name}': invalid suffix: \"{suffix}\"")
    value = int(number * _TIME_SUFFIX_MS[suffix])
    if value < 0:
        raise KafkaLiteOptionError(f"Invalid value '{raw}' for option '{name}': must not be negative")
    return value


def check_known(params: Mapping[str, str], known: tuple[str, ...], what: str) -> None:
    """Reject option keys that are neither ``kafka.*``, Spark's generic keys, nor in ``known``."""
    by_lower = {k.lower(): k for k in known}
    for key in params:
        if key.startswith("kafka.") or key in by_lower or key in _SPARK_GENERIC_OPTIONS:
            continue
        close = difflib.get_close_matches(key, list(by_lower), n=1, cutoff=0.75)
        hint = f" Did you mean '{by_lower[close[0]]}'?" if close else ""
        raise KafkaLiteOptionError(
            f"Unknown option '{key}' for the kafkalite {what}.{hint} Known options: "
            f"{', '.join(known)}, and 'kafka.*' client settings."
        )


def validate_kafka_params(params: Mapping[str, str], *, sink: bool) -> dict[str, str]:
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
                "Kafka option 'kafka.group.id' has been set on this query. kafkalite never joins the "
                "group (its consumers are assigned partitions by the driver); the id is used only to "
                "commit processed offsets when 'commitOffsetsToGroup' is true. Concurrent queries "
                "committing to the same group overwrite each other's offsets."
            )
    if not kafka.get("bootstrap.servers", "").strip():
        role = "producer" if sink else "consumer"
        raise KafkaLiteOptionError(
            f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}"
        )
    return kafka
