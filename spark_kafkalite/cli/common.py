"""Helpers every ``kafkalite`` command uses: the bootstrap option, client timeouts, ``k=v``
options, record formatting and the user-facing :class:`CliError`."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CliError",
    "ENV_BOOTSTRAP",
    "CLIENT_TIMEOUTS",
    "key_values",
    "bootstrap",
    "client_config",
    "add_bootstrap",
    "format_record",
]

ENV_BOOTSTRAP = "KAFKALITE_BOOTSTRAP_SERVERS"
CLIENT_TIMEOUTS = {  # fail fast on an unreachable cluster (Kafka's defaults wait a minute)
    "default.api.timeout.ms": "15000",
    "request.timeout.ms": "10000",
    "socket.connection.setup.timeout.ms": "5000",
}


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


def key_values(pairs: Sequence[str] | None, what: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{what} {pair!r} is not key=value")
        result[key.strip()] = value
    return result


def bootstrap(args: argparse.Namespace) -> str:
    servers = args.bootstrap_server or os.environ.get(ENV_BOOTSTRAP, "")
    if not servers:
        raise CliError(f"--bootstrap-server is required (or set ${ENV_BOOTSTRAP})")
    return servers


def add_bootstrap(parser: argparse.ArgumentParser, required_hint: bool = True) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help=f"broker(s) to connect to (default ${ENV_BOOTSTRAP})" if required_hint else "broker(s) to use",
    )


def format_record(record: Any, props: dict[str, str]) -> str:
    separator = props.get("key.separator", "\t")
    parts: list[str] = []

    def enabled(name: str) -> bool:
        return props.get(name, "false").strip().lower() == "true"

    if enabled("print.timestamp"):
        kind = {0: "CreateTime", 1: "LogAppendTime"}.get(record.timestamp_type, "NoTimestampType")
        parts.append(f"{kind}:{record.timestamp_ms}")
    if enabled("print.partition"):
        parts.append(f"Partition:{record.partition}")
    if enabled("print.offset"):
        parts.append(f"Offset:{record.offset}")
    if enabled("print.key"):
        parts.append("null" if record.key is None else record.key.decode("utf-8", errors="replace"))
    parts.append("null" if record.value is None else record.value.decode("utf-8", errors="replace"))
    return separator.join(parts)


def client_config(
    args: argparse.Namespace,
    client_id: str,
    settings: Mapping[str, Any] | None = None,
    overrides: Sequence[str] | None = None,
    overrides_option: str = "",
) -> dict[str, Any]:
    """Client config of a command: ``--bootstrap-server``, ``client.id``, fail-fast timeouts and
    ``settings``, then the user's ``overrides`` (``k=v`` of ``overrides_option``) on top.

    Raises:
        CliError: no bootstrap servers, or an override that is not ``k=v``.
    """
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap(args),
        "client.id": client_id,
        **(settings or {}),
    }
    config.update(CLIENT_TIMEOUTS)
    config.update(key_values(overrides, overrides_option))
    return config
