"""Which unit tests run the pure-Python twins differently under ``KAFKALITE_PURE_PYTHON=1``.

``.ci/run`` runs the record-path tests a second time on the pure-Python twins of the compiled
modules (``spark_kafkalite/native.py``, ``TWINS``). A unit test belongs in that
pass only when the switch changes what it runs: it calls a twin's Python functions with the
switch set that it does not call without it (through ``native.load_twin``). A test that
never reaches a twin, or that imports both twins itself (``impl`` parametrized over
``record_encode`` and ``_record_encode``), runs the same code in both passes.

As a pytest plugin (``-p twin_usage`` with ``.ci`` on ``PYTHONPATH``) it records, per test id
(and per module collected, for data built at import), the twin functions called on any thread
(``sys.setprofile``) into ``$TWIN_USAGE_OUT`` (JSON). Run as a script it runs ``tests/unit``
both ways (~4 min on 2 cores) and prints the entries of ``.ci/pure_pass_skip.txt``: the unit
test files, and in files it keeps the test functions, that run the same code in both passes.

    python .ci/twin_usage.py > .ci/pure_pass_skip.txt
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

TWIN_FILES = (
    "spark_kafkalite/protocol/record_decode.py",
    "spark_kafkalite/protocol/record_encode.py",
    "spark_kafkalite/protocol/record_rebuild.py",
    "spark_kafkalite/client/producer/send_path.py",
    "spark_kafkalite/client/producer/batch_state.py",
)
HEADER = """\
# Unit tests left out of the pure-Python pass of .ci/run (KAFKALITE_PURE_PYTHON=1): with the switch
# set they run the same code as without it (they reach no pure-Python twin through
# native.load_twin, or they import both twins themselves). One path per line: a file is
# ignored, a file::test_function deselected. Every other test file of tests/unit runs in that pass,
# new files included. Regenerate with: python .ci/twin_usage.py > .ci/pure_pass_skip.txt
"""

_calls: dict[str, set[str]] = {}
_current: list[str | None] = [None]


def _profile(frame: FrameType, event: str, arg: Any) -> None:
    # a module or class body (not CO_OPTIMIZED) is an import, not a use of the twin
    if event != "call" or _current[0] is None or not frame.f_code.co_flags & inspect.CO_OPTIMIZED:
        return
    if frame.f_code.co_filename.endswith(TWIN_FILES):
        name = f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"
        _calls.setdefault(_current[0], set()).add(name)


def _traced(context: str) -> Iterator[None]:
    _current[0] = context
    sys.setprofile(_profile)
    threading.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        _current[0] = None


def _hookwrapper(fn: Any) -> Any:
    import pytest

    return pytest.hookimpl(hookwrapper=True)(fn)


@_hookwrapper
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
    yield from _traced(item.nodeid)


@_hookwrapper
def pytest_make_collect_report(collector: Any) -> Iterator[None]:
    yield from _traced(f"{collector.nodeid}::<collect>")


def pytest_sessionfinish(session: Any) -> None:
    with open(os.environ["TWIN_USAGE_OUT"], "w") as out:
        json.dump({test: sorted(calls) for test, calls in _calls.items()}, out)


def _run(pure: bool, out: Path, repo: Path) -> dict[str, list[str]]:
    env = dict(os.environ, TWIN_USAGE_OUT=str(out), PYTHONPATH=str(Path(__file__).parent))
    env.pop("KAFKALITE_PURE_PYTHON", None)
    if pure:
        env["KAFKALITE_PURE_PYTHON"] = "1"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "twin_usage", "-p", "no:cacheprovider", "tests/unit"],
        cwd=repo,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return dict(json.loads(out.read_text()))


def skip_list(
    native: dict[str, list[str]], pure: dict[str, list[str]], ids: list[str], repo: Path
) -> list[str]:
    """The files no test of which runs differently with the switch (``native`` / ``pure``: the
    twin functions each test id called without / with it); in the other files, the test
    functions that import a twin themselves (they call one without the switch) and run the same
    with it in every parametrization. A function that reaches no twin either way stays with its
    file: what a property test reaches can depend on the examples drawn."""
    changed = {test for test, calls in pure.items() if set(calls) != set(native.get(test, ()))}
    changed_files = {test.split("::")[0] for test in changed}
    built_at_import = {test.split("::")[0] for test in changed if test.endswith("::<collect>")}
    files = [str(p.relative_to(repo)) for p in sorted((repo / "tests/unit").glob("test_*.py"))]
    skip = [path for path in files if path not in changed_files]
    same: dict[str, bool] = {}  # file::function -> imports a twin and no parametrization changed
    explicit: set[str] = set()
    for test in ids:
        path = test.split("::")[0]
        if "::" not in test or path not in changed_files - built_at_import:
            continue
        function = test.split("[")[0]
        same[function] = same.get(function, True) and test not in changed
        if native.get(test):
            explicit.add(function)
    return skip + [function for function, unchanged in same.items() if unchanged and function in explicit]


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        native = _run(False, Path(tmp) / "native.json", repo)
        pure = _run(True, Path(tmp) / "pure.json", repo)
    ids = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider", "tests/unit"],
        cwd=repo,
        env=dict(os.environ, KAFKALITE_PURE_PYTHON="1"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    sys.stdout.write(HEADER + "".join(f"{path}\n" for path in sorted(skip_list(native, pure, ids, repo))))


if __name__ == "__main__":
    main()
