"""librdkafka's own integration tests (``tests/``, tag v2.15.0) as a judge of our broker (issue #26).

librdkafka's test runner (``tests/test-runner``) is built outside this repository, by default under
``/work/librdkafka-tests`` (``--suite-dir`` or ``$LIBRDKAFKA_TESTS``): ``src/`` holds the source of
the tag and the built ``src/tests/test-runner``. When it is absent, ``--build`` builds it from
``src/`` or from a librdkafka git directory (``--git-dir``); without either it prints how.

Every broker-dependent test (not ``TEST_F_LOCAL``, not ``TEST_F_MANUAL``) of the selected numbers
runs in full mode (no ``-Q``) with ``TEST_KAFKA_VERSION=4.0.0``, one ``test-runner`` process per
test number (``TESTS=<number>``, ``-L``), each bounded by ``--timeout-s`` or ``LONG_TESTS_S`` (a
test still running then is recorded as a hang and the next one runs), against clusters started
here with
``LocalCluster`` (``python -m broker``, generated configs, ``num.partitions=4`` as the suite's
scenarios expect, Kafka's ``group.initial.rebalance.delay.ms`` of 3 s, the ACL authorizer with
``allow.everyone.if.no.acl.found``, on 127.0.0.1; see ``BROKER_CONFIG``):

- scenario ``default`` on one broker, except the numbers in ``THREE_BROKER_TESTS``;
- scenario ``default`` on three brokers (racks ``RACK1``-``RACK3``, the rack-aware replica
  selector) for ``THREE_BROKER_TESTS``;
- scenario ``noautocreate`` (``auto.create.topics.enable=false``) on three brokers.

``test.conf`` (``RDKAFKA_TEST_CONF``) points at the cluster; ``BROKERS`` holds its bootstrap
servers; ``KAFKA_PATH`` is the directory ``kafkalite kafka-path`` writes (``bin/`` with Kafka's
scripts, which tests run as ``$KAFKA_PATH/bin/kafka-topics.sh`` and ``kafka-acls.sh``). Per test the table gives its result
(passed / failed / skipped / hang), its duration and the first failure: the runner's first
``### Test "..." failed at <file>:<line>`` report and its message (or the skip reason).

    python bench/librdkafka_suite.py [--tests 0001-0150] [--timeout-s 300] [--jobs 1]
    python bench/librdkafka_suite.py --tests 0011,0081     # some numbers only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: bench/ is sys.path[0], the package is one up
    sys.path.insert(0, str(REPO))

from spark_kafkalite.cli.kafka_tools.kafka_path import default_kafka_path, write_kafka_path  # noqa: E402
from spark_kafkalite.local_cluster import LocalCluster  # noqa: E402

DEFAULT_SUITE_DIR = Path(os.environ.get("LIBRDKAFKA_TESTS", "/work/librdkafka-tests"))
LIBRDKAFKA_TAG = "v2.15.0"
KAFKA_VERSION = "4.0.0"

#: Test numbers run on three brokers in scenario ``default`` (0101: fetch from the closest
#: replica, KIP-392, on an RF 3 topic across three racks; 0098 and 0103: transactions on topics of
#: the suite's replication factor of 3).
THREE_BROKER_TESTS = frozenset({"0098", "0101", "0103"})

#: Multi-broker clusters: broker ``N`` in rack ``RACK<N>`` with Kafka's rack-aware replica
#: selector, as 0101 expects (its consumer picks the ``client.rack`` of a follower).
RACK_CONFIG = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}

#: Broker config of every cluster: the suite's scenarios' partition count; Kafka's default
#: ``group.initial.rebalance.delay.ms`` in place of ``LocalCluster``'s 0 (consumers that subscribe
#: together join one rebalance, as 0113 and 0118 expect of a Kafka broker); an ACL authorizer
#: that lets everyone do what no ACL names (0081's CreateAcls / DescribeAcls / DeleteAcls expect
#: ACLs to be stored, which a broker without an authorizer refuses with SECURITY_DISABLED).
BROKER_CONFIG = {
    "num.partitions": "4",
    "group.initial.rebalance.delay.ms": "3000",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}

#: Per-test-number timeouts above ``--timeout-s`` (seconds): 0081 runs ~60 admin subtests in
#: one process (ListConsumerGroups alone ~110 s on 2 busy cores; about 7 minutes in all), 0113
#: some 30 cooperative-rebalance subtests with their session timeouts.
LONG_TESTS_S = {"0081": 1200.0, "0113": 1200.0}

#: Tests that cannot pass against any broker here, and why (named in BENCHMARKS.md).
CANNOT_PASS = {
    "0098_consumer_txn": "its producer is Kafka's Java client (tests/java TransactionProducerCli, "
    "built and run through java/run-class.sh with $KAFKA_PATH/libs): needs a JVM and Kafka's jars",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SUMMARY_ROW = re.compile(
    r"^\|\s*(?P<name>\d{4}_\w+|<MAIN>)\s*\|\s*(?P<state>[A-Z]+)\s*\|\s*(?P<seconds>[\d.]+)s\s*\|\s?(?P<extra>.*)$"
)
_FAILED_AT = re.compile(
    r'^### Test "(?P<name>\d{4}_\w+)(?: \((?P<subtest>.*)\))?" failed at '
    r"(?P<where>[^:]+:\d+):(?P<function>\w*)\(\) at [^#]*: ###$"
)
_RUNNING = re.compile(r"================= Running test (\d{4}_\w+) =================")
_FINISHED = re.compile(r"================= Test (\d{4}_\w+) (PASSED|FAILED|SKIPPED)")


# ---------------------------------------------------------------------------------------------
# the suite's test table and the runner's output (pure functions, unit-tested)


@dataclass(frozen=True)
class SuiteTest:
    """One ``_TEST(...)`` entry of ``tests/test.c``: its name (``0011_produce_batch``), number
    (``"0011"``), whether it needs no broker (``TEST_F_LOCAL``) or runs only when named
    (``TEST_F_MANUAL``), the scenarios it runs in (``.scenario``, default ``default``), and whether
    librdkafka marks it a known issue (``TEST_F_KNOWN_ISSUE``: the runner skips it by default)."""

    name: str
    local: bool
    manual: bool
    scenarios: tuple[str, ...]
    known_issue: bool = False

    @property
    def number(self) -> str:
        return self.name[:4]


def parse_test_table(test_c: str) -> list[SuiteTest]:
    """The entries of the ``tests[]`` table in librdkafka's ``tests/test.c`` source text."""
    tests = []
    for m in re.finditer(r"\b_TEST\(", test_c):
        depth, i = 1, m.end()
        while depth and i < len(test_c):
            depth += {"(": 1, ")": -1}.get(test_c[i], 0)
            i += 1
        args = test_c[m.end() : i - 1]
        name = args.split(",", 1)[0].strip()
        if not re.fullmatch(r"\d{4}_\w+", name):
            continue  # the macro's own definition
        scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', args)
        tests.append(
            SuiteTest(
                name=name,
                local="TEST_F_LOCAL" in args,
                manual="TEST_F_MANUAL" in args,
                scenarios=tuple(scenario.group(1).split(",")) if scenario else ("default",),
                known_issue=re.search(r"\bTEST_F_KNOWN_ISSUE\b", args) is not None,
            )
        )
    return tests


