"""``kafkalite``: a small console tool over the spark-kafkalite client, shaped like Kafka's
``kafka-topics.sh`` / ``kafka-console-producer.sh`` / ``kafka-console-consumer.sh``.

Commands::

    kafkalite demo [--data-dir DIR] [--bootstrap-server HOST:PORT [--force]]
    kafkalite topics create   --bootstrap-server H:P --topic T [--partitions N]
                              [--replication-factor R] [--config k=v ...]
    kafkalite topics list     --bootstrap-server H:P
    kafkalite topics describe --bootstrap-server H:P [--topic T]
    kafkalite topics alter    --bootstrap-server H:P --topic T [--config k=v ...]
                              [--delete-config k ...]
    kafkalite topics delete   --bootstrap-server H:P --topic T
    kafkalite produce --bootstrap-server H:P --topic T [--partition P]
                      [--property parse.key=true --property key.separator=:]
                      [--producer-property k=v ...]            (one record per stdin line)
    kafkalite consume --bootstrap-server H:P --topic T [--from-beginning | --offset O]
                      [--partition P] [--max-messages N] [--timeout-ms MS]
                      [--property print.key=true --property key.separator=: ...]
    kafkalite consume ... --group G                        (as a group member, commits offsets)
    kafkalite groups list|describe|delete ...              (see spark_kafkalite.cli_groups)
    kafkalite cluster up [--brokers 3] [--data-dir DIR] | status | down   (spark_kafkalite.cli_cluster)

``topics describe`` prints each topic's config overrides (every value whose source is not the
default, with its source: DYNAMIC_TOPIC_CONFIG or STATIC_BROKER_CONFIG) and its partitions with
leader, replicas, ISR, log start offset, log end offset (the high watermark), record count and
size on disk (DescribeLogDirs, summed over log dirs and brokers; e.g. ``1.5 KiB``).

``--bootstrap-server`` defaults to ``$KAFKALITE_BOOTSTRAP_SERVERS``. Errors print one line
(``kafkalite: error: ...``) to stderr and exit with status 1 (130 on Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

__all__ = ["main", "build_parser"]

_ENV_BOOTSTRAP = "KAFKALITE_BOOTSTRAP_SERVERS"
_CLIENT_TIMEOUTS = {  # fail fast on an unreachable cluster (Kafka's defaults wait a minute)
    "default.api.timeout.ms": "15000",
    "request.timeout.ms": "10000",
    "socket.connection.setup.timeout.ms": "5000",
}


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


def _key_values(pairs: Sequence[str] | None, what: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{what} {pair!r} is not key=value")
        result[key.strip()] = value
    return result


def _bootstrap(args: argparse.Namespace) -> str:
    servers = args.bootstrap_server or os.environ.get(_ENV_BOOTSTRAP, "")
    if not servers:
        raise CliError(f"--bootstrap-server is required (or set ${_ENV_BOOTSTRAP})")
    return servers


def _add_bootstrap(parser: argparse.ArgumentParser, required_hint: bool = True) -> None:
    parser.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help=f"broker(s) to connect to (default ${_ENV_BOOTSTRAP})" if required_hint else "broker(s) to use",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of the ``kafkalite`` command."""
    parser = argparse.ArgumentParser(prog="kafkalite", description="spark-kafkalite console tool")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser("demo", help="run the NYC flights streaming demo")
    demo.add_argument("--data-dir", help="directory for the embedded broker's logs and Spark checkpoints")
    demo.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="use this cluster instead of starting an embedded broker",
    )
    demo.add_argument("--partitions", type=int, default=4, help="partitions of topic 'flights' (default 4)")
    demo.add_argument(
        "--brokers",
        type=int,
        default=1,
        help="size of the embedded cluster (default 1); with 3, topics are replicated 3 times",
    )
    demo.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="of the demo topics (default: the cluster's default)",
    )
    demo.add_argument(
        "--max-offsets-per-trigger", type=int, default=50_000, help="micro-batch size (default 50000)"
    )
    demo.add_argument(
        "--watermark-delay", default="14 days", help="event-time watermark delay (default '14 days')"
    )
    demo.add_argument("--quiet", action="store_true", help="no live progress display")
    demo.add_argument(
        "--force",
        action="store_true",
        help="with --bootstrap-server: delete and recreate topics flights / delays_by_carrier if they exist",
    )

    topics = commands.add_parser("topics", help="create, list, describe or delete topics")
    topic_commands = topics.add_subparsers(dest="topics_command", metavar="ACTION", required=True)
    create = topic_commands.add_parser("create", help="create a topic")
    _add_bootstrap(create)
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", type=int, default=-1, help="default: the broker's default")
    create.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config (repeatable)")
    listing = topic_commands.add_parser("list", help="list topic names")
    _add_bootstrap(listing)
    describe = topic_commands.add_parser(
        "describe", help="config overrides, partitions and offsets of topics"
    )
    _add_bootstrap(describe)
    describe.add_argument("--topic", help="one topic (default: all)")
    alter = topic_commands.add_parser("alter", help="set or delete topic configs (IncrementalAlterConfigs)")
    _add_bootstrap(alter)
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
    _add_bootstrap(delete)
    delete.add_argument("--topic", required=True)

    produce = commands.add_parser("produce", help="send stdin lines as records")
    _add_bootstrap(produce)
    produce.add_argument("--topic", required=True)
    produce.add_argument("--partition", type=int, help="send every record to this partition")
    produce.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="parse.key=true, key.separator=SEP (default TAB)",
    )
    produce.add_argument("--producer-property", action="append", metavar="KEY=VALUE", help="producer config")

    consume = commands.add_parser("consume", help="print records to stdout")
    _add_bootstrap(consume)
    consume.add_argument("--topic", required=True)
    consume.add_argument("--partition", type=int, help="only this partition (default: all)")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", help="start offset: a number (needs --partition), 'earliest' or 'latest'")
    consume.add_argument("--max-messages", type=int, help="exit after this many records")
    consume.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    consume.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="print.key, print.partition, print.offset, print.timestamp (true/false), key.separator",
    )
    consume.add_argument("--consumer-property", action="append", metavar="KEY=VALUE", help="consumer config")
    consume.add_argument("--group", help="consume as a member of this consumer group (commits offsets)")

    from spark_kafkalite.cli_groups import add_groups_parser

    add_groups_parser(commands)  # kafkalite groups list|describe|delete
    from spark_kafkalite.cli_cluster import add_cluster_parser

    add_cluster_parser(commands)  # kafkalite cluster up|status|down
    return parser


