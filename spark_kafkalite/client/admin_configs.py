"""Config and partition admin requests: value types, request builders and response parsing for
DescribeConfigs (key 32), AlterConfigs (33), IncrementalAlterConfigs (44, KIP-339) and
CreatePartitions (37). :class:`~spark_kafkalite.client.admin.KafkaAdminClient` sends them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.configs import AlterConfigOp, ConfigResourceType, ConfigSource
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested

__all__ = [
    "ConfigResource",
    "ConfigEntry",
    "ConfigSynonym",
    "ConfigSource",
    "AlterConfigOp",
    "RESOURCE_TOPIC",
    "RESOURCE_BROKER",
    "describe_configs_builder",
    "parse_describe_configs",
    "alter_configs_builder",
    "incremental_alter_configs_builder",
    "parse_alter_configs",
    "create_partitions_builder",
    "as_resource",
]

RESOURCE_TOPIC = int(ConfigResourceType.TOPIC)
RESOURCE_BROKER = int(ConfigResourceType.BROKER)


class ConfigResource(NamedTuple):
    """A config resource: ``resource_type`` 2 = TOPIC (name = topic), 4 = BROKER (name = the
    broker id as a string, or "" for the cluster-wide dynamic default), 32 = GROUP (name = the
    group id)."""

    resource_type: int
    name: str

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(RESOURCE_TOPIC, name)

    @classmethod
    def broker(cls, node_id: int) -> ConfigResource:
        return cls(RESOURCE_BROKER, str(node_id))


class ConfigSynonym(NamedTuple):
    """A value that a config takes or would take from another level (e.g. the broker key
    ``log.retention.hours`` behind a topic's ``retention.ms``)."""

    name: str
    value: str | None
    source: ConfigSource


class ConfigEntry(NamedTuple):
    """One described config (Java ``ConfigEntry``). ``is_default`` is ``source ==
    DEFAULT_CONFIG``; ``value`` is None for sensitive configs; ``synonyms`` are filled only when
    asked for; ``config_type`` is Kafka's type id (1 BOOLEAN ... 7 LIST), 0 when unknown."""

    name: str
    value: str | None
    source: ConfigSource
    is_default: bool
    read_only: bool
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()
    config_type: int = 0


def as_resource(resource: ConfigResource | str | tuple[int, str]) -> ConfigResource:
    """A plain string names a topic."""
    if isinstance(resource, str):
        return ConfigResource.topic(resource)
    return ConfigResource(int(resource[0]), str(resource[1]))


def _source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN


# -------------------------------------------------------------- DescribeConfigs


def describe_configs_builder(
    resources: Iterable[ConfigResource], keys: Iterable[str] | None, include_synonyms: bool
) -> RequestBuilder:
    """A DescribeConfigs request for ``resources`` (all keys when ``keys`` is None)."""
    items = list(resources)
    key_list = None if keys is None else tuple(keys)

    def build(version: int) -> Any:
        cls = request_class(ApiKey.DESCRIBE_CONFIGS, version)
        resource_cls = nested(cls, "DescribeConfigsResource")
        return make(
            cls,
            resources=tuple(
                resource_cls(resource_type=r.resource_type, resource_name=r.name, configuration_keys=key_list)
                for r in items
            ),
            include_synonyms=include_synonyms,
            include_documentation=False,
        )

    return RequestBuilder(ApiKey.DESCRIBE_CONFIGS, build)


def parse_describe_configs(
    response: Any,
) -> dict[ConfigResource, tuple[int, str | None, dict[str, ConfigEntry]]]:
    """``{resource: (error_code, error_message, {name: ConfigEntry})}``."""
    out: dict[ConfigResource, tuple[int, str | None, dict[str, ConfigEntry]]] = {}
    for result in response.results:
        entries: dict[str, ConfigEntry] = {}
        for c in result.configs:
            source = _source(int(c.config_source))
            entries[str(c.name)] = ConfigEntry(
                name=str(c.name),
                value=c.value,
                source=source,
                is_default=source == ConfigSource.DEFAULT_CONFIG,
                read_only=bool(c.read_only),
                is_sensitive=bool(c.is_sensitive),
                synonyms=tuple(
                    ConfigSynonym(str(s.name), s.value, _source(int(s.source))) for s in c.synonyms
                ),
                config_type=int(getattr(c, "config_type", 0)),
            )
        resource = ConfigResource(int(result.resource_type), str(result.resource_name))
        out[resource] = (int(result.error_code), result.error_message, entries)
    return out


# -------------------------------------------------------------- (Incremental)AlterConfigs


def alter_configs_builder(
    changes: Mapping[ConfigResource, Mapping[str, str]], validate_only: bool
) -> RequestBuilder:
    """A legacy AlterConfigs request: each resource's entries replace its whole override set."""
    items = [(r, dict(entries)) for r, entries in changes.items()]

    def build(version: int) -> Any:
        cls = request_class(ApiKey.ALTER_CONFIGS, version)
        resource_cls = nested(cls, "AlterConfigsResource")
        config_cls = nested(cls, "AlterableConfig")
        return make(
            cls,
            resources=tuple(
                resource_cls(
                    resource_type=r.resource_type,
                    resource_name=r.name,
                    configs=tuple(config_cls(name=k, value=str(v)) for k, v in entries.items()),
                )
                for r, entries in items
            ),
            validate_only=validate_only,
        )

    return RequestBuilder(ApiKey.ALTER_CONFIGS, build)


def _operation(value: Any) -> tuple[int, str | None]:
    """``"v"`` -> SET v; None -> DELETE; ``(op, v)`` with op an AlterConfigOp, its name or id."""
    if value is None:
        return AlterConfigOp.DELETE, None
    if isinstance(value, tuple):
        op, arg = value
        if isinstance(op, str):
            op = AlterConfigOp[op.upper()]
        op = AlterConfigOp(int(op))
        return op, None if op is AlterConfigOp.DELETE or arg is None else str(arg)
    return AlterConfigOp.SET, str(value)


def incremental_alter_configs_builder(
    changes: Mapping[ConfigResource, Mapping[str, Any]], validate_only: bool
) -> RequestBuilder:
    """An IncrementalAlterConfigs request; per key a value (SET), None (DELETE) or ``(op, value)``.

    Raises:
        KeyError / ValueError: an unknown operation name or id.
    """
    items = [(r, [(k, *_operation(v)) for k, v in entries.items()]) for r, entries in changes.items()]

    def build(version: int) -> Any:
        cls = request_class(ApiKey.INCREMENTAL_ALTER_CONFIGS, version)
        resource_cls = nested(cls, "AlterConfigsResource")
        config_cls = nested(cls, "AlterableConfig")
        return make(
            cls,
            resources=tuple(
                resource_cls(
                    resource_type=r.resource_type,
                    resource_name=r.name,
                    configs=tuple(config_cls(name=k, config_operation=int(op), value=v) for k, op, v in ops),
                )
                for r, ops in items
            ),
            validate_only=validate_only,
        )

    return RequestBuilder(ApiKey.INCREMENTAL_ALTER_CONFIGS, build)


def parse_alter_configs(response: Any) -> dict[ConfigResource, tuple[int, str | None]]:
    """``{resource: (error_code, error_message)}`` of an (Incremental)AlterConfigs response."""
    return {
        ConfigResource(int(r.resource_type), str(r.resource_name)): (int(r.error_code), r.error_message)
        for r in response.responses
    }


# -------------------------------------------------------------- CreatePartitions


def create_partitions_builder(
    new_totals: Mapping[str, int], timeout_ms: int, validate_only: bool
) -> RequestBuilder:
    """A CreatePartitions request growing each topic to its new total (broker-chosen replicas)."""
    items = [(str(t), int(n)) for t, n in new_totals.items()]

    def build(version: int) -> Any:
        cls = request_class(ApiKey.CREATE_PARTITIONS, version)
        topic_cls = nested(cls, "CreatePartitionsTopic")
        return make(
            cls,
            topics=tuple(topic_cls(name=t, count=n, assignments=None) for t, n in items),
            timeout=int(timeout_ms),
            validate_only=validate_only,
        )

    return RequestBuilder(ApiKey.CREATE_PARTITIONS, build)
