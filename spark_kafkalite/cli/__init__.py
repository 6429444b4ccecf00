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
    kafkalite groups list|describe|delete ...              (see spark_kafkalite.cli.groups)
    kafkalite transactions list|describe ...               (see spark_kafkalite.cli.transactions)
    kafkalite cluster up [--brokers 3] [--data-dir DIR] | status | down   (spark_kafkalite.cli.cluster)
    kafkalite acls add|list|remove ...                     (see spark_kafkalite.cli.acls)
    kafkalite users add|list|remove ...                    (SCRAM users; spark_kafkalite.cli.users)
    kafkalite top --bootstrap-server H:P [--metrics-url URL ...] [--interval S] [--iterations N]
                                          (live view; spark_kafkalite.cli.top)
    kafkalite kafka-path [--dir DIR]     (prints a directory whose bin/ holds kafka-topics.sh etc.;
                                          spark_kafkalite.cli.kafka_tools)

One module per command group: :mod:`.topics`, :mod:`.console` (produce, consume),
:mod:`.groups`, :mod:`.transactions`, :mod:`.cluster`, :mod:`.acls`, :mod:`.users`; :mod:`.common` holds what they
share. The demo's flags live with
the demo (:mod:`spark_kafkalite.demo.command`), which never calls back into this package.

``--bootstrap-server`` defaults to ``$KAFKALITE_BOOTSTRAP_SERVERS``; every command that talks to
brokers takes ``--command-config FILE`` (a properties file of client configs, e.g.
``security.protocol`` and ``sasl.*``, as Kafka's tools do). Errors print one line
(``kafkalite: error: ...``) to stderr and exit with status 1 (130 on Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from spark_kafkalite.cli.acls import add_acls_parser, cmd_acls
from spark_kafkalite.cli.cluster import add_cluster_parser, cmd_cluster
from spark_kafkalite.cli.console import add_consume_parser, add_produce_parser, cmd_consume, cmd_produce
from spark_kafkalite.cli.groups import add_groups_parser, cmd_groups
from spark_kafkalite.cli.kafka_tools.kafka_path import add_kafka_path_parser, cmd_kafka_path
from spark_kafkalite.cli.top import add_top_parser, cmd_top
from spark_kafkalite.cli.topics import add_topics_parser, cmd_topics
from spark_kafkalite.cli.transactions import add_transactions_parser, cmd_transactions
from spark_kafkalite.cli.users import add_users_parser, cmd_users
from spark_kafkalite.console_errors import error_line, run_reporting_errors
from spark_kafkalite.demo.command import add_demo_arguments, run_demo_command

__all__ = ["main", "build_parser", "error_line"]


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of the ``kafkalite`` command."""
    parser = argparse.ArgumentParser(prog="kafkalite", description="spark-kafkalite console tool")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_demo_arguments(commands.add_parser("demo", help="run the NYC flights streaming demo"))
    add_topics_parser(commands)  # kafkalite topics create|list|describe|alter|delete
    add_produce_parser(commands)
    add_consume_parser(commands)
    add_groups_parser(commands)  # kafkalite groups list|describe|delete
    add_transactions_parser(commands)  # kafkalite transactions list|describe
    add_cluster_parser(commands)  # kafkalite cluster up|status|down
    add_acls_parser(commands)  # kafkalite acls add|list|remove
    add_users_parser(commands)  # kafkalite users add|list|remove (SCRAM)
    add_kafka_path_parser(commands)  # kafkalite kafka-path: a $KAFKA_PATH with bin/kafka-*.sh
    add_top_parser(commands)  # kafkalite top: live view of brokers, topics and lag
    return parser


def _run(args: argparse.Namespace) -> int:
    if args.command == "topics":
        return cmd_topics(args)
    if args.command == "produce":
        return cmd_produce(args, sys.stdin)
    if args.command == "groups":
        return cmd_groups(args)
    if args.command == "consume":
        return cmd_consume(args, sys.stdout)
    if args.command == "transactions":
        return cmd_transactions(args, sys.stdout)
    if args.command == "acls":
        return cmd_acls(args)
    if args.command == "users":
        return cmd_users(args, sys.stdin, sys.stdout)
    if args.command == "cluster":
        return cmd_cluster(args, sys.stdout)
    if args.command == "kafka-path":
        return cmd_kafka_path(args)
    if args.command == "top":
        return cmd_top(args, sys.stdout)
    return run_demo_command(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kafkalite`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    return run_reporting_errors(lambda: _run(args))
