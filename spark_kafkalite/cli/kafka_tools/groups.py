"""``kafka-consumer-groups.sh``: Kafka's ``ConsumerGroupCommand`` over our admin client.

    kafka-consumer-groups.sh --bootstrap-server H:P --list [--state]
    kafka-consumer-groups.sh --bootstrap-server H:P --describe (--group G ... | --all-groups)
                             [--offsets | --members | --state]
    kafka-consumer-groups.sh --bootstrap-server H:P --delete --group G ...
    kafka-consumer-groups.sh --bootstrap-server H:P --reset-offsets --group G
        (--topic T[:P,P] ... | --all-topics)
        (--to-earliest | --to-latest | --to-offset N | --shift-by N | --to-current)
        [--dry-run | --execute]

``--describe`` prints Kafka's table (``GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
CONSUMER-ID HOST CLIENT-ID``, columns at least 15 wide, ``-`` where there is no value) after a
blank line; a group without members is announced on stderr (``Consumer group 'g' has no active
members.``), an unknown one with ``Error: Consumer group 'g' does not exist.``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from spark_kafkalite.cli.common import CliError, client_config
from spark_kafkalite.cli.kafka_tools.tool import ToolParser, UsageError, add_connection, run_tool

__all__ = ["main", "build_parser"]

_RESETS = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_current")
_REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


def build_parser() -> ToolParser:
    """The options of Kafka's ``ConsumerGroupCommandOptions`` this tool supports."""
    parser = ToolParser(
        "kafka-consumer-groups.sh",
        "This tool helps to list all consumer groups, describe a consumer group, delete consumer group info, or reset consumer group offsets.",
    )
    add_connection(parser)
    parser.add_argument("--list", action="store_true", help="List all consumer groups.")
    parser.add_argument(
        "--describe",
        action="store_true",
        help="Describe consumer group and list offset lag related to given group.",
    )
    parser.add_argument(
        "--delete",
        action="store_true",
        help="Pass in groups to delete topic partition offsets and ownership information.",
    )
    parser.add_argument(
        "--reset-offsets", action="store_true", help="Reset offsets of consumer group (--dry-run by default)."
    )
    parser.add_argument("--group", action="append", default=[], help="The consumer group we wish to act on.")
    parser.add_argument("--all-groups", action="store_true", help="Apply to all consumer groups.")
    parser.add_argument(
        "--topic", action="append", default=[], help="The topic whose offsets to reset: topic or topic:0,1,2."
    )
    parser.add_argument(
        "--all-topics",
        action="store_true",
        help="Consider all topics assigned to a group in the reset-offsets process.",
    )
    parser.add_argument("--to-earliest", action="store_true", help="Reset offsets to earliest offset.")
    parser.add_argument("--to-latest", action="store_true", help="Reset offsets to latest offset.")
    parser.add_argument("--to-offset", type=int, help="Reset offsets to a specific offset.")
    parser.add_argument(
        "--shift-by",
        type=int,
        help="Reset offsets shifting current offset by 'n', where 'n' can be positive or negative.",
    )
    parser.add_argument("--to-current", action="store_true", help="Reset offsets to current offset.")
    parser.add_argument(
        "--dry-run", action="store_true", help="Only show results without executing changes (the default)."
    )
    parser.add_argument("--execute", action="store_true", help="Execute the operation.")
    parser.add_argument(
        "--offsets",
        action="store_true",
        help="Describe the group and list all topic partitions with their offset lag (default).",
    )
    parser.add_argument("--members", action="store_true", help="Describe members of the group.")
    parser.add_argument(
        "--verbose", action="store_true", help="With --members: also the assigned partitions."
    )
    parser.add_argument(
        "--state",
        nargs="?",
        const="",
        help="With --describe/--list: the group's state (--list --state S: only groups in S).",
    )
    parser.add_argument("--timeout", type=int, help="The timeout for some use cases (ms).")
    return parser


def _widths(rows: list[list[str]], minimum: int = 15) -> list[int]:
    return [max(minimum, *(len(r[i]) for r in rows)) for i in range(len(rows[0]))]


def _print_rows(header: list[str], rows: list[list[str]], fixed: dict[int, int]) -> None:
    """Kafka's ``printf("\\n%-Ns %-Ns ...")`` tables: each row starts a new line (so the table
    begins with a blank line) and the last one ends with a newline."""
    widths = _widths([header, *rows])
    widths = [fixed.get(i, w) for i, w in enumerate(widths)]
    out = []
    for row in [header, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)]
        out.append("\n" + " ".join([*cells, row[-1]]))
    sys.stdout.write("".join(out) + "\n")


def _groups(admin: Any, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g.group_id for g in admin.list_consumer_groups()]
    if not args.group:
        raise UsageError("Option [describe] takes one of these options: [all-groups], [group]")
    return list(args.group)


def _announce(group: str, state: str) -> bool:
    """Kafka's notes before a group's table; False when the group does not exist."""
    if state == "Dead":
        print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
        return False
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in _REBALANCING:
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return True


