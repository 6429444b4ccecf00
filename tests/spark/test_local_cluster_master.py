"""The source and sink on master ``local-cluster[2,1,1024]``: tasks run in two executor JVMs
(each with its own Python workers), never in the driver, so everything a task needs must travel
in the pickled reader / writer and input partitions. Runs in a subprocess (its own SparkContext)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(420)


def test_source_and_sink_on_local_cluster_master(bootstrap_servers, make_topic, tmp_path: Path) -> None:
    topic, sink = make_topic(partitions=3), make_topic(partitions=2)
    script = Path(__file__).with_name("local_cluster_check.py")
    result = subprocess.run(
        [sys.executable, str(script), bootstrap_servers, topic, sink, str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=400,
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("LOCAL-CLUSTER-OK"))
    details = dict(item.split("=") for item in line.split()[1:])
    assert int(details["executors"]) == 2
    assert int(details["read_partitions"]) >= 6
    assert int(details["copied"]) == 40
