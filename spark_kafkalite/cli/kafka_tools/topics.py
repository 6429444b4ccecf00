"""``kafka-topics.sh``: Kafka's ``TopicCommand`` (flags, output and errors) over our admin client.

    kafka-topics.sh --bootstrap-server H:P --create --topic T [--partitions N]
                    [--replication-factor R] [--config k=v ...] [--if-not-exists]
    kafka-topics.sh --bootstrap-server H:P --list [--topic REGEX] [--exclude-internal]
    kafka-topics.sh --bootstrap-server H:P --describe [--topic REGEX]
                    [--under-replicated-partitions | --unavailable-partitions |
                     --under-min-isr-partitions | --at-min-isr-partitions | --topics-with-overrides]
    kafka-topics.sh --bootstrap-server H:P --alter --topic REGEX --partitions N [--if-exists]
    kafka-topics.sh --bootstrap-server H:P --delete --topic REGEX [--if-exists]

``--describe`` prints Kafka's lines: ``Topic: t<TAB>TopicId: ...<TAB>PartitionCount: 3<TAB>
ReplicationFactor: 1<TAB>Configs: k=v,...`` (every config whose source is not the default), then
per partition ``<TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1<TAB>Isr: 1<TAB>Elr:
N/A<TAB>LastKnownElr: N/A`` (the Metadata API carries no ELR). Errors of the command print
``Error while executing topic command : ...`` on stdout, exit status 1.
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import uuid
from collections.abc import Sequence
from typing import Any

from spark_kafkalite.cli.common import CliError, client_config
from spark_kafkalite.cli.kafka_tools.tool import (
    ToolParser,
    UsageError,
    add_connection,
    include_list,
    require,
    run_tool,
)

__all__ = ["main", "build_parser", "kafka_uuid"]

_ACTIONS = ("create", "list", "describe", "alter", "delete")
_REPORTS = (
    "under_replicated_partitions",
    "unavailable_partitions",
    "under_min_isr_partitions",
    "at_min_isr_partitions",
)
_COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
    "collide. To avoid issues it is best to use either, but not both."
)


def build_parser() -> ToolParser:
    """The options of Kafka's ``TopicCommandOptions``."""
    parser = ToolParser("kafka-topics.sh", "This tool helps to create, delete, describe, or change a topic.")
    add_connection(parser)
    parser.add_argument("--list", action="store_true", help="List all available topics.")
    parser.add_argument("--create", action="store_true", help="Create a new topic.")
    parser.add_argument("--delete", action="store_true", help="Delete a topic.")
    parser.add_argument("--alter", action="store_true", help="Alter the number of partitions.")
    parser.add_argument("--describe", action="store_true", help="List details for the given topics.")
    parser.add_argument(
        "--topic",
        help="The topic to create, alter, describe or delete. It also accepts a regular expression, "
        "except for --create option.",
    )
    parser.add_argument(
        "--config",
        action="append",
        metavar="name=value",
        help="A topic configuration override (with --create).",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        metavar="# of partitions",
        help="The number of partitions (--create, --alter).",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        metavar="replication factor",
        help="The replication factor (--create).",
    )
    parser.add_argument(
        "--under-replicated-partitions", action="store_true", help="Only show under-replicated partitions."
    )
    parser.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="Only show partitions whose leader is not available.",
    )
    parser.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="Only show partitions whose isr count is less than the configured minimum.",
    )
    parser.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="Only show partitions whose isr count is equal to the configured minimum.",
    )
    parser.add_argument(
        "--topics-with-overrides", action="store_true", help="Only show topics that have overridden configs."
    )
    parser.add_argument(
        "--if-exists",
        action="store_true",
        help="Only act if the topic exists (--alter, --delete, --describe).",
    )
    parser.add_argument(
        "--if-not-exists", action="store_true", help="Do not fail if the topic already exists (--create)."
    )
    parser.add_argument(
        "--exclude-internal", action="store_true", help="Exclude internal topics (--list, --describe)."
    )
    return parser


def _check(args: argparse.Namespace) -> str:
    """Kafka's ``TopicCommandOptions.checkArgs``; returns the action.

    Raises:
        UsageError: not exactly one action, or an option that does not go with it.
    """
    actions = [a for a in _ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --create, --alter or --delete"
        )
    action = actions[0]
    if not args.bootstrap_server:
        raise CliError("--bootstrap-server must be specified")
    if action not in ("list", "describe"):
        require(args, "topic")
    if action == "alter":
        if args.config:
            raise UsageError(
                'Option "[alter]" can\'t be used with option "[config]" '
                "(To alter topic configurations, the kafka-configs tool can be used.)"
            )
        require(args, "partitions")
    allowed = {
        "config": ("create",),
        "partitions": ("alter", "create"),
        "replication_factor": ("create",),
        "if_exists": ("alter", "delete", "describe"),
        "if_not_exists": ("create",),
        "exclude_internal": ("list", "describe"),
        **{report: ("describe",) for report in (*_REPORTS, "topics_with_overrides")},
    }
    for option, actions_ok in allowed.items():
        if getattr(args, option) not in (None, False) and action not in actions_ok:
            flag = option.replace("_", "-")
            raise UsageError(f'Option "[{flag}]" can\'t be used with option "[{action}]"')
    return action


