"""Every python and bash example of README.md and docs/*.md runs and succeeds (issue #20).

The examples run in one subprocess (``docs_examples_runner.py``: one SparkSession and so one JVM
start for all of them, one shared broker for the bash examples, a SASL_SSL one for the secured
examples); each example is one test here, named by its file and line. Examples that cannot run
here carry an explicit ``<!-- example: skip (reason) -->`` marker, listed by
``test_skipped_examples_say_why``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

RUNNER = Path(__file__).with_name("docs_examples_runner.py")
_spec = importlib.util.spec_from_file_location("docs_examples_runner", RUNNER)
assert _spec is not None and _spec.loader is not None
docs_examples = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = docs_examples  # dataclasses look their module up there
_spec.loader.exec_module(docs_examples)

BLOCKS = [block for path in docs_examples.doc_files() for block in docs_examples.extract(path)]
RUN = [block for block in BLOCKS if block.kind != "skip"]

# ~2-3 min on a quiet 2-core machine (one JVM, brokers started by bash examples); generous bounds
# so that a loaded machine reports slow examples instead of a timeout
RUNNER_TIMEOUT_S = 1500
pytestmark = pytest.mark.timeout(RUNNER_TIMEOUT_S + 120)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each run block's result, by id; a block the runner did not reach (it crashed or timed out)
    gets status None and the end of the runner's output."""
    out = tmp_path_factory.mktemp("docs-examples") / "results.jsonl"
    files = sorted({str(docs_examples.REPO / block.path) for block in RUN})
    try:
        proc = subprocess.run(
            [sys.executable, str(RUNNER), str(out), *files],
            capture_output=True,
            text=True,
            timeout=RUNNER_TIMEOUT_S,
            cwd=docs_examples.REPO,  # Spark's Python workers import the checkout, as the tests do
            env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
        )
        tail = f"runner exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else str(exc.stderr)
        tail = f"runner timed out after {RUNNER_TIMEOUT_S} s\n{stderr[-4000:]}"
    lines = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    by_id = {line["id"]: line for line in lines}
    for block in RUN:
        by_id.setdefault(block.id, {"status": None, "output": tail})
    return by_id


def test_examples_were_found() -> None:
    # README's quickstart and the pages' examples: a broken extractor must not pass by finding none
    assert len(RUN) >= 20, [block.id for block in RUN]
    assert {block.path for block in RUN} >= {"README.md", "docs/spark.md", "docs/client.md"}


def test_skipped_examples_say_why() -> None:
    skipped = [block for block in BLOCKS if block.kind == "skip"]
    assert all(block.reason.strip() for block in skipped)
    assert len(skipped) <= len(RUN) // 2, [f"{block.id}: {block.reason}" for block in skipped]


@pytest.mark.parametrize("block", RUN, ids=[block.id for block in RUN])
def test_example(block: Any, results: dict[str, dict[str, Any]]) -> None:
    result = results[block.id]
    assert result["status"] is not None, f"{block.id} was not run:\n{result['output']}"
    assert result["status"] == 0, f"{block.id} ({block.language}) failed:\n{result['output']}"
