"""Command line of the broker: ``python -m broker --config FILE [--override key=value ...]``.

Exit codes: 0 after a clean shutdown (SIGTERM / SIGINT), 2 for a bad command line or
configuration (the message names the key; no traceback), 1 when startup fails otherwise (e.g.
the port is in use).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from broker.config import ConfigError, KafkaConfig

__all__ = ["main", "run"]

logger = logging.getLogger("broker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m broker",
        description="Run one spark-kafkalite broker (Kafka wire protocol, Kafka config keys).",
    )
    parser.add_argument("--config", required=True, metavar="FILE", help="broker .properties file")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key (repeatable; later wins)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO)",
    )
    return parser


async def run(config: KafkaConfig) -> int:
    """Start a broker and serve until SIGTERM/SIGINT; returns the process exit code."""
    from broker.server import KafkaServer, StartupError

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    server = KafkaServer(config)
    try:
        await server.startup()
    except (StartupError, OSError) as exc:
        logger.error("broker startup failed: %s", exc)
        await server.shutdown()
        print(f"error: broker startup failed: {exc}", file=sys.stderr)
        return 1
    await stop.wait()
    await server.shutdown()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        config = KafkaConfig.from_file(args.config, args.override)
    except ConfigError as exc:
        print(f"error: invalid configuration: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return asyncio.run(run(config))
    except KeyboardInterrupt:
        return 0
