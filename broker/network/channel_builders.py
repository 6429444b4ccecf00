"""Per-listener security settings (Kafka's ``ChannelBuilders`` + ``ListenerName.configPrefix``).

A listener's security protocol comes from ``listener.security.protocol.map``. Its TLS and SASL
settings are the broker keys, each overridable for one listener with the prefix
``listener.name.<listener lower-cased>.`` (e.g. ``listener.name.external.ssl.keystore.location``);
SASL JAAS entries exist only per listener and mechanism:
``listener.name.<listener>.<mechanism lower-cased>.sasl.jaas.config`` (Kafka's
``BrokerSecurityConfigs``, ``docs/security.html``).

PLAIN needs a ``PlainLoginModule`` entry whose ``user_<name>="<password>"`` options are the
accounts (Kafka's ``PlainServerCallbackHandler``); SCRAM credentials live in the cluster metadata,
so a SCRAM entry (``ScramLoginModule``) is optional on the server side.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.config_def import ConfigError
from broker.network.ssl_factory import create_client_ssl_context, create_server_ssl_context
from broker.server_configs import CONFIG_DEF
from spark_kafkalite.protocol.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    AppConfigurationEntry,
    JaasConfigError,
    single_login_module,
)

__all__ = [
    "LISTENER_PREFIX",
    "SUPPORTED_SASL_MECHANISMS",
    "ListenerSecurity",
    "InterBrokerSecurity",
    "inter_broker_security",
    "is_secret_key",
    "listener_security",
    "parse_listener_overrides",
]

LISTENER_PREFIX = "listener.name."
SUPPORTED_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOGIN_MODULES = {
    "PLAIN": PLAIN_LOGIN_MODULE,
    "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
    "SCRAM-SHA-512": SCRAM_LOGIN_MODULE,
}
JAAS_KEY = "sasl.jaas.config"
_OVERRIDABLE = frozenset(
    key
    for key in CONFIG_DEF
    if key.startswith("ssl.") or key in ("sasl.enabled.mechanisms", "sasl.server.max.receive.size")
)


def is_secret_key(key: str) -> bool:
    """True for keys whose values must never be logged or returned: ``*.password``,
    ``sasl.jaas.config``, ``ssl.keystore.key`` (with or without a listener prefix)."""
    return key.endswith((".password", JAAS_KEY, "ssl.keystore.key"))


@dataclass(frozen=True)
class ListenerOverrides:
    """Parsed ``listener.name.<listener>.*`` keys of one listener.

    Attributes:
        values: base key -> typed value.
        jaas: mechanism (upper case) -> its JAAS entry.
        raw_keys: base key (or ``<mech>.sasl.jaas.config``) -> the full key as written.
    """

    values: dict[str, Any] = field(default_factory=dict)
    jaas: dict[str, AppConfigurationEntry] = field(default_factory=dict)
    raw_keys: dict[str, str] = field(default_factory=dict)


def parse_listener_overrides(props: Mapping[str, str]) -> dict[str, ListenerOverrides]:
    """Collect every ``listener.name.<listener>.<key>`` of ``props`` by listener (upper case).

    Raises:
        ConfigError: naming the full key: not a per-listener key, a bad value, an unsupported
            mechanism in a JAAS key, or a JAAS value that does not parse.
    """
    result: dict[str, ListenerOverrides] = {}
    for full_key, raw in props.items():
        if not full_key.startswith(LISTENER_PREFIX):
            continue
        listener, _, rest = full_key[len(LISTENER_PREFIX) :].partition(".")
        if not listener or not rest:
            raise ConfigError(full_key, "expected listener.name.<listener>.<key>")
        overrides = result.setdefault(listener.upper(), ListenerOverrides())
        if rest.endswith("." + JAAS_KEY):
            mechanism = rest[: -len(JAAS_KEY) - 1].upper()
            if mechanism not in SUPPORTED_SASL_MECHANISMS:
                raise ConfigError(
                    full_key,
                    f"unsupported SASL mechanism {mechanism!r} (supported: {', '.join(SUPPORTED_SASL_MECHANISMS)})",
                )
            try:
                jaas = single_login_module(raw)
            except JaasConfigError as exc:
                raise ConfigError(full_key, f"invalid JAAS configuration: {exc}") from None
            if jaas.login_module != _LOGIN_MODULES[mechanism]:
                raise ConfigError(full_key, f"{mechanism} needs the login module {_LOGIN_MODULES[mechanism]}")
            overrides.jaas[mechanism] = jaas
            overrides.raw_keys[f"{mechanism}.{JAAS_KEY}"] = full_key
            continue
        if rest not in _OVERRIDABLE:
            raise ConfigError(full_key, f"{rest!r} cannot be set per listener (or is not a known key)")
        try:
            overrides.values[rest] = CONFIG_DEF[rest].parse(raw)
        except ConfigError as exc:
            raise ConfigError(full_key, str(exc).partition(": ")[2]) from None
        overrides.raw_keys[rest] = full_key
    return result


@dataclass(frozen=True)
class ListenerSecurity:
    """How one listener authenticates its connections.

    Attributes:
        listener_name: e.g. ``SASL_SSL``.
        security_protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
        ssl_context: the server TLS context (SSL and SASL_SSL), else None.
        sasl_mechanisms: enabled mechanisms (SASL protocols), in configured order.
        plain_users: PLAIN accounts user -> password (from the JAAS ``user_<name>`` options).
        sasl_max_receive_size: ``sasl.server.max.receive.size`` (bytes, before authentication).
        failed_authentication_delay_ms: ``connection.failed.authentication.delay.ms``.
    """

    listener_name: str
    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    sasl_max_receive_size: int = 524288
    failed_authentication_delay_ms: int = 100

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def listener_security(
    listener_name: str, security_protocol: str, values: Mapping[str, Any], overrides: ListenerOverrides | None
) -> ListenerSecurity:
    """Resolve and validate one listener's security (overrides win over broker keys).

    Raises:
        ConfigError: TLS key/trust store problems (see :mod:`broker.network.ssl_factory`), no or
            unsupported SASL mechanisms, PLAIN without a JAAS entry or without ``user_`` accounts.
    """
    overrides = overrides or ListenerOverrides()
    resolved = {**values, **overrides.values}

    def key_of(key: str) -> str:
        return overrides.raw_keys.get(key, key)

    context = None
    if security_protocol in ("SSL", "SASL_SSL"):
        context = create_server_ssl_context(resolved, key_of)
    mechanisms: tuple[str, ...] = ()
    plain_users: dict[str, str] = {}
    if security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanisms = tuple(m for m in resolved["sasl.enabled.mechanisms"] if m)
        if not mechanisms:
            raise ConfigError(
                key_of("sasl.enabled.mechanisms"), f"listener {listener_name} enables no mechanism"
            )
        for mechanism in mechanisms:
            if mechanism not in SUPPORTED_SASL_MECHANISMS:
                raise ConfigError(
                    key_of("sasl.enabled.mechanisms"),
                    f"{mechanism} is not supported (supported: {', '.join(SUPPORTED_SASL_MECHANISMS)})",
                )
        if "PLAIN" in mechanisms:
            jaas_key = f"{LISTENER_PREFIX}{listener_name.lower()}.plain.{JAAS_KEY}"
            jaas = overrides.jaas.get("PLAIN")
            if jaas is None:
                raise ConfigError(jaas_key, "PLAIN is enabled but the listener has no PlainLoginModule entry")
            plain_users = {k[len("user_") :]: v for k, v in jaas.options.items() if k.startswith("user_")}
            if not plain_users or "" in plain_users:
                raise ConfigError(jaas_key, 'PLAIN needs at least one user_<name>="<password>" option')
    return ListenerSecurity(
        listener_name=listener_name,
        security_protocol=security_protocol,
        ssl_context=context,
        sasl_mechanisms=mechanisms,
        plain_users=plain_users,
        sasl_max_receive_size=int(resolved["sasl.server.max.receive.size"]),
        failed_authentication_delay_ms=int(resolved["connection.failed.authentication.delay.ms"]),
    )


@dataclass(frozen=True)
class InterBrokerSecurity:
    """How this broker connects to the other brokers' inter-broker listener.

    Attributes:
        security_protocol: the inter-broker listener's protocol (not PLAINTEXT).
        ssl_context: client TLS context (SSL, SASL_SSL), else None.
        sasl_mechanism: ``sasl.mechanism.inter.broker.protocol`` (SASL protocols), else None.
        username / password: from that mechanism's JAAS entry on the listener.
    """

    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)


def inter_broker_security(
    listener_name: str, security_protocol: str, values: Mapping[str, Any], overrides: ListenerOverrides | None
) -> InterBrokerSecurity | None:
    """The client side of the inter-broker listener (None for PLAINTEXT), from the same
    per-listener keys as its server side (Kafka's ``ChannelBuilders.clientChannelBuilder`` with
    the listener prefix).

    Raises:
        ConfigError: no trust store for TLS; a SASL mechanism not enabled on the listener or
            without a JAAS entry holding ``username`` and ``password``.
    """
    if security_protocol == "PLAINTEXT":
        return None
    overrides = overrides or ListenerOverrides()
    resolved = {**values, **overrides.values}

    def key_of(key: str) -> str:
        return overrides.raw_keys.get(key, key)

    context = None
    if security_protocol in ("SSL", "SASL_SSL"):
        context = create_client_ssl_context(resolved, key_of)
    if security_protocol == "SSL":
        return InterBrokerSecurity(security_protocol, context)
    mechanism = str(resolved["sasl.mechanism.inter.broker.protocol"])
    enabled = [m for m in resolved["sasl.enabled.mechanisms"] if m]
    if mechanism not in enabled:
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol",
            f"{mechanism} is not enabled on the inter-broker listener {listener_name} ({', '.join(enabled)})",
        )
    jaas_key = f"{LISTENER_PREFIX}{listener_name.lower()}.{mechanism.lower()}.{JAAS_KEY}"
    jaas = overrides.jaas.get(mechanism)
    if jaas is None or not jaas.options.get("username") or not jaas.options.get("password"):
        raise ConfigError(
            jaas_key, "inter-broker SASL needs username and password options in this JAAS entry"
        )
    return InterBrokerSecurity(
        security_protocol, context, mechanism, jaas.options["username"], jaas.options["password"]
    )
