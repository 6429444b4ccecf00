"""Configuration parsing for the client: Kafka's dotted keys, typed by their defaults.

Values may arrive as strings (Spark passes ``kafka.*`` options as strings); each known key is
coerced to the type of its default. Unknown keys are kept as given and logged at debug level so
Java-only settings do not break callers.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from spark_kafkalite.protocol.errors import InvalidConfigError

__all__ = [
    "COMMON_DEFAULTS",
    "SECURITY_PROTOCOLS",
    "REDACTED",
    "is_sensitive_config",
    "redact_config",
    "parse_config",
    "parse_bootstrap_servers",
    "parse_acks",
    "isolation_level_id",
]

log = logging.getLogger(__name__)

COMMON_DEFAULTS: dict[str, Any] = {
    "bootstrap.servers": "",
    "client.id": "spark-kafkalite",
    "request.timeout.ms": 30000,
    "retry.backoff.ms": 100,
    "retry.backoff.max.ms": 1000,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 1000,
    "socket.connection.setup.timeout.ms": 10000,
    "metadata.max.age.ms": 300000,
    "max.in.flight.requests.per.connection": 5,
    "security.protocol": "PLAINTEXT",
    "default.api.timeout.ms": 60000,
    # TLS (client/security/ssl_factory.py): librdkafka's names, then Java's PEM forms (KIP-651)
    "ssl.ca.location": None,
    "ssl.ca.pem": None,
    "ssl.certificate.location": None,
    "ssl.certificate.pem": None,
    "ssl.key.location": None,
    "ssl.key.pem": None,
    "ssl.key.password": None,
    "ssl.endpoint.identification.algorithm": "https",
    "enable.ssl.certificate.verification": True,
    "ssl.truststore.type": None,
    "ssl.truststore.location": None,
    "ssl.truststore.certificates": None,
    "ssl.truststore.password": None,
    "ssl.keystore.type": None,
    "ssl.keystore.location": None,
    "ssl.keystore.certificate.chain": None,
    "ssl.keystore.key": None,
    "ssl.keystore.password": None,
    # SASL (client/security/security_config.py): Java's sasl.mechanism / sasl.jaas.config and
    # librdkafka's sasl.mechanisms / sasl.username / sasl.password
    "sasl.mechanism": None,
    "sasl.mechanisms": None,
    "sasl.jaas.config": None,
    "sasl.username": None,
    "sasl.password": None,
}

#: ``security.protocol`` values (Kafka's ``SecurityProtocol``; librdkafka takes any case).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

REDACTED = "*********(redacted)"
"""What a secret value is replaced with (Spark's ``Utils.REDACTION_REPLACEMENT_TEXT``)."""

# Kafka's PASSWORD-typed client configs (``SslConfigs``, ``SaslConfigs``) and librdkafka's
# secrets, plus Spark's default ``spark.redaction.regex`` on the key for anything else.
_SENSITIVE_KEYS = frozenset(
    {
        "sasl.jaas.config",
        "sasl.password",
        "ssl.key.password",
        "ssl.key.pem",
        "ssl.keystore.key",
        "ssl.keystore.password",
        "ssl.keystore.certificate.chain",
        "ssl.truststore.password",
        "ssl.truststore.certificates",
    }
)
_SENSITIVE_KEY = re.compile(r"(?i)secret|password|token|access[.]?key|jaas")


def is_sensitive_config(key: str) -> bool:
    """True for a config (or ``kafka.``-prefixed Spark option) whose value must never be
    shown: Kafka's PASSWORD-typed configs, librdkafka's secrets, and keys matching Spark's
    default ``spark.redaction.regex`` (``(?i)secret|password|token|access[.]?key``) or ``jaas``."""
    name = str(key).lower()
    name = name[len("kafka.") :] if name.startswith("kafka.") else name
    return name in _SENSITIVE_KEYS or _SENSITIVE_KEY.search(name) is not None


def redact_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with every sensitive value (:func:`is_sensitive_config`) replaced by
    :data:`REDACTED`, for logs and error messages (Spark's ``Utils.redact``)."""
    return {k: (REDACTED if v is not None and is_sensitive_config(k) else v) for k, v in config.items()}


def _coerce(key: str, value: Any, default: Any) -> Any:
    if value is None:
        return default
    try:
        if isinstance(default, bool):
            if isinstance(value, str):
                lowered = value.strip().lower()
                if lowered not in ("true", "false"):
                    raise ValueError(value)
                return lowered == "true"
            return bool(value)
        if isinstance(default, int):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if isinstance(default, float):
            return float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidConfigError(f"invalid value {value!r} for {key}") from exc
    return value


def parse_config(user: Mapping[str, Any] | None, defaults: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """Merge ``user`` settings over ``COMMON_DEFAULTS`` and ``defaults``.

    Raises:
        InvalidConfigError: a known key has a value of the wrong type, ``bootstrap.servers`` is
            missing, or ``security.protocol`` is not one of :data:`SECURITY_PROTOCOLS` (the
            TLS and SASL settings are checked by the ``NetworkClient``, see
            ``client/security/security_config.py``).
    """
    merged: dict[str, Any] = dict(COMMON_DEFAULTS)
    merged.update(defaults)
    for key, value in (user or {}).items():
        if key in merged:
            merged[key] = _coerce(key, value, merged[key])
        else:
            shown = REDACTED if is_sensitive_config(key) else repr(value)
            log.debug("%s: ignoring unknown config %s=%s", kind, key, shown)
            merged[key] = value
    if not str(merged["bootstrap.servers"]).strip():
        raise InvalidConfigError(f"{kind}: bootstrap.servers is required")
    protocol = str(merged["security.protocol"]).strip().upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise InvalidConfigError(
            f"{kind}: invalid security.protocol {merged['security.protocol']!r}: use one of "
            + ", ".join(SECURITY_PROTOCOLS)
        )
    merged["security.protocol"] = protocol
    return merged


def parse_bootstrap_servers(value: str | list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` (or a list of ``host:port``) -> ``[(host, port), ...]``.

    Raises:
        InvalidConfigError: an entry lacks a valid port.
    """
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    out: list[tuple[str, int]] = []
    for raw in items:
        entry = raw.strip()
        if not entry:
            continue
        if "://" in entry:  # PLAINTEXT://host:port
            entry = entry.split("://", 1)[1]
        host, sep, port = entry.rpartition(":")
        if not sep or not port.isdigit():
            raise InvalidConfigError(f"bootstrap.servers entry {raw!r} is not host:port")
        out.append((host.strip("[]") or "127.0.0.1", int(port)))
    if not out:
        raise InvalidConfigError("bootstrap.servers is empty")
    return out


def parse_acks(value: Any) -> int:
    """``"all"``/``"-1"``/``-1`` -> -1, ``"1"``/``1`` -> 1, ``"0"``/``0`` -> 0.

    Raises:
        InvalidConfigError: any other value.
    """
    text = str(value).strip().lower()
    if text == "all":
        return -1
    if text in ("-1", "0", "1"):
        return int(text)
    raise InvalidConfigError(f"invalid acks {value!r}: use all, -1, 0 or 1")


_ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


def isolation_level_id(value: Any) -> int:
    """The wire id of an ``isolation.level`` setting: 0 read_uncommitted, 1 read_committed
    (Kafka ``IsolationLevel``).

    Raises:
        InvalidConfigError: any other value.
    """
    level = _ISOLATION_LEVELS.get(str(value).strip().lower())
    if level is None:
        raise InvalidConfigError(f"isolation.level must be read_uncommitted or read_committed, not {value!r}")
    return level