def kafka_uuid(value: uuid.UUID) -> str:
    """A topic id as Kafka prints it (``Uuid.toString``: URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _topics(admin: Any, pattern: str | None, exclude_internal: bool) -> list[str]:
    names = admin.list_topics()
    if pattern is None:
        return names
    include = include_list(pattern)
    return [n for n in names if include.fullmatch(n) and not (exclude_internal and n.startswith("__"))]


def _ensure_exists(found: list[str], args: argparse.Namespace) -> None:
    if args.topic and not found and not args.if_exists:
        raise CliError(f"Topic '{args.topic}' does not exist as expected")


def _create(admin: Any, args: argparse.Namespace) -> None:
    from spark_kafkalite.client import NewTopic
    from spark_kafkalite.protocol.errors import TopicAlreadyExistsError

    configs: dict[str, str] = {}
    for item in args.config or ():
        parts = re.split(r"\s*=\s*", item)
        if len(parts) != 2:
            raise CliError(
                'requirement failed: Invalid topic config: all configs to be added must be in the format "key=val".'
            )
        configs[parts[0].strip()] = parts[1].strip()
    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise CliError("The replication factor must be between 1 and 32767 inclusive")
    if args.partitions is not None and args.partitions < 1:
        raise CliError("The partitions must be greater than 0")
    if "." in args.topic or "_" in args.topic:
        print(_COLLISION_WARNING)
    partitions = -1 if args.partitions is None else args.partitions
    replication = -1 if args.replication_factor is None else args.replication_factor
    try:
        admin.create_topics([NewTopic(args.topic, partitions, replication, configs)])
    except TopicAlreadyExistsError:
        if args.if_not_exists:
            return
        raise _TopicCommandError(f"Topic '{args.topic}' already exists.") from None
    print(f"Created topic {args.topic}.")


class _TopicCommandError(Exception):
    """An error whose message Kafka prints as it is (after the command's prefix)."""


def _describe(admin: Any, args: argparse.Namespace) -> None:
    from spark_kafkalite.protocol.configs import ConfigSource

    names = _topics(admin, args.topic, args.exclude_internal)
    _ensure_exists(names, args)
    if not names:
        return
    described = admin.describe_topics(names)
    ids = admin.topic_ids(names)
    configs = admin.describe_configs(names)
    live = {node_id for node_id, _, _ in admin.describe_cluster()["brokers"]}
    reports = [r for r in _REPORTS if getattr(args, r)]
    for name in names:
        parts = described[name]
        entries = configs[next(r for r in configs if r.name == name)]
        overrides = [e for e in entries.values() if e.source != ConfigSource.DEFAULT_CONFIG]
        min_isr_entry = entries.get("min.insync.replicas")
        min_isr = int(min_isr_entry.value) if min_isr_entry is not None and min_isr_entry.value else 1
        if not reports and (not args.topics_with_overrides or overrides) and parts:
            line = f"Topic: {name}"
            if name in ids and ids[name].int != 0:
                line += f"\tTopicId: {kafka_uuid(ids[name])}"
            line += f"\tPartitionCount: {len(parts)}\tReplicationFactor: {len(parts[0].replicas)}"
            line += "\tConfigs: " + ",".join(f"{e.name}={e.value}" for e in overrides)
            print(line)
        if args.topics_with_overrides:
            continue
        for info in parts:
            shown = not reports or any(
                (r == "under_replicated_partitions" and len(info.isr) < len(info.replicas))
                or (r == "unavailable_partitions" and (info.leader < 0 or info.leader not in live))
                or (r == "under_min_isr_partitions" and (info.leader < 0 or len(info.isr) < min_isr))
                or (r == "at_min_isr_partitions" and len(info.isr) == min_isr)
                for r in reports
            )
            if shown:
                print(
                    f"\tTopic: {name}\tPartition: {info.partition}"
                    f"\tLeader: {info.leader if info.leader >= 0 else 'none'}"
                    f"\tReplicas: {','.join(map(str, info.replicas))}\tIsr: {','.join(map(str, info.isr))}"
                    "\tElr: N/A\tLastKnownElr: N/A"
                )


def _run(args: argparse.Namespace) -> int:
    from spark_kafkalite.client import KafkaAdminClient

    action = _check(args)
    config = client_config(args, "kafka-topics", {"exclude.internal.topics": "false"})
    with KafkaAdminClient(config) as admin:
        if action == "create":
            _create(admin, args)
        elif action == "list":
            print("\n".join(_topics(admin, args.topic, args.exclude_internal)))
        elif action == "describe":
            _describe(admin, args)
        else:
            names = _topics(admin, args.topic, False)
            _ensure_exists(names, args)
            if names and action == "alter":
                admin.create_partitions({name: args.partitions for name in names})
            elif names:
                admin.delete_topics(names)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kafka-topics.sh``; returns the exit status."""
    return run_tool(build_parser(), argv, _run, "Error while executing topic command : ", sys.stdout)
