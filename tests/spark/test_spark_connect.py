"""format("kafkalite") over Spark Connect: a local Connect server (``remote("local[2]")``)
in a subprocess does a batch write, a batch read and a streaming topic-to-topic query with
admission control. Needs pyspark's ``connect`` extras (grpcio, grpcio-status,
googleapis-common-protos, zstandard)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)


def test_source_and_sink_over_spark_connect(bootstrap_servers, make_topic, tmp_path: Path) -> None:
    for module in ("grpc", "grpc_status", "google.rpc", "zstandard"):
        pytest.importorskip(module, reason="pyspark[connect] extras are not installed")
    topic, sink = make_topic(partitions=2), make_topic(partitions=1)
    script = Path(__file__).with_name("connect_session_check.py")
    result = subprocess.run(
        [sys.executable, str(script), bootstrap_servers, topic, sink, str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=280,
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("CONNECT-OK"))
    assert "copied=12" in line
    batches = int(line.split("batches=")[1].split()[0])
    assert batches >= 3  # 12 records, maxOffsetsPerTrigger=5
