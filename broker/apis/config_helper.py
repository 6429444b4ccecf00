"""Describing configs with their sources and synonyms (Kafka's ``ConfigHelper``).

TOPIC resources list every topic config (:data:`~broker.controller.topic_configs.TOPIC_CONFIG_DEF`):
the value is the topic override (source DYNAMIC_TOPIC_CONFIG), else the value derived from the
first broker synonym that has one. Synonyms, most to least specific: the override, then each
broker key's levels (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
DEFAULT_CONFIG; ``ConfigHelper.createTopicConfigEntry``).

BROKER resources named by a broker id list every broker key with the same levels
(:class:`~broker.dynamic_broker_config.DynamicBrokerConfig`; read-only unless the key can change
dynamically), then custom keys set dynamically; the cluster-wide default resource ("") lists only
its dynamic keys (``ConfigHelper.describeConfigs``). Password keys are sensitive and described
with a null value.

GROUP resources list every group config (:data:`~broker.controller.group_configs.GROUP_CONFIG_DEF`):
the group's value (GROUP_CONFIG) or the broker default (DEFAULT_CONFIG;
``ConfigHelper.createGroupConfigEntry``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from broker.controller.broker_configs import DYNAMIC_BROKER_CONFIGS
from broker.controller.group_configs import GROUP_CONFIG_DEF, group_defaults
from broker.controller.topic_configs import TOPIC_CONFIG_DEF, broker_default, config_value_to_string
from broker.dynamic_broker_config import DynamicBrokerConfig
from broker.server_configs import CONFIG_DEF
from spark_kafkalite.protocol.configs import ConfigSource, ConfigType

__all__ = [
    "ConfigSource",
    "ConfigType",
    "DescribedConfig",
    "describe_topic_configs",
    "describe_broker_configs",
    "describe_broker_default_configs",
    "describe_group_configs",
]


_TYPES = {
    "boolean": ConfigType.BOOLEAN,
    "string": ConfigType.STRING,
    "int": ConfigType.INT,
    "short": ConfigType.SHORT,
    "long": ConfigType.LONG,
    "double": ConfigType.DOUBLE,
    "list": ConfigType.LIST,
    "class": ConfigType.CLASS,
    "password": ConfigType.PASSWORD,
}


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    """One described config: ``synonyms`` are (name, value, source) tuples."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: ConfigType
    documentation: str | None
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]


def _string(value: Any, key: str) -> str | None:
    spec = CONFIG_DEF[key]
    return None if spec.type == "password" else config_value_to_string(value, spec.type)


def _broker_synonyms(
    dynamic: DynamicBrokerConfig, key: str, per_broker: bool = True
) -> list[tuple[str, str | None, ConfigSource]]:
    return [
        (name, _string(value, key), source)
        for name, value, source in dynamic.synonyms(key)
        if per_broker or source is not ConfigSource.DYNAMIC_BROKER_CONFIG
    ]


