"""The demo's entry points: :func:`main_from_config` runs the whole demo (see the package
docstring), :func:`main` parses ``kafkalite demo``'s flags first."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spark_kafkalite.demo.data import expected_carrier_stats
from spark_kafkalite.demo.pipeline import DemoConfig, check_demo_topics_absent, run_demo
from spark_kafkalite.demo.report import matches_expected, print_result
from spark_kafkalite.demo.session import create_spark_session


def main_from_config(config: DemoConfig) -> int:
    """Run the whole demo (embedded broker unless ``config.bootstrap_servers``); exit status."""
    wall_started = time.monotonic()
    own_dir = config.data_dir is None
    base = Path(tempfile.mkdtemp(prefix="kafkalite-demo-")) if own_dir else Path(config.data_dir)  # type: ignore[arg-type]
    base.mkdir(parents=True, exist_ok=True)
    cluster: Any = None
    try:
        bootstrap = config.bootstrap_servers
        if bootstrap:
            check_demo_topics_absent(bootstrap, config)
        else:
            from spark_kafkalite import LocalCluster

            # brokers > 1: a Raft quorum with default.replication.factor = min(brokers, 3).
            cluster = LocalCluster(brokers=config.brokers, data_dir=base / "broker").start()
            bootstrap = cluster.bootstrap_servers
        spark = create_spark_session(work_dir=str(base))
        try:
            result = run_demo(spark, bootstrap, config, work_dir=base)
            verified = matches_expected(result.carriers, expected_carrier_stats())
        finally:
            spark.stop()
        print_result(result, verified, time.monotonic() - wall_started)
        return 0 if verified else 1
    finally:
        if cluster is not None:
            cluster.stop()
        if own_dir:
            shutil.rmtree(base, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_kafkalite.demo`` / ``examples/flights_demo.py`` (same flags as
    ``kafkalite demo``)."""
    from spark_kafkalite.demo.command import main as command_main

    return command_main(argv)
