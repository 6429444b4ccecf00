"""Typed broker configuration using Kafka's keys (``KafkaConfig`` in Kafka).

Every key is declared once in :mod:`broker.config_def` with a type, a default, a doc string and a
validator. A properties file (Java ``.properties`` syntax) plus ``key=value`` overrides are parsed
into a :class:`KafkaConfig`; unknown keys and bad values raise :class:`ConfigError` naming the key.
The keys the broker uses are exposed as typed properties.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from broker.config_def import INT_MAX, LONG_MAX, ConfigError, ConfigKey, parse_list
from broker.log.log_config import LogConfig
from broker.log.log_tasks import LogTaskSettings
from broker.network.channel_builders import (
    LISTENER_PREFIX,
    InterBrokerSecurity,
    ListenerSecurity,
    inter_broker_security,
    is_secret_key,
    listener_security,
    parse_listener_overrides,
)
from broker.network.connection_quotas import parse_per_ip_overrides
from broker.network.endpoint import Endpoint
from broker.server_configs import CONFIG_DEF
from spark_kafkalite.protocol.properties import parse_properties as _parse_properties

__all__ = [
    "log_config_from",
    "log_task_settings_from",
    "ConfigError",
    "ConfigKey",
    "CONFIG_DEF",
    "KafkaConfig",
    "LONG_MAX",
    "INT_MAX",
    "parse_properties",
    "parse_listeners",
    "parse_overrides",
]

# ---------------------------------------------------------------------------------------------
# properties files


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """Parse Java ``.properties`` text (:func:`spark_kafkalite.protocol.properties.parse_properties`).

    Raises:
        ConfigError: a line has an empty key (named by its line number in ``source``).
    """
    try:
        return _parse_properties(text, source)
    except ValueError as exc:
        where, _, problem = str(exc).partition(": ")
        raise ConfigError(where, problem) from None


# ---------------------------------------------------------------------------------------------
# listeners


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]+\]|[^:\[\]/]*):(-?\d+)$")


def parse_listeners(key: str, items: Iterable[str], protocol_map: Mapping[str, str]) -> list[Endpoint]:
    """Parse listener strings (Kafka's ``CoreUtils.listenerListToEndPoints``).

    Raises:
        ConfigError: a malformed entry, a port out of range, a duplicate listener name, or a
            listener name missing from ``protocol_map``.
    """
    endpoints: list[Endpoint] = []
    for item in items:
        if not item:
            continue
        match = _LISTENER_RE.match(item)
        if match is None:
            raise ConfigError(key, f"invalid listener {item!r}; expected NAME://host:port")
        name, host, port_text = match.group(1).upper(), match.group(2), match.group(3)
        host = host.strip("[]")
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"port {port} out of range in {item!r}")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(key, f"listener name {name!r} is not in listener.security.protocol.map")
        if any(e.listener_name == name for e in endpoints):
            raise ConfigError(key, f"duplicate listener name {name!r}")
        endpoints.append(Endpoint(name, host, port, protocol))
    return endpoints


def _parse_protocol_map(text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in parse_list(text):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name or not protocol:
            raise ConfigError(
                "listener.security.protocol.map", f"invalid entry {item!r}; expected NAME:PROTOCOL"
            )
        if protocol.upper() not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError("listener.security.protocol.map", f"unknown security protocol {protocol!r}")
        result[name.strip().upper()] = protocol.strip().upper()
    return result


# ---------------------------------------------------------------------------------------------
# the config


class KafkaConfig:
    """Validated broker configuration. ``values`` maps every known key to its typed value
    (defaults filled in); ``explicit`` holds the keys that were set.

    Raises (constructor):
        ConfigError: an unknown key, an unparsable or out-of-range value, or an inconsistent
            combination (e.g. missing node.id, advertised listener without a listener).
    """

    def __init__(self, props: Mapping[str, str]) -> None:
        values: dict[str, Any] = {key: spec.default for key, spec in CONFIG_DEF.items()}
        for key, raw in props.items():
            if key.startswith(LISTENER_PREFIX):
                continue  # per-listener security keys: parse_listener_overrides
            spec = CONFIG_DEF.get(key)
            if spec is None:
                raise ConfigError(key, "unknown configuration key")
            values[key] = spec.parse(raw)
        self.values = values
        self.explicit = frozenset(props)
        self.listener_props = {k: v for k, v in props.items() if k.startswith(LISTENER_PREFIX)}
        self.listener_overrides = parse_listener_overrides(props)
        self._validate()

    # -- construction helpers ------------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | os.PathLike[str], overrides: Iterable[str] = ()) -> KafkaConfig:
        """Load ``path`` and apply ``key=value`` overrides (later wins).

        Raises:
            ConfigError: unreadable file, malformed override, unknown key or bad value.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError("--config", f"cannot read {path}: {exc.strerror or exc}") from None
        props = parse_properties(text, str(path))
        props.update(parse_overrides(overrides))
        return cls(props)

    # -- validation ---------------------------------------------------------------------
    def _validate(self) -> None:
        v = self.values
        node_id, broker_id = v["node.id"], v["broker.id"]
        if node_id < 0 and broker_id >= 0:
            v["node.id"] = node_id = broker_id
        if node_id < 0:
            raise ConfigError("node.id", "must be set to a non-negative integer")
        if broker_id >= 0 and broker_id != node_id:
            raise ConfigError("broker.id", f"{broker_id} does not match node.id {node_id}")
        if "broker" not in v["process.roles"]:
            raise ConfigError(
                "process.roles", "this server needs the broker role (controller-only is not supported yet)"
            )
        self.protocol_map = _parse_protocol_map(v["listener.security.protocol.map"])
        self.listeners = parse_listeners("listeners", v["listeners"], self.protocol_map)
        if not self.listeners:
            raise ConfigError("listeners", "at least one listener is required")
        advertised = v["advertised.listeners"]
        parsed = parse_listeners("advertised.listeners", advertised or [], self.protocol_map)
        if not parsed:  # unset or empty (``advertised.listeners=``): default to listeners
            self.advertised_listeners = list(self.listeners)
        else:
            self.advertised_listeners = parsed
            names = {e.listener_name for e in self.listeners}
            for endpoint in self.advertised_listeners:
                if endpoint.listener_name not in names:
                    raise ConfigError(
                        "advertised.listeners",
                        f"listener {endpoint.listener_name} is not one of listeners ({', '.join(sorted(names))})",
                    )
        dirs = v["log.dirs"] if v["log.dirs"] is not None else [v["log.dir"]]
        dirs = [d for d in dirs if d]
        if not dirs:
            raise ConfigError("log.dirs", "at least one log directory is required")
        self.log_dirs = [Path(d) for d in dirs]
        self._validate_quorum(v)
        self._validate_connection_limits(v)
        self._validate_consumer_group_bounds(v)
        self._validate_security(v)

    def _validate_security(self, v: dict[str, Any]) -> None:
        """Each broker listener's TLS/SASL settings (:mod:`broker.network.channel_builders`);
        the controller listener is the Raft port, protected by ``controller.quorum.password``
        rather than TLS, so it must map to PLAINTEXT. The broker's own connections to the other
        brokers (replica fetchers, transaction markers) use the inter-broker listener's protocol
        (``inter_broker_security``, multi-node clusters only)."""
        names = {e.listener_name for e in self.listeners}
        for listener in self.listener_overrides:
            if listener not in names:
                raise ConfigError(
                    next(
                        k
                        for k in self.listener_props
                        if k[len(LISTENER_PREFIX) :].upper().startswith(listener + ".")
                    ),
                    f"listener {listener} is not one of listeners ({', '.join(sorted(names))})",
                )
        for name in self.controller_listener_names:
            if self.protocol_map[name] != "PLAINTEXT":
                raise ConfigError(
                    "listener.security.protocol.map",
                    f"controller listener {name} must be PLAINTEXT (the Raft port is secured by controller.quorum.password)",
                )
        self.listener_security: dict[str, ListenerSecurity] = {
            e.listener_name: listener_security(
                e.listener_name, e.security_protocol, v, self.listener_overrides.get(e.listener_name)
            )
            for e in self.broker_listeners
        }
        inter = self.inter_broker_listener_name
        # A single node never dials another broker: its inter-broker client side is not needed.
        self.inter_broker_security: InterBrokerSecurity | None = (
            inter_broker_security(inter, self.protocol_map[inter], v, self.listener_overrides.get(inter))
            if len(self.quorum_voters) > 1
            else None
        )

    @staticmethod
    def _validate_consumer_group_bounds(v: dict[str, Any]) -> None:
        """Kafka's ``GroupCoordinatorConfig`` checks of the KIP-848 defaults against their bounds."""
        for kind in ("session.timeout.ms", "heartbeat.interval.ms"):
            key, low, high = (
                f"group.consumer.{kind}",
                f"group.consumer.min.{kind}",
                f"group.consumer.max.{kind}",
            )
            if v[high] < v[low]:
                raise ConfigError(high, f"must be greater than or equal to {low}")
            if v[key] < v[low]:
                raise ConfigError(key, f"must be greater than or equal to {low}")
            if v[key] > v[high]:
                raise ConfigError(key, f"must be less than or equal to {high}")
        if v["group.consumer.heartbeat.interval.ms"] >= v["group.consumer.session.timeout.ms"]:
            raise ConfigError(
                "group.consumer.heartbeat.interval.ms", "must be less than group.consumer.session.timeout.ms"
            )

    def _validate_connection_limits(self, v: dict[str, Any]) -> None:
        """``max.connections.per.ip.overrides`` parses (hosts resolved once, as Kafka does), and
        ``max.connections.per.ip`` is 0 only with overrides (Kafka's ``KafkaConfig`` check)."""
        try:
            self.max_connections_per_ip_overrides = parse_per_ip_overrides(
                parse_list(v["max.connections.per.ip.overrides"])
            )
        except ValueError as exc:
            raise ConfigError("max.connections.per.ip.overrides", str(exc)) from None
        if v["max.connections.per.ip"] == 0 and not self.max_connections_per_ip_overrides:
            raise ConfigError(
                "max.connections.per.ip", "can be set to zero only if max.connections.per.ip.overrides is set"
            )

    def _validate_quorum(self, v: dict[str, Any]) -> None:
        """KRaft keys: ``controller.quorum.voters`` (``id@host:port``), ``controller.listener.names``
        (a listener of ``listeners``, bound for Raft; this node's voter entry is the address the
        other voters dial, usually the same host:port; never served to clients),
        ``inter.broker.listener.name`` (default: the first other listener)."""
        voters: dict[int, tuple[str, int]] = {}
        for item in v["controller.quorum.voters"]:
            if not item:
                continue
            node, sep, address = item.partition("@")
            host, colon, port = address.rpartition(":")
            try:
                voter_id, voter_port = int(node), int(port)
            except ValueError:
                voter_id = voter_port = -1
            if not sep or not colon or not host or voter_id < 0 or not 0 < voter_port <= 65535:
                raise ConfigError(
                    "controller.quorum.voters", f"invalid voter {item!r}; expected id@host:port"
                )
            if voter_id in voters:
                raise ConfigError("controller.quorum.voters", f"voter id {voter_id} is listed twice")
            voter_address = (host.strip("[]"), voter_port)
            for other_id, other_address in voters.items():
                if other_address == voter_address:
                    raise ConfigError(
                        "controller.quorum.voters",
                        f"voters {other_id} and {voter_id} share the address {address}; each needs its own",
                    )
            voters[voter_id] = voter_address
        self.quorum_voters = voters
        names = [n.upper() for n in v["controller.listener.names"] if n]
        self.controller_listener_names = names
        by_name = {e.listener_name: e for e in self.listeners}
        for name in names:
            if name not in by_name:
                raise ConfigError(
                    "controller.listener.names",
                    f"{name} is not one of listeners ({', '.join(sorted(by_name))})",
                )
        self.broker_listeners = [e for e in self.listeners if e.listener_name not in names]
        if not self.broker_listeners:
            raise ConfigError(
                "listeners", "at least one listener besides the controller listener is required"
            )
        self.advertised_listeners = [e for e in self.advertised_listeners if e.listener_name not in names]
        if not self.advertised_listeners:
            self.advertised_listeners = list(self.broker_listeners)
        self.controller_endpoint: Endpoint | None = None
        if voters:
            if "controller" not in v["process.roles"]:
                raise ConfigError("process.roles", "broker-only nodes are not supported yet: add controller")
            if self.node_id not in voters:
                raise ConfigError(
                    "controller.quorum.voters",
                    f"node.id {self.node_id} is not one of the voters {sorted(voters)}",
                )
            if not names:
                raise ConfigError(
                    "controller.listener.names", "required when controller.quorum.voters is set"
                )
            # The node binds its CONTROLLER listener; its voter entry is the address the other
            # voters dial, which may differ (a proxy or NAT in front of it), as in Kafka.
            self.controller_endpoint = by_name[names[0]]
        inter = v["inter.broker.listener.name"]
        if inter:
            inter = inter.upper()
            if inter not in {e.listener_name for e in self.broker_listeners}:
                raise ConfigError(
                    "inter.broker.listener.name",
                    f"{inter} is not one of the broker listeners "
                    f"({', '.join(e.listener_name for e in self.broker_listeners)})",
                )
        self.inter_broker_listener_name = inter or self.broker_listeners[0].listener_name

    # -- typed accessors ----------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def metadata_log_dir(self) -> Path:
        """The metadata dir: ``metadata.log.dir`` when set, else the first of ``log.dirs``
        (Kafka's ``KafkaConfig.metadataLogDir``). Holds the Raft journal of a quorum and the
        single-node broker's metadata files (ACLs, SCRAM credentials, topic configs)."""
        configured = self.values["metadata.log.dir"]
        return Path(configured) if configured else self.log_dirs[0]

    @property
    def node_id(self) -> int:
        return int(self.values["node.id"])

    @property
    def quorum_enabled(self) -> bool:
        """True when ``controller.quorum.voters`` is set (a Raft quorum, possibly of one)."""
        return bool(self.quorum_voters)

    @property
    def num_partitions(self) -> int:
        return int(self.values["num.partitions"])

    @property
    def default_replication_factor(self) -> int:
        return int(self.values["default.replication.factor"])

    @property
    def auto_create_topics_enable(self) -> bool:
        return bool(self.values["auto.create.topics.enable"])

    @property
    def delete_topic_enable(self) -> bool:
        return bool(self.values["delete.topic.enable"])

    @property
    def message_max_bytes(self) -> int:
        return int(self.values["message.max.bytes"])

    @property
    def socket_request_max_bytes(self) -> int:
        return int(self.values["socket.request.max.bytes"])

    @property
    def fetch_max_bytes(self) -> int:
        return int(self.values["fetch.max.bytes"])

    @property
    def broker_rack(self) -> str | None:
        return self.values["broker.rack"]

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms, else minutes, else hours (Kafka's precedence); -1 = forever."""
        v = self.values
        if v["log.retention.ms"] is not None:
            return int(v["log.retention.ms"])
        if v["log.retention.minutes"] is not None:
            minutes = int(v["log.retention.minutes"])
            return -1 if minutes < 0 else minutes * 60_000
        hours = int(v["log.retention.hours"])
        return -1 if hours < 0 else hours * 3_600_000

    @property
    def log_roll_ms(self) -> int:
        v = self.values
        if v["log.roll.ms"] is not None:
            return int(v["log.roll.ms"])
        return int(v["log.roll.hours"]) * 3_600_000

    @property
    def log_flush_interval_ms(self) -> int:
        value = self.values["log.flush.interval.ms"]
        return LONG_MAX if value is None else int(value)

    def describe(self) -> str:
        """All values as ``key = value`` lines (Kafka logs this at startup)."""

        def shown(key: str, value: Any) -> Any:
            secret = is_secret_key(key) or (key in CONFIG_DEF and CONFIG_DEF[key].type == "password")
            return "[hidden]" if secret and value is not None else value

        items = {**self.values, **self.listener_props}
        return "\n".join(f"\t{key} = {shown(key, items[key])}" for key in sorted(items))


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` override strings.

    Raises:
        ConfigError: an override without ``=`` or with an empty key.
    """
    result: dict[str, str] = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(item or "--override", "override must look like key=value")
        result[key] = value
    return result


def log_config_from(config: KafkaConfig) -> LogConfig:
    """The default ``LogConfig`` (Kafka's ``LogConfig.fromProps`` of
    ``KafkaConfig.extractLogConfigMap``) from broker keys (log.segment.bytes, log.index.interval.bytes,
    message.max.bytes, log.flush.interval.messages, log.index.size.max.bytes, log.roll.ms/hours,
    log.retention.ms/minutes/hours, log.retention.bytes, log.cleanup.policy,
    log.flush.interval.ms, min.insync.replicas, log.message.timestamp.before/after.max.ms,
    log.segment.delete.delay.ms, compression.type and its compression.*.level keys)."""
    flush_messages = config["log.flush.interval.messages"]
    flush_ms = config.log_flush_interval_ms
    return LogConfig(
        segment_bytes=config["log.segment.bytes"],
        index_interval_bytes=config["log.index.interval.bytes"],
        max_message_bytes=config.message_max_bytes,
        flush_interval_messages=None if flush_messages >= LONG_MAX else flush_messages,
        segment_index_bytes=config["log.index.size.max.bytes"],
        segment_ms=config.log_roll_ms,
        retention_ms=config.log_retention_ms,
        retention_bytes=config["log.retention.bytes"],
        cleanup_policy=tuple(config["log.cleanup.policy"]),
        flush_ms=None if flush_ms >= LONG_MAX else flush_ms,
        min_insync_replicas=config["min.insync.replicas"],
        message_timestamp_before_max_ms=config["log.message.timestamp.before.max.ms"],
        message_timestamp_after_max_ms=config["log.message.timestamp.after.max.ms"],
        file_delete_delay_ms=config["log.segment.delete.delay.ms"],
        compression_type=config["compression.type"],
        compression_gzip_level=config["compression.gzip.level"],
        compression_lz4_level=config["compression.lz4.level"],
        compression_zstd_level=config["compression.zstd.level"],
    )


def log_task_settings_from(config: KafkaConfig) -> LogTaskSettings:
    """Intervals of the log background jobs (log.retention.check.interval.ms,
    log.initial.task.delay.ms, log.flush.scheduler.interval.ms capped at 1 s, log.cleaner.backoff.ms)."""
    flush_check_ms = config["log.flush.scheduler.interval.ms"]
    return LogTaskSettings(
        retention_check_interval_ms=config["log.retention.check.interval.ms"],
        initial_task_delay_ms=config["log.initial.task.delay.ms"],
        flush_check_interval_ms=min(flush_check_ms, 1000, max(config.log_flush_interval_ms, 10)),
        cleaner_backoff_ms=config.values.get("log.cleaner.backoff.ms", 15000),
    )
