"""Helpers every ``kafkalite`` command uses: the bootstrap and ``--command-config`` options,
client timeouts, ``k=v`` options, record formatting and the user-facing :class:`CliError`.

``--command-config FILE`` is Kafka tools' convention: a Java properties file of client configs
(``security.protocol``, ``sasl.*``, ``ssl.*``, ...) applied to every client the command makes.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from spark_kafkalite.protocol.properties import parse_properties

__all__ = [
    "CliError",
    "ENV_BOOTSTRAP",
    "CLIENT_TIMEOUTS",
    "key_values",
    "bootstrap",
    "client_config",
    "add_bootstrap",
    "command_config",
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
    """``--bootstrap-server``, else ``$KAFKALITE_BOOTSTRAP_SERVERS``, else ``bootstrap.servers``
    of the ``--command-config`` file.

    Raises:
        CliError: none of them is set.
    """
    servers = args.bootstrap_server or os.environ.get(ENV_BOOTSTRAP, "")
    if not servers:
        servers = command_config(args).get("bootstrap.servers", "")
    if not servers:
        raise CliError(f"--bootstrap-server is required (or set ${ENV_BOOTSTRAP})")
    return servers


def add_bootstrap(parser: argparse.ArgumentParser, required_hint: bool = True) -> None:
    """Add ``--bootstrap-server`` and ``--command-config`` to a client command."""
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help=f"broker(s) to connect to (default ${ENV_BOOTSTRAP})" if required_hint else "broker(s) to use",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="properties file of client configs (security.protocol, sasl.*, ssl.*, ...)",
    )


def command_config(args: argparse.Namespace) -> dict[str, str]:
    """The client configs of the ``--command-config`` file (empty without the option).

    Raises:
        CliError: the file cannot be read or parsed (its name and line in the message; the
            values, which may hold secrets, are never printed).
    """
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read --command-config {path}: {exc.strerror or exc}") from None
    try:
        return parse_properties(text, str(path))
    except ValueError as exc:
        raise CliError(
            f"--command-config: {str(exc).split(': cannot parse')[0]}: cannot parse the line"
        ) from None


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
    """Client config of a command: ``client.id``, fail-fast timeouts and ``settings``, then the
    ``--command-config`` file, then the user's ``overrides`` (``k=v`` of ``overrides_option``);
    ``--bootstrap-server`` (or its fallbacks, :func:`bootstrap`) sets ``bootstrap.servers``.

    Raises:
        CliError: no bootstrap servers, an unreadable command config, or an override that is
            not ``k=v``.
    """
    config: dict[str, Any] = {"client.id": client_id, **(settings or {})}
    config.update(CLIENT_TIMEOUTS)
    config.update(command_config(args))
    config.update(key_values(overrides, overrides_option))
    config["bootstrap.servers"] = bootstrap(args)
    return config
