"""``kafka-configs.sh``: Kafka's ``ConfigCommand`` for topic, broker and group configs over our
admin client (DescribeConfigs, IncrementalAlterConfigs).

    kafka-configs.sh --bootstrap-server H:P --describe --entity-type topics [--entity-name T] [--all]
    kafka-configs.sh --bootstrap-server H:P --alter --entity-type topics --entity-name T \\
                     --add-config k1=v1,k2=[a,b] [--delete-config k3,k4]
    kafka-configs.sh ... --entity-type brokers (--entity-name ID | --entity-default) ...
    kafka-configs.sh ... --entity-type groups --entity-name G ...

``--topic T``, ``--broker ID``, ``--broker-defaults`` and ``--group G`` are the shorthands.
``--describe`` prints ``Dynamic configs for topic T are:`` (``All configs`` with ``--all``) and
per config ``  k=v sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:k=v, ...}``; ``--alter``
prints ``Completed updating config for topic T.``. Quota entities (users, clients, ips) are not
supported by this tool.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from spark_kafkalite.cli.common import CliError, client_config
from spark_kafkalite.cli.kafka_tools.tool import (
    ToolParser,
    UsageError,
    add_connection,
    parse_config_list,
    run_tool,
)

__all__ = ["main", "build_parser"]

_RESOURCE_TYPES = {"topics": 2, "brokers": 4, "broker-loggers": 8, "groups": 32}
_QUOTA_TYPES = ("users", "clients", "ips", "client-metrics")


def build_parser() -> ToolParser:
    """The options of Kafka's ``ConfigCommandOptions`` this tool supports."""
    parser = ToolParser(
        "kafka-configs.sh",
        "This tool helps to manipulate and describe entity config for a topic, broker or group.",
    )
    add_connection(parser)
    parser.add_argument("--alter", action="store_true", help="Alter the configuration for the entity.")
    parser.add_argument("--describe", action="store_true", help="List configs for the given entity.")
    parser.add_argument(
        "--entity-type",
        action="append",
        default=[],
        help="Type of entity (topics/brokers/broker-loggers/groups)",
    )
    parser.add_argument(
        "--entity-name", action="append", default=[], help="Name of entity (topic name/broker id/group id)"
    )
    parser.add_argument(
        "--entity-default",
        action="store_true",
        help="Default entity name for brokers (the cluster-wide default)",
    )
    parser.add_argument(
        "--add-config", help="Key Value pairs of configs to add: 'k1=v1,k2=[v1,v2,v2],k3=v3'."
    )
    parser.add_argument("--add-config-file", help="Path to a properties file with configs to add.")
    parser.add_argument("--delete-config", action="append", default=[], help="config keys to remove 'k1,k2'")
    parser.add_argument(
        "--all",
        action="store_true",
        help="List all configs for the given entity, including static and default ones.",
    )
    parser.add_argument("--force", action="store_true", help="Suppress console prompts")
    parser.add_argument("--topic", help="The topic's name (--entity-type topics --entity-name T).")
    parser.add_argument("--broker", help="The broker's id (--entity-type brokers --entity-name ID).")
    parser.add_argument("--broker-defaults", action="store_true", help="The config defaults for all brokers.")
    parser.add_argument("--broker-logger", help="The broker's id for its loggers.")
    parser.add_argument("--group", help="The group's id (--entity-type groups --entity-name G).")
    return parser


