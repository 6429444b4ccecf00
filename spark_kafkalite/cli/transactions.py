"""``kafkalite transactions ...``: transactional ids from the console, shaped like Kafka's
``kafka-transactions.sh list`` / ``describe``.

Commands::

    kafkalite transactions list     --bootstrap-server H:P [--state S ...] [--producer-id P ...]
                                    [--transactional-id-pattern REGEX]
    kafkalite transactions describe --bootstrap-server H:P --transactional-id ID [...]

``list`` prints TransactionalId, Coordinator, ProducerId and TransactionState per id;
``describe`` prints, per id, CoordinatorId, TransactionalId, ProducerId, ProducerEpoch,
TransactionState, TransactionTimeoutMs, CurrentTransactionStartTimeMs, TransactionDurationMs and
TopicPartitions (``-`` when no transaction is open), as ``kafka-transactions.sh describe``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from spark_kafkalite.cli.common import add_bootstrap, client_config

__all__ = [
    "add_transactions_parser",
    "cmd_transactions",
    "list_rows",
    "describe_rows",
    "LIST_HEADER",
    "DESCRIBE_HEADER",
]


def add_transactions_parser(commands: Any) -> None:
    """Add the ``transactions`` command to the ``kafkalite`` subparsers ``commands``."""
    txns = commands.add_parser("transactions", help="list or describe transactional ids")
    actions = txns.add_subparsers(dest="transactions_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list the transactional ids of the cluster")
    add_bootstrap(listing)
    listing.add_argument("--state", action="append", default=[], help="only ids in this state (repeatable)")
    listing.add_argument(
        "--producer-id",
        action="append",
        type=int,
        default=[],
        help="only ids of this producer id (repeatable)",
    )
    listing.add_argument(
        "--transactional-id-pattern",
        metavar="REGEX",
        help="only ids this RE2 regular expression matches whole (KIP-1152; brokers with ListTransactions v2)",
    )
    describe = actions.add_parser("describe", help="state, producer and partitions of transactional ids")
    add_bootstrap(describe)
    describe.add_argument("--transactional-id", action="append", required=True, metavar="ID")


def _print_table(out: TextIO, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    for row in [header, *rows]:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n")


LIST_HEADER = ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
DESCRIBE_HEADER = [
    "CoordinatorId",
    "TransactionalId",
    "ProducerId",
    "ProducerEpoch",
    "TransactionState",
    "TransactionTimeoutMs",
    "CurrentTransactionStartTimeMs",
    "TransactionDurationMs",
    "TopicPartitions",
]


def list_rows(admin: Any, args: argparse.Namespace) -> list[list[str]]:
    """Rows of :data:`LIST_HEADER` for ``args.state``, ``args.producer_id`` and
    ``args.transactional_id_pattern`` (shared with ``kafka-transactions.sh list``)."""
    listings = admin.list_transactions(
        args.state, args.producer_id, transactional_id_pattern=args.transactional_id_pattern
    )
    coordinators = {
        t.transactional_id: d.coordinator_id
        for t in listings
        for d in admin.describe_transactions([t.transactional_id]).values()
    }
    return [
        [t.transactional_id, str(coordinators.get(t.transactional_id, "")), str(t.producer_id), t.state]
        for t in listings
    ]


def describe_rows(admin: Any, transactional_ids: list[str]) -> list[list[str]]:
    """Rows of :data:`DESCRIBE_HEADER`, one per id (shared with ``kafka-transactions.sh
    describe``).

    Raises:
        KafkaError: e.g. TRANSACTIONAL_ID_NOT_FOUND for an unknown id.
    """
    descriptions = admin.describe_transactions(transactional_ids)
    now_ms = int(time.time() * 1000)
    rows = []
    for tid in transactional_ids:
        d = descriptions[tid]
        start = d.transaction_start_time_ms
        rows.append(
            [
                str(d.coordinator_id),
                tid,
                str(d.producer_id),
                str(d.producer_epoch),
                d.state,
                str(d.transaction_timeout_ms),
                str(start) if start is not None else "None",
                str(now_ms - start) if start is not None else "None",
                ",".join(f"{tp.topic}-{tp.partition}" for tp in d.topic_partitions),
            ]
        )
    return rows


def cmd_transactions(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``kafkalite transactions ACTION``; returns the exit status.

    Raises:
        KafkaError: e.g. TRANSACTIONAL_ID_NOT_FOUND for an unknown id (printed as one line).
    """
    from spark_kafkalite.client import KafkaAdminClient

    with KafkaAdminClient(client_config(args, "kafkalite-cli")) as admin:
        if args.transactions_command == "list":
            _print_table(out, LIST_HEADER, list_rows(admin, args))
        else:
            _print_table(out, DESCRIBE_HEADER, describe_rows(admin, args.transactional_id))
        return 0
