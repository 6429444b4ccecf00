"""Topic-level configuration keys (Kafka's ``LogConfig`` ConfigDef + ``ServerTopicConfigSynonyms``).

Every topic config has a type, a default, a validator and the broker keys it defaults from, in
precedence order (``retention.ms`` <- ``log.retention.ms``, ``log.retention.minutes`` x 60000,
``log.retention.hours`` x 3600000). A topic's effective value is its override when it has one,
else the first broker synonym with a value, else the topic default.

Overrides are stored as canonical strings (``ConfigDef.convertToString`` of the parsed value).
:func:`validate_topic_overrides` checks a whole override set the way Kafka's
``ControllerConfigurationValidator`` + ``LogConfig.validate`` do and raises
:class:`InvalidConfigError` naming the key; :func:`log_config_for` builds the
:class:`~broker.log.log_config.LogConfig` a partition log runs with.

Deviations from Kafka 4.0, on purpose:
- ``segment.bytes`` accepts values >= 14 (Kafka 4.0: >= 1 MiB) so tests can roll tiny segments,
  matching this broker's ``log.segment.bytes``.
- Values the broker cannot honour yet are refused with INVALID_CONFIG instead of being silently
  ignored: ``remote.storage.enable=true``, and
  ``cleanup.policy`` with ``compact`` while :data:`COMPACTION_SUPPORTED` is False.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigError,
    ConfigKey,
    Validator,
    at_least,
    between,
    one_of,
)
from broker.log.log_config import BROKER_COMPRESSION_TYPES, LogConfig
from broker.server_configs import CONFIG_DEF, gzip_level_validator
from spark_kafkalite.protocol.compression import (
    COMPRESSION_GZIP,
    COMPRESSION_LEVELS,
    COMPRESSION_LZ4,
    COMPRESSION_ZSTD,
)
from spark_kafkalite.protocol.errors import InvalidConfigError

__all__ = [
    "TopicConfigKey",
    "TOPIC_CONFIG_DEF",
    "TOPIC_CONFIG_NAMES",
    "COMPACTION_SUPPORTED",
    "config_value_to_string",
    "parse_topic_config",
    "validate_topic_overrides",
    "broker_default",
    "effective_topic_config",
    "log_config_for",
]

#: Flip to True once the log cleaner runs compaction (issue 4, storage part).
COMPACTION_SUPPORTED = True

_HOURS = 3_600_000
_MINUTES = 60_000


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    """One topic config.

    Attributes:
        key: the Kafka :class:`~broker.config_def.ConfigKey` (name, type, typed default, doc,
            validator).
        synonyms: broker keys it defaults from, highest precedence first, each with the
            factor converting the broker value to the topic unit (hours -> ms = 3600000).
        unsupported: returns a message when a (typed) value cannot be honoured yet.
    """

    key: ConfigKey
    synonyms: tuple[tuple[str, int], ...] = ()
    unsupported: Callable[[Any], str | None] | None = None

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def type(self) -> str:
        return self.key.type


TOPIC_CONFIG_DEF: dict[str, TopicConfigKey] = {}


def _define(
    name: str,
    type_: str,
    default: Any,
    doc: str,
    validator: Validator | None = None,
    synonyms: tuple[str | tuple[str, int], ...] = (),
    unsupported: Callable[[Any], str | None] | None = None,
) -> None:
    pairs = tuple((s, 1) if isinstance(s, str) else s for s in synonyms)
    TOPIC_CONFIG_DEF[name] = TopicConfigKey(
        ConfigKey(name, type_, default, doc, validator), pairs, unsupported
    )


def _no_compaction(value: Any) -> str | None:
    if not COMPACTION_SUPPORTED and "compact" in value:
        return "log compaction is not supported yet (only cleanup.policy=delete)"
    return None


def _no_tiered_storage(value: Any) -> str | None:
    return "tiered storage is not supported" if value else None


def _throttled_replicas(value: Any) -> str | None:
    """Kafka's ``ThrottledReplicaListValidator``: ``*`` or ``partition:broker`` pairs."""
    items = [v for v in value if v]
    if items == ["*"] or not items:
        return None
    for item in items:
        partition, sep, broker = item.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            return "must be the wildcard (*) or a list of 'partitionId:brokerId' pairs"
    return None


