"""The examples/ scripts run against the session broker, and the notebook executes headless
(nbclient) with its own LocalCluster. The three scripts run one after another in one subprocess
(``examples_runner.py``: each as ``__main__`` with its command line), the one that runs the
documentation's examples first (tests/spark/conftest.py, ``examples_run``), sharing its Spark JVM;
the notebook starts its own."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.timeout(2400)  # the first script test may also run the examples_run fixture


@dataclass(frozen=True)
class ExampleRuns:
    """What the examples_run subprocess did with the scripts: each script's exit status and
    stdout, and the stderr of the whole run (the scripts' parts between the runner's marker lines)."""

    status: dict[str, int]
    stdout: dict[str, str]
    stderr: str


@pytest.fixture(scope="module")
def example_runs(examples_run: Any) -> ExampleRuns:
    """Every script of examples_run.scripts, run once against the session broker."""
    sections = re.findall(r"@@@ BEGIN (\S+)\n(.*?)@@@ END \1 exit=(-?\d+)\n", examples_run.stdout, re.S)
    assert sorted(name for name, _, _ in sections) == sorted(examples_run.scripts), examples_run.tail
    return ExampleRuns(
        status={name: int(status) for name, _, status in sections},
        stdout={name: out for name, out, _ in sections},
        stderr=examples_run.stderr,
    )


def _output(runs: ExampleRuns, script: str) -> str:
    assert runs.status[script] == 0, runs.stdout[script][-3000:] + runs.stderr[-5000:]
    return runs.stdout[script]


def test_batch_read_example(example_runs: ExampleRuns) -> None:
    out = _output(example_runs, "batch_read.py")
    assert "rows: 30" in out
    assert "rows per key: [('user-0', 8), ('user-1', 8), ('user-2', 7), ('user-3', 7)]" in out
    assert "first two offsets of each partition: 6" in out


def test_write_example(example_runs: ExampleRuns) -> None:
    out = _output(example_runs, "write.py")
    assert "records written: 20" in out
    assert "[('source', b'example')]" in out


def test_streaming_etl_example(example_runs: ExampleRuns) -> None:
    out = _output(example_runs, "streaming_etl.py")
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
