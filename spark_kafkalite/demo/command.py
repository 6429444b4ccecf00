"""The demo's command line: its flags (shared by ``kafkalite demo`` and
``python -m spark_kafkalite.demo``) and the ``python -m`` entry point. Imports neither pyspark
nor the ``kafkalite`` CLI, which only adds these flags to its ``demo`` subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from spark_kafkalite.console_errors import run_reporting_errors

__all__ = ["add_demo_arguments", "config_from_args", "run_demo_command", "main"]


def add_demo_arguments(demo: argparse.ArgumentParser) -> None:
    """Add the demo's flags to ``demo`` (the ``kafkalite demo`` subparser or a parser of its own)."""
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


def config_from_args(args: argparse.Namespace) -> Any:
    """The ``DemoConfig`` the parsed flags describe."""
    from spark_kafkalite.demo import DemoConfig

    return DemoConfig(
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


def run_demo_command(args: argparse.Namespace) -> int:
    """Run the demo the parsed flags describe; returns the exit status."""
    from spark_kafkalite.demo import main_from_config

    return int(main_from_config(config_from_args(args)))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_kafkalite.demo`` / ``examples/flights_demo.py`` (same flags as
    ``kafkalite demo``)."""
    parser = argparse.ArgumentParser(prog="kafkalite demo", description="run the NYC flights streaming demo")
    add_demo_arguments(parser)
    args = parser.parse_args(argv if argv is not None else sys.argv[1:])
    return run_reporting_errors(lambda: run_demo_command(args))
