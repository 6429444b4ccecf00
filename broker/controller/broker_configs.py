"""BROKER config resources: which keys the controller accepts on a BROKER resource (Kafka's
``DynamicBrokerConfig.validate`` as called by ``ConfigAdminManager``), the key sets the broker's
:class:`~broker.dynamic_broker_config.DynamicBrokerConfig` applies live.

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
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.config_def import ConfigError, parse_list
from broker.controller.topic_configs import TOPIC_CONFIG_DEF
from broker.network.connection_quotas import parse_per_ip_overrides
from broker.server_configs import CONFIG_DEF, NO_EFFECT_SUFFIX
from spark_kafkalite.protocol.errors import InvalidRequestError

__all__ = [
    "DYNAMIC_LOG_CONFIGS",
    "DYNAMIC_CONNECTION_CONFIGS",
    "DYNAMIC_BROKER_CONFIGS",
    "validate_dynamic_broker_configs",
]

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