# ---------------------------------------------------------------------------------------- topics
def _human_bytes(size_bytes: int) -> str:
    """``size_bytes`` in binary units: ``512 B``, ``1.5 KiB``, ``2.0 MiB`` ..."""
    value = float(size_bytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{size_bytes} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _cmd_topics(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, NewTopic, TopicPartition

    servers = _bootstrap(args)
    out = Console() if sys.stdout.isatty() else Console(width=200)
    with KafkaAdminClient(
        {"bootstrap.servers": servers, "client.id": "kafkalite-cli", **_CLIENT_TIMEOUTS}
    ) as admin:
        action = args.topics_command
        if action == "create":
            admin.create_topics(
                [
                    NewTopic(
                        args.topic,
                        args.partitions,
                        args.replication_factor,
                        _key_values(args.config, "--config"),
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
            changes: dict[str, str | None] = dict(_key_values(args.config, "--config"))
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
            consumer = KafkaConsumer(
                {"bootstrap.servers": servers, "client.id": "kafkalite-cli", **_CLIENT_TIMEOUTS}
            )
            try:
                tps = [TopicPartition(t, p.partition) for t, parts in described.items() for p in parts]
                earliest = consumer.beginning_offsets(tps) if tps else {}
                latest = consumer.end_offsets(tps) if tps else {}
            finally:
                consumer.close()
            sizes = admin.describe_log_dirs(list(described)) if described else {}
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
                        "" if tp not in sizes else _human_bytes(sizes[tp]),
                    )
            out.print(table)
    return 0


# --------------------------------------------------------------------------------------- produce
def _cmd_produce(args: argparse.Namespace, stdin: TextIO) -> int:
    from spark_kafkalite.client import KafkaProducer

    props = _key_values(args.property, "--property")
    parse_key = props.get("parse.key", "false").strip().lower() == "true"
    separator = props.get("key.separator", "\t")
    config: dict[str, Any] = {
        "bootstrap.servers": _bootstrap(args),
        "client.id": "kafkalite-console-producer",
        "max.block.ms": "15000",
        **_CLIENT_TIMEOUTS,
    }
    config.update(_key_values(args.producer_property, "--producer-property"))
    errors: list[BaseException | None] = []
    sent = 0
    with KafkaProducer(config) as producer:
        for line_number, raw in enumerate(stdin, start=1):
            line = raw.rstrip("\n").rstrip("\r")
            key: bytes | None = None
            value = line
            if parse_key:
                key_text, sep, value = line.partition(separator)
                if not sep:
                    raise CliError(
                        f"No key separator {separator!r} found on line number {line_number}: {line!r}"
                    )
                key = key_text.encode()
            future = producer.send(args.topic, value=value.encode(), key=key, partition=args.partition)
            future.add_done_callback(lambda f: errors.append(f.exception()) if f.exception() else None)
            sent += 1
            if errors:
                break
        producer.flush()
    if errors:
        raise CliError(f"failed to send to topic {args.topic}: {errors[0]}")
    print(f"Produced {sent} records to topic {args.topic}.", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------------------- consume
def _format_record(record: Any, props: dict[str, str]) -> str:
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


def _cmd_consume(args: argparse.Namespace, stdout: TextIO) -> int:
    if args.group:
        from spark_kafkalite.cli_groups import consume_with_group

        return consume_with_group(args, stdout)
    from spark_kafkalite.client import KafkaConsumer, TopicPartition

    props = _key_values(args.property, "--property")
    config: dict[str, Any] = {
        "bootstrap.servers": _bootstrap(args),
        "client.id": "kafkalite-console-consumer",
        **_CLIENT_TIMEOUTS,
    }
    config.update(_key_values(args.consumer_property, "--consumer-property"))
    config["auto.offset.reset"] = "earliest" if args.from_beginning else "latest"
    consumer = KafkaConsumer(config)
    count = 0
    started = False
    try:
        partitions = consumer.partitions_for_topic(args.topic)
        if not partitions:
            raise CliError(f"topic {args.topic!r} does not exist")
        if args.partition is not None:
            if args.partition not in partitions:
                raise CliError(
                    f"partition {args.partition} does not exist in topic {args.topic!r} ({len(partitions)} partitions)"
                )
            tps = [TopicPartition(args.topic, args.partition)]
        else:
            tps = [TopicPartition(args.topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        if args.offset is not None:
            spec = args.offset.strip().lower()
            if spec == "earliest":
                consumer.seek_to_beginning(*tps)
            elif spec == "latest":
                consumer.seek_to_end(*tps)
            else:
                if args.partition is None:
                    raise CliError("--offset with a number needs --partition")
                try:
                    offset = int(spec)
                except ValueError:
                    raise CliError(
                        f"--offset must be a number, 'earliest' or 'latest', not {args.offset!r}"
                    ) from None
                consumer.seek(tps[0], offset)
        elif args.from_beginning:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
        started = True
        last_record = time.monotonic()
        while args.max_messages is None or count < args.max_messages:
            polled = consumer.poll(timeout_ms=200)
            got = False
            for records in polled.values():
                for record in records:
                    stdout.write(_format_record(record, props) + "\n")
                    count += 1
                    got = True
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                if args.max_messages is not None and count >= args.max_messages:
                    break
            stdout.flush()
            now = time.monotonic()
            if got:
                last_record = now
            elif args.timeout_ms is not None and (now - last_record) * 1000 >= args.timeout_ms:
                break
    finally:
        consumer.close()
        if started:
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------------------ main
def _cmd_demo(args: argparse.Namespace) -> int:
    from spark_kafkalite.demo import DemoConfig, main_from_config

    return main_from_config(
        DemoConfig(
            data_dir=args.data_dir,
            bootstrap_servers=args.bootstrap_server,
            partitions=args.partitions,
            max_offsets_per_trigger=args.max_offsets_per_trigger,
            watermark_delay=args.watermark_delay,
            show_progress=not args.quiet,
            force=args.force,
            brokers=args.brokers,
            replication_factor=args.replication_factor,
        )
    )


_ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")


def error_line(exc: BaseException) -> str:
    """One informative line for ``exc``.

    Spark wraps Python data source errors (a Python traceback inside a JVM exception); the most
    useful line is then the last ``SomeError: message`` line of the embedded traceback.
    """
    java = getattr(exc, "java_exception", None)
    text = str(java.toString()) if java is not None else str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    matches = [m for m in map(_ERROR_LINE.match, lines) if m]
    if matches and (java is not None or len(lines) > 1):
        python_errors = [m for m in matches if not m.group(1).startswith(("Py4J", "Python"))]
        best = (python_errors or matches)[-1]
        return f"{best.group(1)}: {best.group(2)}"
    return lines[0]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kafkalite`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "topics":
            return _cmd_topics(args)
        if args.command == "produce":
            return _cmd_produce(args, sys.stdin)
        if args.command == "groups":
            from spark_kafkalite.cli_groups import cmd_groups

            return cmd_groups(args)
        if args.command == "consume":
            return _cmd_consume(args, sys.stdout)
        if args.command == "cluster":
            from spark_kafkalite.cli_cluster import cmd_cluster

            return cmd_cluster(args, sys.stdout)
        return _cmd_demo(args)
    except KeyboardInterrupt:
        print("kafkalite: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - one clear line instead of a traceback
        print(f"kafkalite: error: {error_line(exc)}", file=sys.stderr)
        if os.environ.get("KAFKALITE_DEBUG"):
            raise
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
