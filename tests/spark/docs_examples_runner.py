"""The code examples of README.md and docs/*.md, found and run (by test_docs_examples.py).

Every fenced ``python`` or ``bash`` block is an example. A block runs unless the line just
before its fence is a marker (an HTML comment, invisible on the rendered page):

- ``<!-- example: secured -->``: a python block run against a SASL_SSL ``LocalCluster``, with
  ``servers``, ``ca_location``, ``username`` and ``password`` (SCRAM-SHA-512) of that cluster in
  its namespace and a topic ``events`` holding one record there;
- ``<!-- example: skip (reason) -->``: not run here, for the reason given (a set-up command that
  CI itself runs, a long-running server, a harness that takes minutes); the reason is required.

Python blocks of one file run in order in one namespace (a page's later examples use what its
first set up), in this process: they share one SparkSession (``getOrCreate()`` returns the one
started here) and so one JVM start. Bash blocks run with ``bash -euo pipefail`` in a temporary
directory, with this checkout first on ``PYTHONPATH``, ``KAFKALITE_BOOTSTRAP_SERVERS`` naming a
one-broker ``LocalCluster`` (the ``kafkalite`` CLI's default ``--bootstrap-server``) and
``KAFKALITE_CLUSTER_DIR`` a temporary directory (``kafkalite cluster up``'s default). A block whose code is identical to one already run
is not run twice (its result is reused).

    python tests/spark/docs_examples_runner.py RESULTS_JSONL [--docs | FILE.md ...] \
        [--scripts EXAMPLES_DIR BOOTSTRAP SCRIPT ...]

writes one JSON line per block: ``{"id": "docs/spark.md:42", "status": 0, "seconds": ..,
"output": ..}`` (status 0 = passed; the output is kept for failures). ``--docs`` runs
:func:`doc_files`. ``--scripts`` then runs those examples/ scripts in this same interpreter and
JVM (``examples_runner.run_scripts``: its markers on stdout), after the examples' SparkSession is
stopped: each script starts its own SparkContext, as in a process of its own, without paying
another JVM start and warm-up (tests/spark/conftest.py, ``examples_run``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LANGUAGES = ("python", "bash")
MARKER = re.compile(r"^<!-- example: (?P<kind>[a-z]+)(?: \((?P<reason>[^)]*)\))? -->$")
KINDS = ("run", "secured", "skip")


@dataclass(frozen=True)
class Block:
    """One fenced code block: ``path`` relative to the repository, ``line`` of its fence (1-based)."""

    path: str
    line: int
    language: str
    code: str
    kind: str  # one of KINDS
    reason: str = ""

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def doc_files(repo: Path = REPO) -> list[Path]:
    """README.md and every page under docs/."""
    return [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]


def extract(path: Path, repo: Path = REPO) -> list[Block]:
    """The python and bash blocks of one Markdown file.

    Raises:
        ValueError: an unknown marker, a skip without a reason, a marker on a non-example block,
            or an unterminated fence.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = str(path.relative_to(repo))
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(`{3,})\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        ticks, language = fence.group(1), fence.group(2).lower()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(ticks)), None)
        if end is None:
            raise ValueError(f"{rel}:{i + 1}: unterminated code fence")
        marker = MARKER.match(lines[i - 1].strip()) if i > 0 else None
        if i > 0 and lines[i - 1].strip().startswith("<!-- example") and marker is None:
            raise ValueError(f"{rel}:{i}: malformed example marker {lines[i - 1]!r}")
        kind = marker.group("kind") if marker else "run"
        reason = (marker.group("reason") or "") if marker else ""
        if kind not in KINDS:
            raise ValueError(f"{rel}:{i}: unknown example kind {kind!r} (one of {KINDS})")
        if kind == "skip" and not reason.strip():
            raise ValueError(f"{rel}:{i}: an example marked skip must say why: <!-- example: skip (why) -->")
        if language in LANGUAGES:
            if kind == "secured" and language != "python":
                raise ValueError(f"{rel}:{i}: only python examples can be marked secured")
            blocks.append(Block(rel, i + 1, language, "\n".join(lines[i + 1 : end]) + "\n", kind, reason))
        elif marker is not None:
            raise ValueError(f"{rel}:{i}: example marker on a {language or 'plain'} block")
        i = end + 1
    return blocks


# ---------------------------------------------------------------------------------------------
# running


class Environment:
    """What the examples run against, started on first use: the SparkSession, a one-broker
    PLAINTEXT ``LocalCluster`` for bash examples, a SASL_SSL one for secured examples."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._plain: Any = None
        self._secured: dict[str, Any] | None = None

    def spark(self) -> Any:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("kafkalite-docs-examples")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        return spark

    def bootstrap(self) -> str:
        if self._plain is None:
            from spark_kafkalite import LocalCluster

            self._plain = LocalCluster().start()
        return str(self._plain.bootstrap_servers)

    def secured(self) -> dict[str, Any]:
        if self._secured is None:
            from spark_kafkalite import LocalCluster
            from spark_kafkalite.client import KafkaProducer

            cluster = LocalCluster(security="SASL_SSL").start()
            config = cluster.client_config()
            producer = KafkaProducer(config)
            producer.send("events", b"a secured record").result(30)
            producer.close()
            self._secured = {
                "cluster": cluster,
                "servers": config["bootstrap.servers"],
                "ca_location": config["ssl.ca.location"],
                "username": config["sasl.username"],
                "password": config["sasl.password"],
            }
        return {k: v for k, v in self._secured.items() if k != "cluster"}

    def close(self) -> None:
        for cluster in (self._plain, (self._secured or {}).get("cluster")):
            if cluster is not None:
                cluster.stop()


def run_python(code: str, name: str, namespace: dict[str, Any]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(code, name, "exec"), namespace)
        except BaseException:
            traceback.print_exc(file=out)
            return 1, out.getvalue()
    return 0, out.getvalue()


def run_bash(code: str, env: Environment) -> tuple[int, str]:
    cwd = Path(tempfile.mkdtemp(prefix="bash-", dir=env.workdir))
    cluster_dir = Path(tempfile.mkdtemp(prefix="cluster-", dir=env.workdir))
    bin_dir = str(Path(sys.executable).parent)  # the `kafkalite` script of this environment
    child_env = dict(
        os.environ,
        PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
        # the commands (`kafkalite`, `python -m ...`) run this checkout, as the python examples do
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        KAFKALITE_BOOTSTRAP_SERVERS=env.bootstrap(),
        KAFKALITE_CLUSTER_DIR=str(cluster_dir),
    )
    try:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", code],
            cwd=cwd,
            env=child_env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired as exc:
        return 124, f"timed out after {exc.timeout} s\n{exc.stdout or ''}{exc.stderr or ''}"
    finally:  # a failed example must not leave a `kafkalite cluster up` running
        if any(cluster_dir.iterdir()):
            subprocess.run(
                [str(Path(bin_dir) / "kafkalite"), "cluster", "down", "--data-dir", str(cluster_dir)],
                capture_output=True,
                timeout=60,
                env=child_env,
            )
    return result.returncode, result.stdout + result.stderr


def main() -> None:
    results_path, args = Path(sys.argv[1]), sys.argv[2:]
    scripts: list[str] = []
    if "--scripts" in args:
        args, scripts = args[: args.index("--scripts")], args[args.index("--scripts") + 1 :]
    files = doc_files() if args == ["--docs"] else [Path(p).resolve() for p in args]
    from spark_kafkalite.demo.session import expose_auto_registration_module

    os.environ["PYSPARK_PYTHON"] = sys.executable
    expose_auto_registration_module()
    with tempfile.TemporaryDirectory(prefix="kafkalite-docs-") as tmp, open(results_path, "w") as results:
        env = Environment(Path(tmp))
        env.spark()  # the examples' getOrCreate() returns this session
        done: dict[tuple[str, str], tuple[int, str]] = {}
        try:
            for path in files:
                namespace: dict[str, Any] = {"__name__": "__main__"}
                for block in extract(path):
                    started = time.monotonic()
                    if block.kind == "skip":
                        continue
                    key = (block.language, block.code)
                    if block.kind == "run" and key in done:
                        status, output = done[key]
                    elif block.language == "bash":
                        status, output = run_bash(block.code, env)
                    else:
                        if block.kind == "secured":
                            namespace.update(env.secured())
                        status, output = run_python(block.code, block.id, namespace)
                    done[key] = (status, output)
                    seconds = time.monotonic() - started
                    print(f"{block.id}: exit {status} in {seconds:.1f} s", file=sys.stderr, flush=True)
                    line = {"id": block.id, "status": status, "seconds": seconds, "output": output[-6000:]}
                    results.write(json.dumps(line) + "\n")
                    results.flush()
        finally:
            env.close()
            env.spark().stop()
    if scripts:
        import examples_runner  # beside this file, which is sys.path[0]

        examples_runner.run_scripts(Path(scripts[0]), scripts[1], scripts[2:])


if __name__ == "__main__":
    main()
