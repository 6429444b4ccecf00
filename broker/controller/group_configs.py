"""GROUP config resources (ConfigResource type 32, KIP-848 / KIP-932): Kafka's ``GroupConfig``.

A group's configs are ``ConfigRecord`` s of resource type GROUP in the cluster metadata (the
image's ``resource_configs``). Each key defaults to a broker key
(``GroupCoordinatorConfig.extractGroupConfigMap``); a group config must stay within the broker's
bounds (``GroupConfig.validate``), and a session timeout must exceed its heartbeat interval.
The group coordinator reads a group's effective configs with :func:`group_config`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from broker.config_def import ConfigError, ConfigKey, at_least, one_of
from broker.controller.metadata_image import RESOURCE_TYPE_GROUP, MetadataImage
from spark_kafkalite.protocol.errors import InvalidConfigError

__all__ = ["GROUP_CONFIG_DEF", "GroupConfig", "group_config", "validate_group_configs", "group_defaults"]

#: group config -> (its key, the broker key giving its default, the broker keys bounding it)
GROUP_CONFIG_DEF: dict[str, tuple[ConfigKey, str | None, tuple[str, str] | None]] = {
    "consumer.session.timeout.ms": (
        ConfigKey(
            "consumer.session.timeout.ms", "int", 45000, "Consumer group session timeout.", at_least(1)
        ),
        "group.consumer.session.timeout.ms",
        ("group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    ),
    "consumer.heartbeat.interval.ms": (
        ConfigKey(
            "consumer.heartbeat.interval.ms", "int", 5000, "Consumer group heartbeat interval.", at_least(1)
        ),
        "group.consumer.heartbeat.interval.ms",
        ("group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    ),
    "share.session.timeout.ms": (
        ConfigKey("share.session.timeout.ms", "int", 45000, "Share group session timeout.", at_least(1)),
        "group.share.session.timeout.ms",
        ("group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    ),
    "share.heartbeat.interval.ms": (
        ConfigKey("share.heartbeat.interval.ms", "int", 5000, "Share group heartbeat interval.", at_least(1)),
        "group.share.heartbeat.interval.ms",
        ("group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    ),
    "share.record.lock.duration.ms": (
        ConfigKey(
            "share.record.lock.duration.ms",
            "int",
            30000,
            "How long a share group member holds a delivered record's lock.",
            at_least(1000),
        ),
        "group.share.record.lock.duration.ms",
        ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    ),
    "share.auto.offset.reset": (
        ConfigKey(
            "share.auto.offset.reset",
            "string",
            "latest",
            "The strategy to initialize the share-partition start offset.",
            one_of("latest", "earliest"),
        ),
        None,
        None,
    ),
}

#: session timeout key -> the heartbeat interval it must exceed
_SESSION_OVER_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
)


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """A group's effective configs (its GROUP resource overrides, else the broker defaults)."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_auto_offset_reset: str


def group_defaults(broker_values: Mapping[str, Any]) -> dict[str, Any]:
    """Each group config's default: its broker key's value (``extractGroupConfigMap``)."""
    return {
        name: key.default if broker_key is None else broker_values.get(broker_key, key.default)
        for name, (key, broker_key, _) in GROUP_CONFIG_DEF.items()
    }


def validate_group_configs(overrides: Mapping[str, str], broker_values: Mapping[str, Any]) -> dict[str, Any]:
    """Check a group's whole override set (``GroupConfig.validate``); returns every group
    config's typed value (overrides over Kafka's ``GroupConfig`` defaults, which is what the
    bounds are checked on, as Kafka does).

    Raises:
        InvalidConfigError: an unknown key ("Unknown group config name: k"), an unparsable
            value, a value outside the broker's bounds, or a session timeout not above its
            heartbeat interval.
    """
    values: dict[str, Any] = {name: spec[0].default for name, spec in GROUP_CONFIG_DEF.items()}
    for name, raw in overrides.items():
        spec = GROUP_CONFIG_DEF.get(name)
        if spec is None:
            raise InvalidConfigError(f"Unknown group config name: {name}")
        try:
            values[name] = spec[0].parse(raw)
        except ConfigError as exc:
            raise InvalidConfigError(str(exc)) from None
    for name, (_, _, bounds) in GROUP_CONFIG_DEF.items():
        if bounds is None:
            continue
        low_key, high_key = bounds
        if values[name] < int(broker_values[low_key]):
            raise InvalidConfigError(f"{name} must be greater than or equal to {low_key}")
        if values[name] > int(broker_values[high_key]):
            raise InvalidConfigError(f"{name} must be less than or equal to {high_key}")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if values[session] <= values[heartbeat]:
            raise InvalidConfigError(f"{session} must be greater than {heartbeat}")
    return values


def group_config(image: MetadataImage, group_id: str, broker_values: Mapping[str, Any]) -> GroupConfig:
    """The effective configs of group ``group_id`` for its coordinator: the GROUP resource's
    overrides (validated when stored), else the broker defaults (:func:`group_defaults`)."""
    values = group_defaults(broker_values)
    for name, raw in image.resource_config(RESOURCE_TYPE_GROUP, group_id).items():
        spec = GROUP_CONFIG_DEF.get(name)
        if spec is not None:
            values[name] = spec[0].parse(raw)
    return GroupConfig(
        consumer_session_timeout_ms=int(values["consumer.session.timeout.ms"]),
        consumer_heartbeat_interval_ms=int(values["consumer.heartbeat.interval.ms"]),
        share_session_timeout_ms=int(values["share.session.timeout.ms"]),
        share_heartbeat_interval_ms=int(values["share.heartbeat.interval.ms"]),
        share_record_lock_duration_ms=int(values["share.record.lock.duration.ms"]),
        share_auto_offset_reset=str(values["share.auto.offset.reset"]),
    )