_define(
    "cleanup.policy",
    "list",
    ["delete"],
    "delete and/or compact: how old log segments are discarded.",
    one_of("compact", "delete"),
    ("log.cleanup.policy",),
    _no_compaction,
)
_define(
    "compression.type",
    "string",
    "producer",
    "The final compression of the topic's batches: uncompressed, zstd, lz4, snappy, gzip, or producer "
    "(keep the codec the producer sent). A batch in another codec is rebuilt with this one on append.",
    one_of(*BROKER_COMPRESSION_TYPES),
    ("compression.type",),
)
_define(
    "compression.gzip.level",
    "int",
    COMPRESSION_LEVELS[COMPRESSION_GZIP][2],
    "The compression level to use if compression.type is set to gzip.",
    gzip_level_validator,
    ("compression.gzip.level",),
)
_define(
    "compression.lz4.level",
    "int",
    COMPRESSION_LEVELS[COMPRESSION_LZ4][2],
    "The compression level to use if compression.type is set to lz4.",
    between(*COMPRESSION_LEVELS[COMPRESSION_LZ4][:2]),
    ("compression.lz4.level",),
)
_define(
    "compression.zstd.level",
    "int",
    COMPRESSION_LEVELS[COMPRESSION_ZSTD][2],
    "The compression level to use if compression.type is set to zstd.",
    between(*COMPRESSION_LEVELS[COMPRESSION_ZSTD][:2]),
    ("compression.zstd.level",),
)
_define(
    "delete.retention.ms",
    "long",
    86400000,
    "How long tombstones are kept on compacted topics.",
    at_least(0),
    ("log.cleaner.delete.retention.ms",),
)
_define(
    "file.delete.delay.ms",
    "long",
    60000,
    "Delay before a deleted segment file is removed.",
    at_least(0),
    ("log.segment.delete.delay.ms",),
)
_define(
    "flush.messages",
    "long",
    LONG_MAX,
    "fsync after this many messages.",
    at_least(1),
    ("log.flush.interval.messages",),
)
_define(
    "flush.ms",
    "long",
    LONG_MAX,
    "fsync when the oldest unflushed append is this old.",
    at_least(0),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
)
_define(
    "follower.replication.throttled.replicas",
    "list",
    [],
    "Replicas throttled on the follower side.",
    _throttled_replicas,
)
_define(
    "index.interval.bytes",
    "int",
    4096,
    "Bytes between two index entries.",
    at_least(0),
    ("log.index.interval.bytes",),
)
_define(
    "leader.replication.throttled.replicas",
    "list",
    [],
    "Replicas throttled on the leader side.",
    _throttled_replicas,
)
_define(
    "local.retention.bytes",
    "long",
    -2,
    "Local retention size with tiered storage (-2 = retention.bytes).",
    at_least(-2),
    ("log.local.retention.bytes",),
)
_define(
    "local.retention.ms",
    "long",
    -2,
    "Local retention time with tiered storage (-2 = retention.ms).",
    at_least(-2),
    ("log.local.retention.ms",),
)
_define(
    "max.compaction.lag.ms",
    "long",
    LONG_MAX,
    "Longest time a record stays uncompacted.",
    at_least(1),
    ("log.cleaner.max.compaction.lag.ms",),
)
_define(
    "max.message.bytes",
    "int",
    1048588,
    "Largest record batch the topic accepts.",
    at_least(0),
    ("message.max.bytes",),
)
_define(
    "message.timestamp.after.max.ms",
    "long",
    3600000,
    "Max future skew of a produced timestamp.",
    at_least(0),
    ("log.message.timestamp.after.max.ms",),
)
_define(
    "message.timestamp.before.max.ms",
    "long",
    LONG_MAX,
    "Max age of a produced timestamp.",
    at_least(0),
    ("log.message.timestamp.before.max.ms",),
)
_define(
    "message.timestamp.type",
    "string",
    "CreateTime",
    "CreateTime or LogAppendTime.",
    one_of("CreateTime", "LogAppendTime"),
    ("log.message.timestamp.type",),
)
_define(
    "min.cleanable.dirty.ratio",
    "double",
    0.5,
    "Dirty ratio that makes a log eligible for cleaning.",
    between(0, 1),
    ("log.cleaner.min.cleanable.ratio",),
)
_define(
    "min.compaction.lag.ms",
    "long",
    0,
    "Minimum age of a record before it can be compacted.",
    at_least(0),
    ("log.cleaner.min.compaction.lag.ms",),
)
_define(
    "min.insync.replicas",
    "int",
    1,
    "Minimum ISR size for acks=all writes.",
    at_least(1),
    ("min.insync.replicas",),
)
_define("preallocate", "boolean", False, "Preallocate segment files.", None, ("log.preallocate",))
_define("remote.log.copy.disable", "boolean", False, "Stop copying segments to remote storage.")
_define(
    "remote.log.delete.on.disable", "boolean", False, "Delete remote data when tiered storage is disabled."
)
_define(
    "remote.storage.enable", "boolean", False, "Tiered storage for the topic.", None, (), _no_tiered_storage
)
_define(
    "retention.bytes",
    "long",
    -1,
    "Partition size above which old segments are deleted (-1 = no limit).",
    None,
    ("log.retention.bytes",),
)
_define(
    "retention.ms",
    "long",
    604800000,
    "Age after which segments are deleted (-1 = forever).",
    at_least(-1),
    ("log.retention.ms", ("log.retention.minutes", _MINUTES), ("log.retention.hours", _HOURS)),
)
_define("segment.bytes", "int", 1073741824, "Segment file size.", at_least(14), ("log.segment.bytes",))
_define(
    "segment.index.bytes",
    "int",
    10485760,
    "Offset index size of a segment.",
    at_least(8),
    ("log.index.size.max.bytes",),
)
_define(
    "segment.jitter.ms",
    "long",
    0,
    "Random jitter subtracted from segment.ms.",
    at_least(0),
    ("log.roll.jitter.ms", ("log.roll.jitter.hours", _HOURS)),
)
_define(
    "segment.ms",
    "long",
    604800000,
    "Roll a segment after this time.",
    at_least(1),
    ("log.roll.ms", ("log.roll.hours", _HOURS)),
)
_define(
    "unclean.leader.election.enable",
    "boolean",
    False,
    "Allow out-of-sync replicas to become leader.",
    None,
    ("unclean.leader.election.enable",),
)

TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(TOPIC_CONFIG_DEF)


# ---------------------------------------------------------------------------------------------
# values


def config_value_to_string(value: Any, type_: str) -> str | None:
    """Kafka's ``ConfigDef.convertToString``: lists comma-joined, booleans lower-case."""
    if value is None:
        return None
    if type_ == "list":
        return ",".join(str(v) for v in value)
    if type_ == "boolean":
        return "true" if value else "false"
    return str(value)


def parse_topic_config(name: str, raw: str | None) -> Any:
    """Parse and validate one topic config value; returns the typed value.

    Raises:
        InvalidConfigError: unknown key (``Unknown topic config name: x``), a null value, an
            unparsable or out-of-range value, or a value not supported yet; the message names
            the key.
    """
    spec = TOPIC_CONFIG_DEF.get(name)
    if spec is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    if raw is None:
        raise InvalidConfigError(f"Null value not supported for topic configs: {name}")
    try:
        value = spec.key.parse(raw)
    except ConfigError as exc:
        raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: {_reason(exc)}") from None
    if spec.unsupported is not None:
        problem = spec.unsupported(value)
        if problem:
            raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: {problem}")
    return value


def _reason(exc: ConfigError) -> str:
    """The part of a ``ConfigError`` message after ``key: `` and ``invalid value X: ``."""
    text = str(exc)
    prefix = f"{exc.key}: "
    if text.startswith(prefix):
        text = text[len(prefix) :]
    if text.startswith("invalid value ") and ": " in text:
        text = text.split(": ", 1)[1]
    return text