@dataclass
class TestResult:
    """One test's outcome: ``result`` is passed / failed / skipped / hang / not run;
    ``reason`` the first failure (``<file>:<line>: <message>``) or the skip reason."""

    name: str
    result: str
    seconds: float
    reason: str = ""
    cluster: str = ""


def parse_runner_output(output: str, names: Iterable[str], timed_out: bool) -> list[TestResult]:
    """Results of ``names`` from one ``test-runner`` process's combined output.

    The summary table (``|name | STATE | 1.234s | failstr``) gives states and durations; the
    first ``### Test "name (subtest)" failed at file:line:function() ...`` block of a test gives
    where and why it first failed. When the process was killed (``timed_out``) there is no
    summary: a test that started and did not finish is a hang, one that never started is "not
    run"."""
    lines = [_ANSI.sub("", line).rstrip("\r") for line in output.splitlines()]
    summary: dict[str, tuple[str, float, str]] = {}
    first_failure: dict[str, str] = {}
    started: set[str] = set()
    finished: dict[str, str] = {}
    for i, line in enumerate(lines):
        if m := _SUMMARY_ROW.match(line):
            summary[m["name"]] = (m["state"], float(m["seconds"]), m["extra"].strip())
        elif (m := _FAILED_AT.match(line)) and m["name"] not in first_failure:
            message = lines[i + 1].strip() if i + 1 < len(lines) else ""
            subtest = f" (subtest {m['subtest']})" if m["subtest"] else ""
            first_failure[m["name"]] = f"{m['where']}: {message}{subtest}"
        if m := _RUNNING.search(line):
            started.add(m[1])
        if m := _FINISHED.search(line):
            finished[m[1]] = m[2]
    results = []
    for name in names:
        if name in summary and not (timed_out and name not in finished):
            state, seconds, extra = summary[name]
            result = {"PASSED": "passed", "FAILED": "failed", "SKIPPED": "skipped"}.get(state, "hang")
            reason = first_failure.get(name, extra) if result in ("failed", "hang") else ""
            if result == "skipped":
                reason = extra
            results.append(TestResult(name, result, seconds, reason))
        elif name in finished:
            results.append(TestResult(name, finished[name].lower(), 0.0, first_failure.get(name, "")))
        elif name in started or (timed_out and not started and not finished):
            why = first_failure.get(name, "")
            results.append(TestResult(name, "hang", 0.0, why or "still running at the per-test timeout"))
        else:
            results.append(TestResult(name, "not run", 0.0, "the runner exited before it"))
    return results


