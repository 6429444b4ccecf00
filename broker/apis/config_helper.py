"""Describing configs with their sources and synonyms (Kafka's ``ConfigHelper``).

TOPIC resources list every topic config (:data:`~broker.controller.topic_configs.TOPIC_CONFIG_DEF`):
the value is the topic override (source DYNAMIC_TOPIC_CONFIG), else the value derived from the
first broker synonym that has one (STATIC_BROKER_CONFIG when set in the broker's properties,
DEFAULT_CONFIG otherwise). Synonyms, most to least specific: the override, broker keys set in the
properties file, then broker keys' defaults (``ConfigHelper.createTopicConfigEntry``).

BROKER resources list the broker's static keys (read-only: this broker has no dynamic broker
configs), STATIC_BROKER_CONFIG for keys set in the properties file, DEFAULT_CONFIG otherwise.
Password keys are sensitive and described with a null value.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from broker.config import KafkaConfig
from broker.controller.topic_configs import TOPIC_CONFIG_DEF, broker_default, config_value_to_string
from broker.server_configs import CONFIG_DEF
from spark_kafkalite.protocol.configs import ConfigSource, ConfigType

__all__ = [
    "ConfigSource",
    "ConfigType",
    "DescribedConfig",
    "describe_topic_configs",
    "describe_broker_configs",
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


def _broker_string(config: KafkaConfig, key: str) -> str | None:
    spec = CONFIG_DEF[key]
    if spec.type == "password":
        return None
    return config_value_to_string(config.values.get(key), spec.type)


def describe_topic_configs(
    config: KafkaConfig, overrides: Mapping[str, str], keys: Collection[str] | None = None
) -> list[DescribedConfig]:
    """Every topic config (or only ``keys``; unknown keys are skipped, as in Kafka), sorted by
    name, for a topic with ``overrides``."""
    out: list[DescribedConfig] = []
    for name in sorted(TOPIC_CONFIG_DEF):
        if keys is not None and name not in keys:
            continue
        spec = TOPIC_CONFIG_DEF[name]
        synonyms: list[tuple[str, str | None, ConfigSource]] = []
        override = overrides.get(name)
        if override is not None:
            synonyms.append((name, override, ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_keys = [key for key, _ in spec.synonyms if key in CONFIG_DEF]
        synonyms.extend(
            (key, _broker_string(config, key), ConfigSource.STATIC_BROKER_CONFIG)
            for key in broker_keys
            if key in config.explicit
        )
        synonyms.extend(
            (
                key,
                config_value_to_string(CONFIG_DEF[key].default, CONFIG_DEF[key].type),
                ConfigSource.DEFAULT_CONFIG,
            )
            for key in broker_keys
            if CONFIG_DEF[key].default is not None
        )
        if override is not None:
            value: str | None = override
        else:
            value = config_value_to_string(broker_default(name, config.values)[0], spec.type)
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


def describe_broker_configs(
    config: KafkaConfig, keys: Collection[str] | None = None
) -> list[DescribedConfig]:
    """Every broker config (or only ``keys``), sorted by name; all read-only."""
    out: list[DescribedConfig] = []
    for name in sorted(CONFIG_DEF):
        if keys is not None and name not in keys:
            continue
        spec = CONFIG_DEF[name]
        source = ConfigSource.STATIC_BROKER_CONFIG if name in config.explicit else ConfigSource.DEFAULT_CONFIG
        value = _broker_string(config, name)
        out.append(
            DescribedConfig(
                name=name,
                value=value,
                source=source,
                read_only=True,
                is_sensitive=spec.type == "password",
                config_type=_TYPES.get(spec.type, ConfigType.UNKNOWN),
                documentation=spec.doc,
                synonyms=((name, value, source),) if value is not None or name in config.explicit else (),
            )
        )
    return out