def validate_topic_overrides(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Validate a complete override set; returns it with canonical string values.

    Also checks cross-key rules (``LogConfig.validateValues``): ``min.compaction.lag.ms`` <=
    ``max.compaction.lag.ms``.

    Raises:
        InvalidConfigError: naming the first offending key.
    """
    typed: dict[str, Any] = {}
    canonical: dict[str, str] = {}
    for name in sorted(overrides):
        value = parse_topic_config(name, overrides[name])
        typed[name] = value
        text = config_value_to_string(value, TOPIC_CONFIG_DEF[name].type)
        if text is None:  # parse_topic_config gives a value for every override
            raise RuntimeError(f"topic config {name} parsed to null")
        canonical[name] = text
    low = typed.get("min.compaction.lag.ms", 0)
    high = typed.get("max.compaction.lag.ms", LONG_MAX)
    if low > high:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})"
        )
    return canonical


# ---------------------------------------------------------------------------------------------
# effective values


def broker_default(name: str, broker_values: Mapping[str, Any]) -> tuple[Any, str | None]:
    """The value topic config ``name`` takes from the broker: ``(typed value, broker key)`` of
    the first synonym with a value (converted to the topic unit), else ``(topic default, None)``.

    ``broker_values`` is ``KafkaConfig.values`` (every key with its typed value or None).
    """
    spec = TOPIC_CONFIG_DEF[name]
    for broker_key, factor in spec.synonyms:
        if broker_key not in broker_values or broker_key not in CONFIG_DEF:
            continue
        value = broker_values[broker_key]
        if value is None:
            continue
        if factor != 1:
            value = -1 if value < 0 else value * factor
        return value, broker_key
    return spec.key.default, None


def effective_topic_config(broker_values: Mapping[str, Any], overrides: Mapping[str, str]) -> dict[str, Any]:
    """Every topic config's typed effective value: override, else broker synonym, else default.

    Raises:
        InvalidConfigError: an override does not parse (stored overrides are pre-validated).
    """
    out: dict[str, Any] = {}
    for name, spec in TOPIC_CONFIG_DEF.items():
        raw = overrides.get(name)
        if raw is not None:
            out[name] = spec.key.parse(raw)
        else:
            out[name] = broker_default(name, broker_values)[0]
    return out


def _none_if_max(value: int) -> int | None:
    return None if value >= LONG_MAX else int(value)


#: topic key -> (LogConfig field, converter). Fields LogConfig lacks are skipped.
_LOG_CONFIG_FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "segment.bytes": ("segment_bytes", int),
    "index.interval.bytes": ("index_interval_bytes", int),
    "max.message.bytes": ("max_message_bytes", int),
    "flush.messages": ("flush_interval_messages", _none_if_max),
    "segment.index.bytes": ("segment_index_bytes", lambda v: max(8, min(int(v), INT_MAX))),
    "segment.ms": ("segment_ms", int),
    "segment.jitter.ms": ("segment_jitter_ms", int),
    "retention.ms": ("retention_ms", int),
    "retention.bytes": ("retention_bytes", lambda v: max(-1, int(v))),
    "cleanup.policy": ("cleanup_policy", lambda v: tuple(v)),
    "delete.retention.ms": ("delete_retention_ms", int),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
    "flush.ms": ("flush_ms", _none_if_max),
    "file.delete.delay.ms": ("file_delete_delay_ms", int),
    "min.insync.replicas": ("min_insync_replicas", int),
    "message.timestamp.type": ("message_timestamp_type", str),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", int),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", int),
    "compression.type": ("compression_type", str),
    "compression.gzip.level": ("compression_gzip_level", int),
    "compression.lz4.level": ("compression_lz4_level", int),
    "compression.zstd.level": ("compression_zstd_level", int),
    "preallocate": ("preallocate", bool),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", bool),
}


def log_config_for(broker_values: Mapping[str, Any], overrides: Mapping[str, str]) -> LogConfig:
    """The :class:`LogConfig` of a topic's logs: broker defaults + the topic's overrides (Kafka's
    ``LogConfig.fromProps(brokerDefaults, topicOverrides)``). Only fields ``LogConfig`` declares
    are set; the rest keep its defaults."""
    values = effective_topic_config(broker_values, overrides)
    present = {f.name for f in dataclasses.fields(LogConfig)}
    kwargs: dict[str, Any] = {}
    for name, (field_name, convert) in _LOG_CONFIG_FIELDS.items():
        if field_name in present:
            kwargs[field_name] = convert(values[name])
    return LogConfig(**kwargs)
