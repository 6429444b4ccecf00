"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig``): BROKER config resources altered
with AlterConfigs / IncrementalAlterConfigs, stored as ``ConfigRecord`` s in the cluster metadata
(resource name = a broker id for that broker, "" for the cluster-wide default) and applied
without a restart.

Which keys may change (:func:`validate_dynamic_broker_configs`):

* the broker defaults of topic configs (Kafka's ``DynamicLogConfig``: ``log.retention.ms``,
  ``log.segment.bytes``, ``message.max.bytes``, ``log.cleanup.policy``, ``compression.type``, ...,
  every broker synonym of a topic config): the broker recomputes every topic's ``LogConfig``;
* the connection limits ``max.connections``, ``max.connections.per.ip`` and
  ``max.connections.per.ip.overrides`` (Kafka's ``SocketServer`` reconfigurable configs): the
  socket server's ``ConnectionQuotas`` take them;
* keys Kafka updates dynamically that this broker accepts without using (``log.cleaner.threads``,
  ``num.recovery.threads.per.data.dir``, ``producer.id.expiration.ms``, ...): stored and described;
* keys this broker does not know (``background.threads``, ``sasl.kerberos.*``): stored as Kafka
  stores custom keys.

Every other known key (``log.dirs``, ``listeners``, ``num.io.threads``, ...) is refused with
INVALID_REQUEST "Cannot update these configs dynamically: Set(k)" (Kafka's wording; ``num.io.threads``,
``num.replica.fetchers`` and the listener and TLS keys Kafka can change, this broker cannot
without a restart).

The effective value of a key, most specific first: per-broker dynamic (DYNAMIC_BROKER_CONFIG), the
cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties file (STATIC_BROKER_CONFIG),
the default (DEFAULT_CONFIG).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.config import KafkaConfig
from broker.config_def import ConfigError, parse_list
from broker.controller.metadata_image import RESOURCE_TYPE_BROKER, MetadataImage
from broker.controller.topic_configs import TOPIC_CONFIG_DEF
from broker.network.connection_quotas import parse_per_ip_overrides
from broker.server_configs import CONFIG_DEF, NO_EFFECT_SUFFIX
from spark_kafkalite.protocol.configs import ConfigSource
from spark_kafkalite.protocol.errors import InvalidRequestError

__all__ = [
    "DYNAMIC_LOG_CONFIGS",
    "DYNAMIC_CONNECTION_CONFIGS",
    "DYNAMIC_BROKER_CONFIGS",
    "DynamicBrokerConfig",
    "validate_dynamic_broker_configs",
]

logger = logging.getLogger(__name__)

#: Broker keys that default a topic config (Kafka's ``DynamicLogConfig.ReconfigurableConfigs``).
DYNAMIC_LOG_CONFIGS = frozenset(
    key for spec in TOPIC_CONFIG_DEF.values() for key, _ in spec.synonyms if key in CONFIG_DEF
)

#: Connection limits applied live to the socket server's ``ConnectionQuotas`` (Kafka's
#: ``SocketServer.ReconfigurableConfigs``).
DYNAMIC_CONNECTION_CONFIGS = frozenset(
    {"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"}
)

#: Other keys Kafka updates dynamically (``LogCleaner``, ``DynamicThreadPool``, ``SocketServer``,
#: ``DynamicProducerStateManagerConfig`` reconfigurable configs) that this broker accepts without
#: using them.
_KAFKA_DYNAMIC_UNUSED = frozenset(
    name
    for name in (
        "log.cleaner.threads",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "num.network.threads",
        "num.recovery.threads.per.data.dir",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
    )
    if name in CONFIG_DEF and CONFIG_DEF[name].doc.endswith(NO_EFFECT_SUFFIX)
)

#: Known keys that may be altered on a BROKER resource.
DYNAMIC_BROKER_CONFIGS = DYNAMIC_LOG_CONFIGS | DYNAMIC_CONNECTION_CONFIGS | _KAFKA_DYNAMIC_UNUSED


def _scala_set(names: list[str]) -> str:
    return f"Set({', '.join(sorted(names))})"


def validate_dynamic_broker_configs(configs: Mapping[str, str]) -> None:
    """Check a BROKER resource's whole new dynamic config set (``DynamicBrokerConfig.validate``,
    refused as INVALID_REQUEST as Kafka's ``ConfigAdminManager`` does).

    Raises:
        InvalidRequestError: a known key that cannot change without a restart ("Cannot update
            these configs dynamically: Set(k)"), or a value that does not parse or is out of
            range, or that the topic configs it defaults cannot honour.
    """
    static = [name for name in configs if name in CONFIG_DEF and name not in DYNAMIC_BROKER_CONFIGS]
    if static:
        raise InvalidRequestError(f"Cannot update these configs dynamically: {_scala_set(static)}")
    if configs.get("max.connections.per.ip", "").strip() == "0" and not configs.get(
        "max.connections.per.ip.overrides"
    ):
        raise InvalidRequestError(
            "Invalid value 0 for configuration max.connections.per.ip: can be set to zero only if "
            "max.connections.per.ip.overrides is set"
        )
    for name, raw in configs.items():
        spec = CONFIG_DEF.get(name)
        if spec is None:
            continue  # a custom key: stored as given
        try:
            value = spec.parse(raw)
            if name == "max.connections.per.ip.overrides":
                parse_per_ip_overrides(parse_list(value))
        except (ConfigError, ValueError) as exc:
            raise InvalidRequestError(f"Invalid value {raw} for configuration {name}: {exc}") from None
        for topic_spec in TOPIC_CONFIG_DEF.values():
            for key, factor in topic_spec.synonyms:
                if key != name or topic_spec.unsupported is None or value is None:
                    continue
                converted = value if factor == 1 or value < 0 else value * factor
                problem = topic_spec.unsupported(converted)
                if problem:
                    raise InvalidRequestError(f"Invalid value {raw} for configuration {name}: {problem}")


class DynamicBrokerConfig:
    """The dynamic layer over a broker's :class:`~broker.config.KafkaConfig`.

    :meth:`update` writes the effective value of every dynamic key into ``config.values`` (the
    one mapping every component reads), so the broker defaults of topic configs follow the
    cluster metadata; ``static_values`` keeps what the properties file gave.
    """

    def __init__(self, config: KafkaConfig, node_id: int) -> None:
        self.config = config
        self.node_id = node_id
        self.static_values: dict[str, Any] = dict(config.values)
        self.per_broker: Mapping[str, str] = {}
        self.cluster_default: Mapping[str, str] = {}

    def update(self, image: MetadataImage) -> set[str]:
        """Take this broker's and the cluster-wide dynamic configs from ``image``; returns the
        keys whose effective value changed (empty when neither resource changed)."""
        per_broker = image.resource_config(RESOURCE_TYPE_BROKER, str(self.node_id))
        cluster_default = image.resource_config(RESOURCE_TYPE_BROKER, "")
        if per_broker is self.per_broker and cluster_default is self.cluster_default:
            return set()
        self.per_broker, self.cluster_default = per_broker, cluster_default
        values = self.config.values
        changed: set[str] = set()
        for name in DYNAMIC_BROKER_CONFIGS:
            raw = per_broker.get(name, cluster_default.get(name))
            value = self.static_values[name]
            if raw is not None:
                try:
                    value = CONFIG_DEF[name].parse(raw)
                except ConfigError as exc:  # validated when stored; keep the static value
                    logger.warning("ignoring the dynamic value of %s: %s", name, exc)
            if values[name] != value:
                values[name] = value
                changed.add(name)
        return changed

    def synonyms(self, name: str) -> list[tuple[str, Any, ConfigSource]]:
        """(name, typed value, source) of every level that sets broker key ``name``, most
        specific first (the synonyms DescribeConfigs reports)."""
        out: list[tuple[str, Any, ConfigSource]] = []
        spec = CONFIG_DEF[name]
        if name in self.per_broker:
            out.append((name, spec.parse(self.per_broker[name]), ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in self.cluster_default:
            out.append(
                (name, spec.parse(self.cluster_default[name]), ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
            )
        if name in self.config.explicit:
            out.append((name, self.static_values[name], ConfigSource.STATIC_BROKER_CONFIG))
        if spec.default is not None:
            out.append((name, spec.default, ConfigSource.DEFAULT_CONFIG))
        return out