# ---------------------------------------------------------------------------------------------
# building the suite


def runner_path(suite_dir: Path) -> Path:
    return suite_dir / "src" / "tests" / "test-runner"


def build_instructions(suite_dir: Path) -> str:
    return f"""librdkafka's test runner is not built at {runner_path(suite_dir)}. Build it with:

    git clone --branch {LIBRDKAFKA_TAG} --depth 1 https://github.com/confluentinc/librdkafka {suite_dir}/src
    cd {suite_dir}/src
    ./configure --disable-gssapi --disable-curl     # needs libssl-dev, zlib1g-dev, libzstd-dev, rapidjson-dev
    make -j2 libs && make -C tests -j2 build

or run this script with --build (from {suite_dir}/src, or --git-dir <a librdkafka git directory>)."""


def build_suite(suite_dir: Path, git_dir: Path | None) -> None:
    """Configure and build librdkafka and its test runner under ``suite_dir/src`` (from the
    tag's source there, or exported from ``git_dir``)."""
    src = suite_dir / "src"
    if not (src / "configure").exists():
        if git_dir is None:
            raise SystemExit(build_instructions(suite_dir))
        suite_dir.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "--git-dir", str(git_dir), "archive", "--prefix=src/", LIBRDKAFKA_TAG],
            check=True,
            capture_output=True,
        )
        subprocess.run(["tar", "-x", "-C", str(suite_dir)], input=archive.stdout, check=True)
    jobs = str(os.cpu_count() or 2)
    for cmd in (
        ["./configure", "--disable-gssapi", "--disable-curl"],
        ["make", f"-j{jobs}", "libs"],
        ["make", "-C", "tests", f"-j{jobs}", "build"],
    ):
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=src, check=True, stdout=subprocess.DEVNULL)


# ---------------------------------------------------------------------------------------------
# running


@dataclass(frozen=True)
class Phase:
    """One cluster and the test numbers run against it in one scenario."""

    label: str
    brokers: int
    scenario: str
    auto_create: bool
    numbers: tuple[str, ...]


_NEGATIVE_FLAGS = "Filtered due to negative test flags"


def explain_skip(test: SuiteTest, reason: str) -> str:
    """The runner's skip reason, with why for a test it filters out by its flags."""
    if reason == _NEGATIVE_FLAGS and test.known_issue:
        return "librdkafka marks it TEST_F_KNOWN_ISSUE: its runner does not run it by default"
    return reason


def plan(tests: list[SuiteTest], numbers: set[str]) -> tuple[list[Phase], dict[str, list[str]]]:
    """The phases and, per ``"<phase label>/<number>"``, the test names that process reports."""
    chosen = [t for t in tests if t.number in numbers and not t.local and not t.manual]
    names: dict[str, list[str]] = {}
    phases = []
    for label, brokers, scenario, auto_create, pick in (
        ("1 broker", 1, "default", True, lambda t: t.number not in THREE_BROKER_TESTS),
        ("3 brokers", 3, "default", True, lambda t: t.number in THREE_BROKER_TESTS),
        ("3 brokers, noautocreate", 3, "noautocreate", False, lambda t: True),
    ):
        selected = [t for t in chosen if any(scenario == s for s in t.scenarios) and pick(t)]
        phase_numbers = tuple(sorted({t.number for t in selected}))
        for t in selected:
            names.setdefault(f"{label}/{t.number}", []).append(t.name)
        if phase_numbers:
            phases.append(Phase(label, brokers, scenario, auto_create, phase_numbers))
    return phases, names


