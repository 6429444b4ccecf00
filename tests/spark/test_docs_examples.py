"""Every python and bash example of README.md and docs/*.md runs and succeeds (issue #20).

The examples run in one subprocess (``docs_examples_runner.py``: one SparkSession and so one JVM
start for all of them, and for the examples/ scripts of test_examples.py after them, one shared
broker for the bash examples, a SASL_SSL one for the secured examples); each example is one test
here, named by its file and line. Examples that cannot run here carry an explicit ``<!-- example: skip (reason) -->`` marker, listed by
``test_skipped_examples_say_why``.
"""

from __future__ import annotations

import importlib.util
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

# the runner also runs the examples/ scripts after these (tests/spark/conftest.py, examples_run)
pytestmark = pytest.mark.timeout(2400)


@pytest.fixture(scope="module")
def results(examples_run: Any) -> dict[str, dict[str, Any]]:
    """Each run block's result, by id; a block the runner did not reach (it crashed or timed out)
    gets status None and the end of the runner's output."""
    by_id = dict(examples_run.blocks)
    for block in RUN:
        by_id.setdefault(block.id, {"status": None, "output": examples_run.tail})
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
