"""``kafkalite groups ...`` and ``kafkalite consume --group``: consumer groups from the console,
shaped like Kafka's ``kafka-consumer-groups.sh`` and ``kafka-console-consumer.sh --group``.

Commands::

    kafkalite groups list     --bootstrap-server H:P [--state]
    kafkalite groups describe --bootstrap-server H:P GROUP [GROUP ...]
    kafkalite groups delete   --bootstrap-server H:P GROUP [GROUP ...]
    kafkalite consume --bootstrap-server H:P --topic T --group G [--from-beginning] ...

``groups describe`` prints, per group, its type (``classic`` or ``consumer``, KIP-848), state,
assignor and coordinator (for a consumer group also the group and target assignment epochs), a
members table (member id, group instance id, client id, host, assigned partitions; for a
consumer group also each member's epoch and target assignment) and an offsets table
(topic, partition, committed offset, log end offset, lag, owning member), like
``kafka-consumer-groups.sh --describe``. ``consume --group`` subscribes as a member of the group:
``--from-beginning`` only applies where the group has no committed offset; offsets are
auto-committed and committed once more on exit.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from spark_kafkalite.cli.common import (
    CliError,
    add_bootstrap,
    client_config,
    format_record,
    key_values,
)

__all__ = ["add_groups_parser", "cmd_groups", "consume_with_group"]


def add_groups_parser(commands: Any) -> None:
    """Add the ``groups`` command to the ``kafkalite`` subparsers ``commands``."""
    groups = commands.add_parser("groups", help="list, describe or delete consumer groups")
    actions = groups.add_subparsers(dest="groups_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list consumer groups")
    add_bootstrap(listing)
    listing.add_argument("--state", action="store_true", help="also show each group's state")
    describe = actions.add_parser("describe", help="members, assignments, committed offsets and lag")
    add_bootstrap(describe)
    describe.add_argument("group", nargs="+", metavar="GROUP")
    delete = actions.add_parser("delete", help="delete groups (they must have no members)")
    add_bootstrap(delete)
    delete.add_argument("group", nargs="+", metavar="GROUP")


def _admin(args: argparse.Namespace) -> Any:
    from spark_kafkalite.client import KafkaAdminClient

    return KafkaAdminClient(client_config(args, "kafkalite-cli"))


def cmd_groups(args: argparse.Namespace) -> int:
    """Run ``kafkalite groups ACTION``; returns the exit status.

    Raises:
        CliError: a group does not exist (describe), or a broker error (as one line).
    """
    from rich.console import Console
    from rich.table import Table

    out = Console() if sys.stdout.isatty() else Console(width=250)
    with _admin(args) as admin:
        action = args.groups_command
        if action == "list":
            listings = admin.list_consumer_groups()
            if args.state:
                table = Table(title="Consumer groups")
                for column in ("Group", "State", "Type"):
                    table.add_column(column, no_wrap=True)
                for g in listings:
                    table.add_row(
                        g.group_id, g.state or "", "simple" if g.is_simple_consumer_group else "consumer"
                    )
                out.print(table)
            else:
                for g in listings:
                    print(g.group_id)
            return 0
        if action == "delete":
            admin.delete_consumer_groups(args.group)
            for group in args.group:
                print(f"Deleted consumer group {group}.")
            return 0
        descriptions = admin.describe_consumer_groups(args.group)
        for group in args.group:
            d = descriptions[group]
            lag = admin.consumer_group_lag(group)
            if d.state == "Dead" and not lag:
                raise CliError(f"consumer group {group!r} does not exist")
            broker, host, port = d.coordinator
            epochs = (
                f", group epoch {d.group_epoch}, assignment epoch {d.target_assignment_epoch}"
                if d.group_epoch is not None
                else ""
            )
            out.print(
                f"[bold]Group {group}[/bold]: type {d.type}, state {d.state}"
                + (f", assignor {d.partition_assignor}" if d.partition_assignor else "")
                + epochs
                + f", coordinator {broker} ({host}:{port}), {len(d.members)} member(s)"
            )
            owner = {tp: m for m in d.members for tp in m.assignment}
            if d.members:
                members = Table(title=f"Members of {group}")
                columns = ["Member", "Instance", "Client", "Host", "#Partitions", "Assignment"]
                if d.type == "consumer":  # KIP-848: the member epoch and what it is moving to
                    columns[4:4] = ["Epoch"]
                    columns.append("Target")
                for column in columns:
                    members.add_column(column, no_wrap=column not in ("Assignment", "Target"))
                for m in sorted(d.members, key=lambda m: m.member_id):
                    parts = sorted(m.assignment)
                    row = [
                        m.member_id,
                        m.group_instance_id or "",
                        m.client_id,
                        m.host,
                        str(len(parts)),
                        ", ".join(f"{tp.topic}-{tp.partition}" for tp in parts),
                    ]
                    if d.type == "consumer":
                        row[4:4] = [str(m.member_epoch)]
                        row.append(
                            ", ".join(
                                f"{tp.topic}-{tp.partition}" for tp in sorted(m.target_assignment or ())
                            )
                        )
                    members.add_row(*row)
                out.print(members)
            offsets = Table(title=f"Offsets of {group}")
            for column in (
                "Topic",
                "Partition",
                "Committed",
                "LogEndOffset",
                "Lag",
                "Member",
                "Host",
                "Client",
            ):
                offsets.add_column(
                    column,
                    justify="left" if column in ("Topic", "Member", "Host", "Client") else "right",
                    no_wrap=True,
                )
            for tp, info in sorted(lag.items()):
                m = owner.get(tp)
                offsets.add_row(
                    tp.topic,
                    str(tp.partition),
                    "-" if info.committed is None else str(info.committed),
                    "-" if info.log_end_offset < 0 else str(info.log_end_offset),
                    "-" if info.lag is None else str(info.lag),
                    m.member_id if m else "-",
                    m.host if m else "-",
                    m.client_id if m else "-",
                )
            out.print(offsets)
    return 0


def consume_with_group(args: argparse.Namespace, stdout: TextIO) -> int:
    """``kafkalite consume --group G``: subscribe to ``--topic`` as a member of group G and
    print records until ``--max-messages`` / ``--timeout-ms`` / Ctrl-C; commits on exit.

    Raises:
        CliError: ``--partition`` or ``--offset`` given with ``--group`` (Kafka's console
        consumer refuses them too).
    """
    from spark_kafkalite.client import KafkaConsumer

    if args.partition is not None or args.offset is not None:
        raise CliError("--partition and --offset cannot be used with --group (the group assigns partitions)")
    props = key_values(args.property, "--property")
    config = client_config(
        args,
        "kafkalite-console-consumer",
        {"group.id": args.group},
        args.consumer_property,
        "--consumer-property",
    )
    config["auto.offset.reset"] = (
        "earliest" if args.from_beginning else config.get("auto.offset.reset", "latest")
    )
    consumer = KafkaConsumer(config)
    count = 0
    try:
        if not consumer.partitions_for_topic(args.topic):
            raise CliError(f"topic {args.topic!r} does not exist")
        consumer.subscribe([args.topic])
        last_record = time.monotonic()
        done = False
        while not done:
            remaining = None if args.max_messages is None else args.max_messages - count
            # never take more records than will be printed: positions (and so commits) advance
            # for every record poll returns
            polled = consumer.poll(timeout_ms=200, max_records=remaining)
            got = False
            for records in polled.values():
                for record in records:
                    stdout.write(format_record(record, props) + "\n")
                    count += 1
                    got = True
            done = args.max_messages is not None and count >= args.max_messages
            stdout.flush()
            now = time.monotonic()
            if got:
                last_record = now
            elif args.timeout_ms is not None and (now - last_record) * 1000 >= args.timeout_ms:
                break
        if consumer.assignment():
            consumer.commit_sync()
    finally:
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