def parse_numbers(spec: str) -> set[str]:
    """``"0001-0150"`` / ``"0011,0081"`` / mixed -> four-digit test numbers."""
    out: set[str] = set()
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            out.update(f"{n:04d}" for n in range(lo, hi + 1))
        elif part:
            out.add(f"{int(part):04d}")
    return out


def kafka_path() -> Path:
    """The ``$KAFKA_PATH`` the tests get: the default ``kafkalite kafka-path`` directory, its
    ``bin/`` wrappers (re)written for this Python."""
    return write_kafka_path(default_kafka_path())


@contextlib.contextmanager
def cluster_for(phase: Phase, work_dir: Path) -> Iterator[tuple[LocalCluster, Path]]:
    overrides = {
        **BROKER_CONFIG,
        "auto.create.topics.enable": "true" if phase.auto_create else "false",
    }
    data_dir = work_dir / phase.label.replace(" ", "-").replace(",", "")
    racks = {}
    if phase.brokers > 1:
        overrides.update(RACK_CONFIG)
        racks = {node_id: f"RACK{node_id}" for node_id in range(1, phase.brokers + 1)}
    with LocalCluster(
        brokers=phase.brokers, data_dir=data_dir, config_overrides=overrides, racks=racks
    ) as cluster:
        conf = data_dir / "test.conf"
        conf.write_text(
            f"bootstrap.servers={cluster.bootstrap_servers}\n"
            "test.topic.random=true\n"
            f"# {phase.label}, scenario {phase.scenario}\n",
            encoding="utf-8",
        )
        yield cluster, conf


