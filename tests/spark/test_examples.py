"""The examples/ scripts run as subprocesses against the session broker, and the notebook
executes headless (nbclient) with its own LocalCluster. Each starts its own Spark JVM."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.timeout(300)


def _run(script: str, bootstrap_servers: str) -> str:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--bootstrap-server", bootstrap_servers],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        cwd=EXAMPLES,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result.stdout


def test_batch_read_example(bootstrap_servers: str) -> None:
    out = _run("batch_read.py", bootstrap_servers)
    assert "rows: 30" in out
    assert "rows per key: [('user-0', 8), ('user-1', 8), ('user-2', 7), ('user-3', 7)]" in out
    assert "first two offsets of each partition: 6" in out


def test_write_example(bootstrap_servers: str) -> None:
    out = _run("write.py", bootstrap_servers)
    assert "records written: 20" in out
    assert "[('source', b'example')]" in out


def test_streaming_etl_example(bootstrap_servers: str) -> None:
    out = _run("streaming_etl.py", bootstrap_servers)
    assert "micro-batches: 3 input rows: 40" in out  # 40 orders, at most 15 per micro-batch
    assert "big orders: 24" in out


def test_quickstart_notebook_executes(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(EXAMPLES / "kafkalite_quickstart.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = "".join(
        out.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs
    )
    found = re.search(
        r"30 orders read in batch, 17 big orders written by the stream in (\d+) micro-batches", outputs
    )
    assert found is not None, outputs[-3000:]
    assert int(found.group(1)) >= 3  # maxOffsetsPerTrigger=10 over 30 records