def _describe(admin: Any, args: argparse.Namespace) -> None:
    groups = _groups(admin, args)
    descriptions = admin.describe_consumer_groups(groups)
    for group in groups:
        d = descriptions[group]
        lag = admin.consumer_group_lag(group) if d.state != "Dead" else {}
        if not _announce(group, d.state if d.members or lag or d.state != "Empty" else "Empty"):
            continue
        if args.state is not None:
            broker, host, port = d.coordinator
            _print_rows(
                ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                [[group, f"{host}:{port} ({broker})", d.partition_assignor, d.state, str(len(d.members))]],
                {2: 20},
            )
        elif args.members:
            header = ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
            rows = [
                [group, m.member_id, m.host, m.client_id, str(len(m.assignment))]
                for m in sorted(d.members, key=lambda m: m.member_id)
            ]
            if args.verbose:
                header.append("ASSIGNMENT")
                for row, m in zip(rows, sorted(d.members, key=lambda m: m.member_id), strict=True):
                    row.append(",".join(f"{tp.topic}({tp.partition})" for tp in sorted(m.assignment)) or "-")
            _print_rows(header, rows, {} if not args.verbose else {4: 15})
        else:
            owner = {tp: m for m in d.members for tp in m.assignment}
            rows = []
            for tp, info in sorted(lag.items()):
                m = owner.get(tp)
                rows.append(
                    [
                        group,
                        tp.topic,
                        str(tp.partition),
                        "-" if info.committed is None else str(info.committed),
                        "-" if info.log_end_offset < 0 else str(info.log_end_offset),
                        "-" if info.lag is None else str(info.lag),
                        m.member_id if m else "-",
                        m.host if m else "-",
                        m.client_id if m else "-",
                    ]
                )
            header = [
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ]
            _print_rows(header, rows, {2: 10, 3: 15, 4: 15, 5: 15})


def _reset(admin: Any, args: argparse.Namespace) -> None:
    from spark_kafkalite.client import TopicPartition

    chosen = [r for r in _RESETS if getattr(args, r) not in (None, False)]
    if len(chosen) != 1:
        raise UsageError(
            "Option [reset-offsets] takes exactly one of these options: [to-earliest], [to-latest], [to-offset], [shift-by], [to-current]"
        )
    if bool(args.topic) == args.all_topics:
        raise UsageError("Option [reset-offsets] takes one of these options: [all-topics], [topic]")
    if args.execute and args.dry_run:
        raise UsageError("Option [reset-offsets] only accepts one of [execute, dry-run]")
    if not args.execute and not args.dry_run:
        print(
            "WARN: No action will be performed as the --execute option is missing. In a future major release, "
            "the default behavior of this command will be to prompt the user before executing the reset rather "
            "than doing a dry run. You should add the --dry-run option explicitly if you are scripting this "
            "command and want to keep the current default behavior without prompting."
        )
    groups = _groups(admin, args)
    descriptions = admin.describe_consumer_groups(groups)
    for group in groups:
        d = descriptions[group]
        if d.state not in ("Empty", "Dead"):
            raise CliError(
                f"Assignments can only be reset if the group '{group}' is inactive, but the current state is {d.state}."
            )
        committed = admin.list_consumer_group_offsets(group)
        if args.all_topics:
            tps = sorted(committed)
        else:
            tps = []
            for spec in args.topic:
                topic, _, parts = spec.partition(":")
                if parts:
                    tps += [TopicPartition(topic, int(p)) for p in parts.split(",")]
                else:
                    tps += [TopicPartition(topic, p.partition) for p in admin.describe_topics([topic])[topic]]
        earliest = {tp: o.offset for tp, o in admin.list_offsets(dict.fromkeys(tps, -2)).items()}
        latest = {tp: o.offset for tp, o in admin.list_offsets(dict.fromkeys(tps, -1)).items()}
        new: dict[Any, int] = {}
        for tp in tps:
            if args.to_earliest:
                target = earliest[tp]
            elif args.to_latest:
                target = latest[tp]
            elif args.to_offset is not None:
                target = args.to_offset
            elif args.shift_by is not None:
                target = committed.get(tp, latest[tp]) + args.shift_by
            else:
                target = committed.get(tp, latest[tp])
            new[tp] = min(max(target, earliest[tp]), latest[tp])
        if args.execute and new:
            admin.alter_consumer_group_offsets(group, new)
        rows = [[group, tp.topic, str(tp.partition), str(o)] for tp, o in sorted(new.items())]
        _print_rows(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, {0: 30, 1: 30, 2: 10})


def _run(args: argparse.Namespace) -> int:
    from spark_kafkalite.client import KafkaAdminClient

    actions = [a for a in ("list", "describe", "delete", "reset_offsets") if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError(
            "Command must include exactly one action: --list, --describe, --delete, --reset-offsets"
        )
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    config = client_config(args, "kafka-consumer-groups")
    if args.timeout is not None:
        config["default.api.timeout.ms"] = str(args.timeout)
    with KafkaAdminClient(config) as admin:
        if args.list:
            listings = admin.list_consumer_groups()
            if args.state is None:
                for g in listings:
                    print(g.group_id)
            else:
                wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
                rows = [
                    [g.group_id, g.state or "Unknown"]
                    for g in listings
                    if not wanted or (g.state or "").lower() in wanted
                ]
                width = max(15, *(len(r[0]) for r in rows)) if rows else 15
                print(f"{'GROUP'.ljust(width)} STATE")
                for group, state in rows:
                    print(f"{group.ljust(width)} {state}")
        elif args.describe:
            _describe(admin, args)
        elif args.delete:
            groups = _groups(admin, args)
            admin.delete_consumer_groups(groups)
            print(
                "Deletion of requested consumer groups ("
                + ", ".join(f"'{g}'" for g in groups)
                + ") was successful."
            )
        else:
            _reset(admin, args)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kafka-consumer-groups.sh``; returns the exit status."""
    return run_tool(build_parser(), argv, _run, "Error: Executing consumer group command failed due to ")