def run_number(
    suite_dir: Path, number: str, phase: Phase, conf: Path, bootstrap: str, timeout_s: float, log_dir: Path
) -> tuple[str, bool, float]:
    """Run one test number in its own ``test-runner`` process; (output, timed out, seconds)."""
    tests_dir = runner_path(suite_dir).parent
    src = tests_dir.parent
    env = dict(
        os.environ,
        TESTS=number,
        TEST_KAFKA_VERSION=KAFKA_VERSION,
        RDKAFKA_TEST_CONF=str(conf),
        BROKERS=bootstrap,
        LD_LIBRARY_PATH=f"{src / 'src'}:{src / 'src-cpp'}",
    )
    env["KAFKA_PATH"] = str(kafka_path())
    log_dir.mkdir(parents=True, exist_ok=True)
    # stdbuf: the runner prints its summary with stdio and may crash while exiting; line
    # buffering keeps the summary.
    cmd = ["stdbuf", "-oL", "-eL", str(runner_path(suite_dir)), "-L", "-s", phase.scenario]
    started = time.monotonic()
    # The runner's directory: tests read ../src/statistics_schema.json (0053) and build and run
    # Java helpers from java/ (0098, 0113) relative to it.
    proc = subprocess.Popen(
        cmd, cwd=tests_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
    text = out.decode(errors="replace")
    (log_dir / f"{number}-{phase.scenario}.log").write_text(text, encoding="utf-8")
    for stats in tests_dir.glob(f"stats_{number}_*.json"):  # written by each test it ran
        with contextlib.suppress(OSError):
            stats.unlink()
    return text, timed_out, time.monotonic() - started


def run_phase(
    suite_dir: Path,
    phase: Phase,
    names: dict[str, list[str]],
    timeout_s: float,
    jobs: int,
    work_dir: Path,
    log_dir: Path,
    tests: list[SuiteTest],
) -> list[TestResult]:
    print(f"\n=== {phase.label}, scenario {phase.scenario}: {len(phase.numbers)} test numbers", flush=True)
    by_name = {t.name: t for t in tests}
    results: list[TestResult] = []
    lock = threading.Lock()
    with cluster_for(phase, work_dir) as (cluster, conf):

        def one(number: str) -> None:
            bound_s = max(timeout_s, LONG_TESTS_S.get(number, 0.0))
            text, timed_out, seconds = run_number(
                suite_dir, number, phase, conf, cluster.bootstrap_servers, bound_s, log_dir
            )
            got = parse_runner_output(text, names[f"{phase.label}/{number}"], timed_out)
            for r in got:
                r.cluster = phase.label
                if r.result == "skipped":
                    r.reason = explain_skip(by_name[r.name], r.reason)
                if r.result == "hang" and not r.seconds:
                    r.seconds = seconds
            with lock:
                results.extend(got)
                for r in got:
                    print(f"{r.name:45} {r.result:8} {r.seconds:7.1f}s  {r.reason[:110]}", flush=True)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            list(pool.map(one, phase.numbers))
    return results


# ---------------------------------------------------------------------------------------------
# reporting


def _cause(r: TestResult) -> str:
    if r.name in CANNOT_PASS and r.result != "passed":
        return "cannot pass here: " + CANNOT_PASS[r.name]
    return r.reason


def report(results: list[TestResult], seconds: float) -> None:
    from _common import emit_table

    order = sorted(results, key=lambda r: r.name)
    rows = [[r.name, r.cluster, r.result, f"{r.seconds:.1f}", _cause(r)[:240]] for r in order]
    counts = {
        k: sum(1 for r in results if r.result == k)
        for k in ("passed", "failed", "skipped", "hang", "not run")
    }
    title = (
        f"librdkafka {LIBRDKAFKA_TAG} integration tests, full mode, TEST_KAFKA_VERSION={KAFKA_VERSION}, "
        "KAFKA_PATH from kafkalite kafka-path"
    )
    columns = ["test", "cluster", "result", "s", "first failure / skip reason"]
    summary = [[k, str(v)] for k, v in counts.items()] + [
        ["tests", str(len(results))],
        ["suite s", f"{seconds:.0f}"],
    ]
    emit_table(f"{title}: totals", ["result", "tests"], summary)
    emit_table(title, columns, rows)
    emit_table(
        "Tests that cannot pass here",
        ["test", "why"],
        [[name, why] for name, why in sorted(CANNOT_PASS.items())],
    )
    width = max((len(r.name) for r in order), default=10)
    print(f"\n{'test':{width}}  {'cluster':24} {'result':8} {'s':>7}  first failure / skip reason")
    for r in order:
        print(f"{r.name:{width}}  {r.cluster:24} {r.result:8} {r.seconds:7.1f}  {_cause(r)[:160]}")
    print(
        "\n" + ", ".join(f"{k} {v}" for k, v in counts.items()) + f"; {len(results)} tests in {seconds:.0f} s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite-dir", type=Path, default=DEFAULT_SUITE_DIR)
    parser.add_argument("--tests", default="0001-0150", help="numbers: 0001-0150, 0011,0081, ...")
    parser.add_argument(
        "--timeout-s", type=float, default=300.0, help="per test number (LONG_TESTS_S: longer ones)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="test numbers run at once per cluster")
    parser.add_argument("--build", action="store_true", help="build the runner when it is absent")
    parser.add_argument("--git-dir", type=Path, help="a librdkafka git directory to export the tag from")
    parser.add_argument(
        "--keep", type=Path, help="keep broker data here (per-test logs: <suite-dir>/logs/<time>/)"
    )
    args = parser.parse_args(argv)
    suite_dir: Path = args.suite_dir
    if not runner_path(suite_dir).exists():
        if not args.build:
            print(build_instructions(suite_dir), file=sys.stderr)
            return 2
        build_suite(suite_dir, args.git_dir)
    tests = parse_test_table((runner_path(suite_dir).parent / "test.c").read_text(encoding="utf-8"))
    phases, names = plan(tests, parse_numbers(args.tests))
    print(f"KAFKA_PATH={kafka_path()}")
    log_dir = suite_dir / "logs" / time.strftime("%Y%m%d-%H%M%S")
    print(f"per-test logs: {log_dir}")
    started = time.monotonic()
    results: list[TestResult] = []
    with contextlib.ExitStack() as stack:
        work_dir = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="rdk-suite-")))
        work_dir.mkdir(parents=True, exist_ok=True)
        for phase in phases:
            results += run_phase(suite_dir, phase, names, args.timeout_s, args.jobs, work_dir, log_dir, tests)
    report(results, time.monotonic() - started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
