"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig``): BROKER config resources altered
with AlterConfigs / IncrementalAlterConfigs, stored as ``ConfigRecord`` s in the cluster metadata
(resource name = a broker id for that broker, "" for the cluster-wide default) and applied
without a restart. Which keys may change, and the controller's check of a new set, are in
:mod:`broker.controller.broker_configs`.

The effective value of a key, most specific first: per-broker dynamic (DYNAMIC_BROKER_CONFIG), the
cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG), the properties file (STATIC_BROKER_CONFIG),
the default (DEFAULT_CONFIG).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.config import KafkaConfig
from broker.config_def import ConfigError
from broker.controller.broker_configs import DYNAMIC_BROKER_CONFIGS
from broker.controller.metadata_image import RESOURCE_TYPE_BROKER, MetadataImage
from broker.server_configs import CONFIG_DEF
from spark_kafkalite.protocol.configs import ConfigSource

__all__ = ["DynamicBrokerConfig"]

logger = logging.getLogger(__name__)


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
