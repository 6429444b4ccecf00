"""``python -m bench``: run every benchmark in ``bench/`` (issue #10 item 6), print each
ours-vs-peer ratio and the peak RSS of the broker and the Python workers, and regenerate
BENCHMARKS.md: each script's run is stored in ``bench/results.json`` (replacing its previous run)
and the whole file is rendered from the stored runs (``bench/report.py``).

Each script runs as its own process with ``KAFKALITE_BENCH_JSON`` set, so its printed tables are
also written as JSON lines (``_common.emit_table``). Peak RSS: while a script runs, its process
tree is sampled from ``/proc`` (``VmHWM``, each process's own high-water mark) and grouped by
role: the broker (``python -m broker``), Spark's Python workers (``pyspark.daemon`` / ``worker``),
the JVM, and the benchmark's own Python process (the client under test).

    python -m bench [--quick] [--only spark_read consume ...] [--no-write] [--render]
    python -m bench scale          # one benchmark by name (as --only)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench import report
from bench._common import machine_summary

BENCH_DIR = Path(__file__).resolve().parent

# (script, full-run arguments, --quick arguments)
BENCHES: list[tuple[str, list[str], list[str]]] = [
    ("spark_read", ["--records", "1000000"], ["--records", "200000"]),
    ("read_memory", ["--records", "1000000"], ["--records", "300000"]),
    ("consume", [], ["--records", "100000"]),
    ("produce", [], ["--records", "100000"]),
    ("broker_ingest", [], ["--quick"]),
    ("metrics_overhead", [], ["--quick"]),  # issue #22: the Prometheus meters on vs off
    ("metrics_handler_cost", [], ["--quick"]),  # issue #22: the meters inside the request handler
    ("spark_write", ["--records", "300000"], ["--records", "100000"]),
    ("replication", [], ["--records", "30000", "--failovers", "1"]),
    ("spark_latency", [], ["--seconds", "10"]),
    ("failover", [], []),  # bench/failover.py, when present
    ("security", [], ["--quick"]),
    ("scale", [], ["--quick"]),  # issue #19: replication at 1,000 / 4,000 partitions, 1,000 clients
    ("loop_latency", [], ["--quick"]),  # issue #25: probe latency under CPU-heavy work
    # issue #26: librdkafka's integration tests 0001-0150 as a judge of the broker
    ("librdkafka_suite", ["--jobs", "2"], ["--jobs", "2", "--tests", "0001-0030"]),
]

# Benchmarks that take longer than --timeout-s by design: their own bound (seconds).
LONG_TIMEOUT_S = {"librdkafka_suite": 4 * 3600.0}


# ---------------------------------------------------------------------------------------------
# peak RSS of a process tree


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _role(cmdline: str) -> str:
    if re.search(r"-m broker\b", cmdline):
        return "broker"
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline or "pyspark/daemon" in cmdline:
        return "python worker"
    if "java" in cmdline.split(" ", 1)[0]:
        return "jvm"
    if "python" in cmdline.split(" ", 1)[0]:
        return "bench driver"
    return "other"


@dataclass
class RssSampler:
    """Samples ``VmHWM`` of every process under ``root_pid`` every ``interval_s``; keeps the
    maximum per role, and per role the largest single process."""

    root_pid: int
    interval_s: float = 0.25
    peak_kib: dict[str, int] = field(default_factory=dict)
    idle_worker_kib: int | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        children = _children_map()
        stack = [self.root_pid]
        while stack:
            pid = stack.pop()
            stack.extend(children.get(pid, []))
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                cmdline = (
                    Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            m = re.search(r"VmHWM:\s+(\d+) kB", status)
            if not m:
                continue
            hwm = int(m.group(1))
            role = _role(cmdline)
            if hwm > self.peak_kib.get(role, 0):
                self.peak_kib[role] = hwm
            if role == "python worker":
                rss = re.search(r"VmRSS:\s+(\d+) kB", status)
                if rss and (self.idle_worker_kib is None or int(rss.group(1)) < self.idle_worker_kib):
                    self.idle_worker_kib = int(rss.group(1))  # smallest RSS seen: an idle worker

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


# ---------------------------------------------------------------------------------------------
# running and reporting


@dataclass
class Run:
    script: str
    argv: list[str]
    seconds: float
    returncode: int
    tables: list[dict]
    peak_kib: dict[str, int]
    idle_worker_kib: int | None
    tail: str = ""


def run_script(script: str, argv: list[str], timeout_s: float) -> Run:
    with tempfile.NamedTemporaryFile(prefix=f"bench-{script}-", suffix=".jsonl", delete=False) as tmp:
        json_path = tmp.name
    env = dict(os.environ, KAFKALITE_BENCH_JSON=json_path, PYSPARK_PYTHON=sys.executable)
    cmd = [sys.executable, str(BENCH_DIR / f"{script}.py"), *argv]
    print(f"\n=== {script}: {' '.join(cmd[1:])}", flush=True)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sampler = RssSampler(proc.pid)
    lines: list[str] = []
    assert proc.stdout is not None
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            sys.stdout.write(line)
            lines.append(line)
        proc.wait()
    finally:
        timer.cancel()
        sampler.stop()
    tables = []
    try:
        with open(json_path, encoding="utf-8") as f:
            tables = [json.loads(line) for line in f if line.strip()]
    finally:
        os.unlink(json_path)
    return Run(
        script,
        argv,
        time.monotonic() - started,
        proc.returncode,
        tables,
        sampler.peak_kib,
        sampler.idle_worker_kib,
        "".join(lines[-15:]),
    )


def _mib(kib: int | None) -> str:
    return "-" if kib is None else f"{kib / 1024:,.0f}"


def print_summary(runs: list[Run]) -> None:
    """Ratios and peak RSS on the console."""
    print("\n=== ratios (ours vs peer, same run)")
    for r in (r for run in runs for r in report.ratios(run.script, run.tables)):
        goal = ""
        if r.pair.goal is not None:
            goal = f"  (goal ≥ {r.pair.goal:g}×: {'met' if r.ratio >= r.pair.goal else 'NOT met'})"
        print(
            f"{r.pair.script:14} {r.ratio:6.2f}×  {r.ours} {r.ours_value:,.0f} vs {r.peer} {r.peer_value:,.0f}{goal}"
        )
        print(f"{'':14}          [{r.table}]")
    print("\n=== peak RSS (MiB)")
    for run in runs:
        roles = ", ".join(f"{k} {_mib(v)}" for k, v in sorted(run.peak_kib.items()))
        print(f"{run.script:14} {roles}; exit {run.returncode}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a noisy or busy machine")
    parser.add_argument("names", nargs="*", metavar="NAME", help="run only these benchmarks (as --only)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks")
    parser.add_argument(
        "--no-write", action="store_true", help="do not touch BENCHMARKS.md or bench/results.json"
    )
    parser.add_argument(
        "--render", action="store_true", help="only rewrite BENCHMARKS.md from bench/results.json"
    )
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per benchmark")
    args = parser.parse_args(argv)
    if args.names:
        args.only = [*(args.only or []), *args.names]
    unknown = sorted(set(args.only or []) - {script for script, _, _ in BENCHES})
    if unknown:
        parser.error(
            f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(s for s, _, _ in BENCHES)}"
        )
    order = [script for script, _, _ in BENCHES]
    stored = report.load_results(report.RESULTS_JSON)
    if args.render:
        report.write(stored, order, report.BENCHMARKS_MD)
        print(f"wrote {report.BENCHMARKS_MD} from {report.RESULTS_JSON}")
        return 0
    via = "python -m bench" + (" --quick" if args.quick else "")
    runs: list[Run] = []
    for script, full, quick in BENCHES:
        if args.only and script not in args.only:
            continue
        if not (BENCH_DIR / f"{script}.py").exists():  # a benchmark not in this checkout
            continue
        load_at_start = os.getloadavg()[0]
        timeout_s = max(args.timeout_s, LONG_TIMEOUT_S.get(script, 0.0))
        run = run_script(script, quick if args.quick else full, timeout_s)
        runs.append(run)
        if not args.no_write:  # after each script, so a cut-off run still leaves what it measured
            stored[script] = report.record(
                script=script,
                argv=run.argv,
                via=via,
                date=f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
                machine=machine_summary(),
                load_average=(load_at_start, os.getloadavg()[0]),
                seconds=run.seconds,
                exit_code=run.returncode,
                peak_rss_mib={role: kib / 1024 for role, kib in run.peak_kib.items()},
                tables=run.tables,
            )
            report.save_results(stored, report.RESULTS_JSON)
            report.write(stored, order, report.BENCHMARKS_MD)
    print_summary(runs)
    failed = [r.script for r in runs if r.returncode != 0]
    if not args.no_write and runs:
        print(f"\nwrote {report.BENCHMARKS_MD} and {report.RESULTS_JSON}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
