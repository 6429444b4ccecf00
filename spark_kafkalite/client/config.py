"""Configuration parsing for the client: Kafka's dotted keys, typed by their defaults.

Values may arrive as strings (Spark passes ``kafka.*`` options as strings); each known key is
coerced to the type of its default. Unknown keys are kept as given and logged at debug level so
Java-only settings do not break callers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from spark_kafkalite.protocol.errors import InvalidConfigError

__all__ = ["COMMON_DEFAULTS", "parse_config", "parse_bootstrap_servers", "parse_acks", "isolation_level_id"]

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
}


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
            missing, or ``security.protocol`` is not PLAINTEXT.
    """
    merged: dict[str, Any] = dict(COMMON_DEFAULTS)
    merged.update(defaults)
    for key, value in (user or {}).items():
        if key in merged:
            merged[key] = _coerce(key, value, merged[key])
        else:
            log.debug("%s: ignoring unknown config %s=%r", kind, key, value)
            merged[key] = value
    if not str(merged["bootstrap.servers"]).strip():
        raise InvalidConfigError(f"{kind}: bootstrap.servers is required")
    if str(merged["security.protocol"]).upper() != "PLAINTEXT":
        raise InvalidConfigError(f"{kind}: only security.protocol=PLAINTEXT is supported")
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