def describe_topic_configs(
    dynamic: DynamicBrokerConfig, overrides: Mapping[str, str], keys: Collection[str] | None = None
) -> list[DescribedConfig]:
    """Every topic config (or only ``keys``; unknown keys are skipped, as in Kafka), sorted by
    name, for a topic with ``overrides`` on a broker whose configs are ``dynamic``."""
    values = dynamic.config.values
    out: list[DescribedConfig] = []
    for name in sorted(TOPIC_CONFIG_DEF):
        if keys is not None and name not in keys:
            continue
        spec = TOPIC_CONFIG_DEF[name]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        override = overrides.get(name)
        if override is not None:
            synonyms.append((name, override, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        for key, _ in spec.synonyms:
            if key in CONFIG_DEF:
                synonyms.extend(_broker_synonyms(dynamic, key))
        # by level, then synonym order (``ConfigHelper.configSynonyms``); the source ids rank the levels
        synonyms.sort(key=lambda entry: int(entry[2]))
        if override is not None:
            value: str | None = override
        else:
            value = config_value_to_string(broker_default(name, values)[0], spec.type)
        out.append(
            DescribedConfig(
                name=name,
                value=value,
                source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=False,
                is_sensitive=False,
                config_type=_TYPES.get(spec.type, ConfigType.UNKNOWN),
                documentation=spec.key.doc,
                synonyms=tuple(synonyms),
            )
        )
    return out


def _custom(name: str, value: str, source: ConfigSource) -> DescribedConfig:
    return DescribedConfig(
        name=name,
        value=value,
        source=source,
        read_only=False,
        is_sensitive=False,
        config_type=ConfigType.STRING,
        documentation=None,
        synonyms=((name, value, source),),
    )


def describe_broker_configs(
    dynamic: DynamicBrokerConfig, keys: Collection[str] | None = None
) -> list[DescribedConfig]:
    """Every broker config of this broker (or only ``keys``), sorted by name, then the custom
    (unknown) keys set dynamically; read-only unless the key can change dynamically."""
    out: list[DescribedConfig] = []
    values = dynamic.config.values
    for name in sorted(CONFIG_DEF):
        if keys is not None and name not in keys:
            continue
        spec = CONFIG_DEF[name]
        synonyms = _broker_synonyms(dynamic, name)
        out.append(
            DescribedConfig(
                name=name,
                value=_string(values[name], name),
                source=synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG,
                read_only=name not in DYNAMIC_BROKER_CONFIGS,
                is_sensitive=spec.type == "password",
                config_type=_TYPES.get(spec.type, ConfigType.UNKNOWN),
                documentation=spec.doc,
                synonyms=tuple(synonyms),
            )
        )
    custom = {n: (v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) for n, v in dynamic.cluster_default.items()}
    custom.update((n, (v, ConfigSource.DYNAMIC_BROKER_CONFIG)) for n, v in dynamic.per_broker.items())
    out.extend(
        _custom(name, value, source)
        for name, (value, source) in sorted(custom.items())
        if name not in CONFIG_DEF and (keys is None or name in keys)
    )
    return out


def describe_broker_default_configs(
    dynamic: DynamicBrokerConfig, keys: Collection[str] | None = None
) -> list[DescribedConfig]:
    """The cluster-wide dynamic broker configs (the BROKER resource named ""), sorted by name."""
    out: list[DescribedConfig] = []
    for name, raw in sorted(dynamic.cluster_default.items()):
        if keys is not None and name not in keys:
            continue
        spec = CONFIG_DEF.get(name)
        if spec is None:
            out.append(_custom(name, raw, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
            continue
        synonyms = _broker_synonyms(dynamic, name, per_broker=False)
        out.append(
            DescribedConfig(
                name=name,
                value=synonyms[0][1],
                source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                read_only=False,
                is_sensitive=spec.type == "password",
                config_type=_TYPES.get(spec.type, ConfigType.UNKNOWN),
                documentation=spec.doc,
                synonyms=tuple(synonyms),
            )
        )
    return out


def describe_group_configs(
    overrides: Mapping[str, str], broker_values: Mapping[str, Any], keys: Collection[str] | None = None
) -> list[DescribedConfig]:
    """Every group config (or only ``keys``), sorted by name, for a group with ``overrides``."""
    defaults = group_defaults(broker_values)
    out: list[DescribedConfig] = []
    for name in sorted(GROUP_CONFIG_DEF):
        if keys is not None and name not in keys:
            continue
        key = GROUP_CONFIG_DEF[name][0]
        override = overrides.get(name)
        if override is not None:
            value: str | None = override
            synonyms: tuple[tuple[str, str | None, ConfigSource], ...] = (
                (name, override, ConfigSource.GROUP_CONFIG),
            )
        else:
            value, synonyms = config_value_to_string(defaults[name], key.type), ()
        out.append(
            DescribedConfig(
                name=name,
                value=value,
                source=ConfigSource.GROUP_CONFIG if override is not None else ConfigSource.DEFAULT_CONFIG,
                read_only=False,
                is_sensitive=False,
                config_type=_TYPES.get(key.type, ConfigType.UNKNOWN),
                documentation=key.doc,
                synonyms=synonyms,
            )
        )
    return out
