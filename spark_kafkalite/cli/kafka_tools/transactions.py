"""``kafka-transactions.sh``: Kafka's ``TransactionsCommand`` ``list`` and ``describe`` over
:func:`spark_kafkalite.cli.transactions.list_rows` / :func:`~spark_kafkalite.cli.transactions.describe_rows`
(shared with ``kafkalite transactions``), printed as Kafka's ``ToolsUtils.prettyPrintTable``.

    kafka-transactions.sh --bootstrap-server H:P list [--state S] [--producer-id P]
                          [--transactional-id-pattern REGEX]
    kafka-transactions.sh --bootstrap-server H:P describe --transactional-id ID
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from spark_kafkalite.cli.common import client_config
from spark_kafkalite.cli.kafka_tools.tool import (
    ToolParser,
    ToolSubParser,
    UsageError,
    add_connection,
    print_table,
    run_tool,
)
from spark_kafkalite.cli.transactions import DESCRIBE_HEADER, LIST_HEADER, describe_rows, list_rows

__all__ = ["main", "build_parser"]


def build_parser() -> ToolParser:
    """The options and commands (``list``, ``describe``) of Kafka's ``TransactionsCommand``."""
    parser = ToolParser(
        "kafka-transactions.sh",
        "This tool is used to analyze the transactional state of producers in the cluster.",
    )
    add_connection(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=ToolSubParser)
    listing = commands.add_parser("list", help="List transactions", add_help=False)
    listing.add_argument(
        "--state", action="append", default=[], help="Only transactions in this state (repeatable)."
    )
    listing.add_argument(
        "--producer-id", action="append", type=int, default=[], help="Only transactions of this producer id."
    )
    listing.add_argument(
        "--transactional-id-pattern", help="Only transactional ids this regular expression matches."
    )
    describe = commands.add_parser(
        "describe", help="Describe the state of an active transactional-id.", add_help=False
    )
    describe.add_argument("--transactional-id", action="append", default=[], help="Transactional id")
    return parser


def _run(args: argparse.Namespace) -> int:
    from spark_kafkalite.client import KafkaAdminClient

    if not args.command:
        raise UsageError("A command is required: list or describe")
    if not args.bootstrap_server:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if args.command == "describe" and not args.transactional_id:
        raise UsageError('Missing required argument "[transactional-id]"')
    with KafkaAdminClient(client_config(args, "kafka-transactions")) as admin:
        if args.command == "list":
            print_table(sys.stdout, LIST_HEADER, list_rows(admin, args))
        else:
            print_table(sys.stdout, DESCRIBE_HEADER, describe_rows(admin, args.transactional_id))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``kafka-transactions.sh``; returns the exit status."""
    return run_tool(build_parser(), argv, _run, "Command failed due to ")
