"""``kafkalite topics create|list|describe|alter|delete``, shaped like Kafka's ``kafka-topics.sh``.

``topics describe`` prints each topic's config overrides (every value whose source is not the
default, with its source: DYNAMIC_TOPIC_CONFIG or STATIC_BROKER_CONFIG) and its partitions with
leader, replicas, ISR, log start offset, log end offset (the high watermark), record count and
size on disk (DescribeLogDirs, summed over log dirs and brokers; e.g. ``1.5 KiB``). Above
``PARTITION_ROWS_MAX`` partitions it prints one summary row per topic instead (partitions,
replication factor, under-replicated and leaderless partitions, leaders per broker, records,
size); ``--partitions`` lists every partition.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from spark_kafkalite.cli.common import (
    CliError,
    add_bootstrap,
    bootstrap,
    client_config,
    key_values,
)

__all__ = ["add_topics_parser", "cmd_topics", "human_bytes", "PARTITION_ROWS_MAX"]

PARTITION_ROWS_MAX = 50
"""Above this many partitions ``describe`` prints one summary row per topic (``--partitions``: all)."""


def add_topics_parser(commands: Any) -> None:
    """Add the ``topics`` command to the ``kafkalite`` subparsers ``commands``."""
    topics = commands.add_parser("topics", help="create, list, describe or delete topics")
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    create = topic_commands.add_parser("create", help="create a topic")
    add_bootstrap(create)
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1, help="default: the broker's default")
    create.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config (repeatable)")
    listing = topic_commands.add_parser("list", help="list topic names")
    add_bootstrap(listing)
    describe = topic_commands.add_parser(
        "describe", help="config overrides, partitions and offsets of topics"
    )
    add_bootstrap(describe)
    describe.add_argument("--topic", help="one topic (default: all)")
    describe.add_argument(
        "--partitions",
        action="store_true",
        help=f"one row per partition (default above {PARTITION_ROWS_MAX} partitions: one summary row per topic)",
    )
    alter = topic_commands.add_parser("alter", help="set or delete topic configs (IncrementalAlterConfigs)")
    add_bootstrap(alter)
    alter.add_argument("--topic", required=True)
    alter.add_argument(
        "--config", action="append", metavar="KEY=VALUE", help="set a topic config (repeatable)"
    )
    alter.add_argument(
        "--delete-config",
        action="append",
        metavar="KEY",
        help="remove an override: back to the default (repeatable)",
    )
    delete = topic_commands.add_parser("delete", help="delete a topic")
    add_bootstrap(delete)
    delete.add_argument("--topic", required=True)


def human_bytes(size_bytes: int) -> str:
    """``size_bytes`` in binary units: ``512 B``, ``1.5 KiB``, ``2.0 MiB`` ..."""
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{size_bytes} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def cmd_topics(args: argparse.Namespace) -> int:
    """Run ``kafkalite topics ACTION``; returns the exit status."""
    from rich.console import Console
    from rich.table import Table

    from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, NewTopic, TopicPartition

    servers = bootstrap(args)
    out = Console() if sys.stdout.isatty() else Console(width=200)
    with KafkaAdminClient(client_config(args, "kafkalite-cli")) as admin:
        action = args.topics_command
        if action == "create":
            admin.create_topics(
                [
                    NewTopic(
                        args.topic,
                        args.partitions,
                        args.replication_factor,
                        key_values(args.config, "--config"),
                    )
                ]
            )
            print(f"Created topic {args.topic}.")
        elif action == "delete":
            admin.delete_topics([args.topic])
            print(f"Deleted topic {args.topic}.")
        elif action == "list":
            for name in admin.list_topics():
                print(name)
        elif action == "alter":
            changes: dict[str, str | None] = dict(key_values(args.config, "--config"))
            for key in args.delete_config or ():
                changes[key.strip()] = None
            if not changes:
                raise CliError("topics alter needs --config KEY=VALUE or --delete-config KEY")
            admin.incremental_alter_configs({args.topic: changes})
            print(
                f"Altered configs of topic {args.topic}: "
                + ", ".join(f"{k}={v}" if v is not None else f"-{k}" for k, v in changes.items())
            )
        else:
            names = [args.topic] if args.topic else admin.list_topics()
            described = admin.describe_topics(names) if names else {}
            configs = admin.describe_configs(list(described)) if described else {}
            for resource, entries in configs.items():
                overrides = [e for e in entries.values() if not e.is_default]
                config_table = Table(title=f"Configs of {resource.name} (non-default)")
                for column in ("Config", "Value", "Source"):
                    config_table.add_column(column, no_wrap=True)
                for entry in sorted(overrides, key=lambda e: e.name):
                    config_table.add_row(
                        entry.name, "" if entry.value is None else entry.value, entry.source.name
                    )
                out.print(config_table)
            consumer = KafkaConsumer(client_config(args, "kafkalite-cli"))
            try:
                tps = [TopicPartition(t, p.partition) for t, parts in described.items() for p in parts]
                earliest = consumer.beginning_offsets(tps) if tps else {}
                latest = consumer.end_offsets(tps) if tps else {}
            finally:
                consumer.close()
            sizes = admin.describe_log_dirs(list(described)) if described else {}
            total = sum(len(parts) for parts in described.values())
            if args.partitions or total <= PARTITION_ROWS_MAX:
                out.print(_partition_table(servers, described, earliest, latest, sizes))
            else:
                out.print(_topic_summary(servers, described, earliest, latest, sizes))
                out.print(f"({total} partitions: --partitions lists each one)")
    return 0


def _partition_table(servers: str, described: dict[str, Any], earliest: Any, latest: Any, sizes: Any) -> Any:
    from rich.table import Table

    from spark_kafkalite.client import TopicPartition

    table = Table(title=f"Topics on {servers}")
    for column in (
        "Topic",
        "Partition",
        "Leader",
        "Replicas",
        "Isr",
        "LogStartOffset",
        "LogEndOffset",
        "Records",
        "Size",
    ):
        table.add_column(column, justify="left" if column == "Topic" else "right", no_wrap=True)
    for topic, parts in described.items():
        for info in parts:
            tp = TopicPartition(topic, info.partition)
            lo, hi = earliest.get(tp), latest.get(tp)
            table.add_row(
                topic,
                str(info.partition),
                str(info.leader),
                ",".join(map(str, info.replicas)),
                ",".join(map(str, info.isr)),
                "" if lo is None else str(lo),
                "" if hi is None else str(hi),
                "" if lo is None or hi is None else str(hi - lo),
                "" if tp not in sizes else human_bytes(sizes[tp]),
            )
    return table


def _topic_summary(servers: str, described: dict[str, Any], earliest: Any, latest: Any, sizes: Any) -> Any:
    """One row per topic: partitions, replication factor, under-replicated and leaderless
    partitions, leaders per broker, records and size summed over its partitions."""
    from rich.table import Table

    from spark_kafkalite.client import TopicPartition

    table = Table(title=f"Topics on {servers}")
    for column in (
        "Topic",
        "Partitions",
        "Replicas",
        "UnderReplicated",
        "NoLeader",
        "Leaders",
        "Records",
        "Size",
    ):
        table.add_column(column, justify="left" if column == "Topic" else "right", no_wrap=True)
    for topic, parts in described.items():
        records = size = 0
        leaders: dict[int, int] = {}
        for info in parts:
            tp = TopicPartition(topic, info.partition)
            lo, hi = earliest.get(tp), latest.get(tp)
            records += 0 if lo is None or hi is None else hi - lo
            size += sizes.get(tp, 0)
            if info.leader >= 0:
                leaders[info.leader] = leaders.get(info.leader, 0) + 1
        table.add_row(
            topic,
            str(len(parts)),
            ",".join(str(n) for n in sorted({len(info.replicas) for info in parts})),
            str(sum(len(info.isr) < len(info.replicas) for info in parts)),
            str(sum(info.leader < 0 for info in parts)),
            " ".join(f"{b}:{n}" for b, n in sorted(leaders.items())) or "-",
            str(records),
            human_bytes(size),
        )
    return table
