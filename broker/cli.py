"""Command line of the broker: ``python -m broker --config FILE [--override key=value ...]
[--add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]' ...]``.

``--add-scram`` bootstraps SCRAM users the way Kafka's ``kafka-storage format --add-scram`` does
(KIP-900): at startup, each given user that has no credential of that mechanism yet gets one
(salted here, stored salted through the controller); existing credentials are left alone.

Exit codes: 0 after a clean shutdown (SIGTERM / SIGINT), 2 for a bad command line or
configuration (the message names the key; no traceback), 1 when startup fails otherwise (e.g.
the port is in use).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence

from broker.config import ConfigError, KafkaConfig
from broker.controller.scram_control import ScramUpsertion, parse_add_scram
from broker.gc_pauses import freeze_startup_heap
from broker.malloc_tuning import tune_malloc
from broker.tasks import await_cancelled

__all__ = ["main", "run"]

logger = logging.getLogger("broker")

try:  # libuv's event loop: cheaper sockets and transports than asyncio's selector loop
    import uvloop
except ImportError:  # no uvloop for this platform (Windows): asyncio's default loop
    _LOOP_FACTORY: Callable[[], asyncio.AbstractEventLoop] | None = None
else:
    _LOOP_FACTORY = uvloop.new_event_loop


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
        "--add-scram",
        action="append",
        default=[],
        metavar="MECHANISM=[name=USER,password=PASSWORD]",
        help="create this SCRAM credential at startup unless the user already has one for that "
        "mechanism (repeatable; optional iterations=N, salt=BASE64)",
    )
    parser.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="shut down cleanly when the parent process exits (used by LocalCluster)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging level (default INFO)",
    )
    return parser


async def _watch_parent(parent_pid: int, stop: asyncio.Event) -> None:
    while not stop.is_set():
        await asyncio.sleep(0.5)
        if os.getppid() != parent_pid:
            logger.warning("parent process %d exited; shutting down", parent_pid)
            stop.set()


async def run(
    config: KafkaConfig, exit_with_parent: bool = False, add_scram: Sequence[ScramUpsertion] = ()
) -> int:
    """Start a broker and serve until SIGTERM/SIGINT (or, with ``exit_with_parent``, until the
    parent process exits); returns the process exit code. ``add_scram``: see ``--add-scram``."""
    from broker.server import KafkaServer, StartupError

    loop = asyncio.get_running_loop()
    logger.info("event loop: %s.%s", type(loop).__module__, type(loop).__qualname__)
    stop = asyncio.Event()
    # hasattr: SIGXFSZ exists on POSIX only
    if hasattr(signal, "SIGXFSZ"):
        # A write past RLIMIT_FSIZE must fail with EFBIG (-> KAFKA_STORAGE_ERROR), not kill us.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    server = KafkaServer(config, add_scram=add_scram)
    # A multi-node broker waits for the controller quorum during startup: a signal (or the
    # parent's exit) must still stop it.
    watcher = asyncio.create_task(_watch_parent(os.getppid(), stop)) if exit_with_parent else None
    starting = asyncio.create_task(server.startup())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        logger.warning("stop requested during startup")
        starting.cancel()
        await await_cancelled(starting, "startup")
        await server.shutdown()
        if watcher is not None:
            watcher.cancel()
        return 0
    stopping.cancel()
    try:
        starting.result()
    except (StartupError, OSError) as exc:
        logger.error("broker startup failed: %s", exc)
        await server.shutdown()
        print(f"error: broker startup failed: {exc}", file=sys.stderr)
        if watcher is not None:
            watcher.cancel()
        return 1
    # The start-up heap lives as long as the process: out of every later collection (only here,
    # in the broker's own process, never in one that hosts a broker among other work).
    frozen, full_collection_ms = freeze_startup_heap()
    logger.info(
        "froze %d start-up objects out of the cyclic collector (a full collection took %.0f ms)",
        frozen,
        full_collection_ms,
    )
    await stop.wait()
    if watcher is not None:
        watcher.cancel()
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
    try:
        add_scram = [parse_add_scram(text) for text in args.add_scram]
    except ValueError as exc:
        print(f"error: invalid --add-scram: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if applied := tune_malloc():
        logger.info("malloc thresholds: %s", applied)
    try:
        with asyncio.Runner(loop_factory=_LOOP_FACTORY) as runner:
            return runner.run(run(config, exit_with_parent=args.exit_with_parent, add_scram=add_scram))
    except KeyboardInterrupt:
        return 0