def _entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """``(entity type, name or None for every entity / "" for the broker default)``.

    Raises:
        UsageError / CliError: Kafka's ``ConfigCommandOptions.checkArgs`` failures.
    """
    types = list(args.entity_type)
    names: list[str | None] = list(args.entity_name)
    for flag, kind in (
        ("topic", "topics"),
        ("broker", "brokers"),
        ("broker_logger", "broker-loggers"),
        ("group", "groups"),
    ):
        if getattr(args, flag) is not None:
            types.append(kind)
            names.append(getattr(args, flag))
    if args.broker_defaults:
        types.append("brokers")
        args.entity_default = True
    if not types:
        raise CliError("At least one entity type must be specified")
    if len(types) > 1:
        raise CliError(f"Only one entity type is supported here: {', '.join(types)}")
    kind = types[0]
    if kind in _QUOTA_TYPES:
        raise CliError(f"--entity-type {kind} (quotas) is not supported by this tool")
    if kind not in _RESOURCE_TYPES:
        raise CliError(
            f"Invalid entity type {kind}, the entity type must be one of {', '.join(_RESOURCE_TYPES)}"
        )
    if args.entity_default and kind != "brokers":
        raise CliError("--entity-default is only supported for brokers here")
    name = "" if args.entity_default else (names[0] if names else None)
    if kind == "brokers" and name and not name.isdigit():
        raise CliError(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    return kind, name


def _describe(admin: Any, kind: str, name: str | None, describe_all: bool) -> None:
    from spark_kafkalite.client.admin_configs import ConfigResource
    from spark_kafkalite.protocol.configs import ConfigSource

    if name is not None:
        names = [name]
    elif kind == "topics":
        names = admin.list_topics()
    elif kind == "brokers":
        names = [str(node_id) for node_id, _, _ in admin.describe_cluster()["brokers"]]
    else:
        raise CliError(f"--entity-name must be specified with --describe of {kind}")
    dynamic = {
        "topics": ConfigSource.DYNAMIC_TOPIC_CONFIG,
        "brokers": ConfigSource.DYNAMIC_BROKER_CONFIG,
        "broker-loggers": ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
        "groups": ConfigSource.GROUP_CONFIG,
    }[kind]
    singular = kind[:-1]
    for entity in names:
        resource = ConfigResource(_RESOURCE_TYPES[kind], entity)
        entries = admin.describe_configs(resource, include_synonyms=True)
        if entity == "":
            print(f"Default configs for {kind} in the cluster are:")
            wanted = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            print(f"{'All' if describe_all else 'Dynamic'} configs for {singular} {entity} are:")
            wanted = dynamic
        for entry in sorted(entries.values(), key=lambda e: e.name):
            if not describe_all and entry.source != wanted:
                continue
            synonyms = ", ".join(f"{s.source.name}:{s.name}={_text(s.value)}" for s in entry.synonyms)
            print(
                f"  {entry.name}={_text(entry.value)} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"
            )


def _text(value: str | None) -> str:
    return "null" if value is None else value


def _alter(admin: Any, args: argparse.Namespace, kind: str, name: str | None) -> None:
    from spark_kafkalite.client.admin_configs import ConfigResource
    from spark_kafkalite.protocol.properties import parse_properties

    if name is None:
        raise CliError(f"--entity-name must be specified with --alter of {kind}")
    changes: dict[str, str | None] = {}
    if args.add_config_file:
        with open(args.add_config_file, encoding="utf-8") as f:
            changes.update(parse_properties(f.read(), args.add_config_file))
    if args.add_config:
        changes.update(parse_config_list(args.add_config))
    deletes = [key.strip() for item in args.delete_config for key in item.split(",") if key.strip()]
    if not changes and not deletes:
        raise CliError(
            "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter"
        )
    both = sorted(set(changes) & set(deletes))
    if both:
        raise CliError(f"Invalid config(s): {','.join(both)} (in both --add-config and --delete-config)")
    changes.update(dict.fromkeys(deletes))
    admin.incremental_alter_configs({ConfigResource(_RESOURCE_TYPES[kind], name): changes})
    if name == "":
        print(f"Completed updating default config for {kind} in the cluster.")
    else:
        print(f"Completed updating config for {kind[:-1]} {name}.")


def _run(args: argparse.Namespace) -> int:
    from spark_kafkalite.client import KafkaAdminClient

    if args.alter == args.describe:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if not args.bootstrap_server:
        raise CliError("Only one of --bootstrap-server or --bootstrap-controller must be specified")
    if args.describe and (args.add_config or args.delete_config or args.add_config_file):
        raise UsageError('Option "[describe]" can\'t be used with option "[add-config]" or "[delete-config]"')
    kind, name = _entity(args)
    with KafkaAdminClient(client_config(args, "kafka-configs")) as admin:
        if args.describe:
            _describe(admin, kind, name, args.all)
        else:
            _alter(admin, args, kind, name)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kafka-configs.sh``; returns the exit status."""
    return run_tool(build_parser(), argv, _run, "Error while executing config command with args: ")
