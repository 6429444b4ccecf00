"""Runs examples/ scripts one after another in one interpreter (for test_examples.py, in the
docs_examples_runner.py subprocess, after the documentation's examples), each as
``python examples/<script> --bootstrap-server HOST:PORT`` runs it (as ``__main__``, with that
``sys.argv``). Each script stops its SparkSession; the next one's
``getOrCreate()`` starts a new SparkContext in the same Spark JVM, so the scripts share one JVM
start and its warm-up instead of paying one each. Prints each script's output between
``@@@ BEGIN <script>`` and ``@@@ END <script> exit=<status>`` lines (on stdout, and the same
markers on stderr); a failing script does not stop the next.

    python tests/spark/examples_runner.py EXAMPLES_DIR BOOTSTRAP SCRIPT [SCRIPT ...]
"""

from __future__ import annotations

import runpy
import sys
import traceback
from pathlib import Path


def run_script(script: Path, bootstrap: str) -> int:
    """Run ``script`` as ``__main__``; its exit status (1 for an uncaught exception)."""
    sys.argv = [str(script), "--bootstrap-server", bootstrap]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def run_scripts(examples: Path, bootstrap: str, scripts: list[str]) -> None:
    """Run each of ``scripts`` (file names in ``examples``) in turn, between marker lines."""
    sys.path.insert(0, str(examples))  # the scripts import _example_env from their directory
    for name in scripts:
        for stream in (sys.stdout, sys.stderr):
            print(f"@@@ BEGIN {name}", file=stream, flush=True)
        status = run_script(examples / name, bootstrap)
        for stream in (sys.stdout, sys.stderr):
            print(f"@@@ END {name} exit={status}", file=stream, flush=True)


def main() -> None:
    run_scripts(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])


if __name__ == "__main__":
    main()
