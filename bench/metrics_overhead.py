"""Metrics overhead: our broker with its Prometheus meters and a scraped /metrics endpoint vs the
same broker built from the commit before the meters existed, in the same run.

The meters (``broker.metrics``) are plain counters the record path always updates (once per
produce request, appended batch and fetch response), so "metrics off" is the broker without
them: the tree of the parent of the commit that added ``broker/metrics/meters.py`` (exported
with ``git archive``, the compiled record extensions copied from this checkout), started as a
one-broker ``LocalCluster`` from that tree. "Metrics on" is this checkout's broker, whose
``/metrics`` is scraped every ``--scrape-interval-s`` (1 s: fifteen times Prometheus's default
rate) while it works.

Each round, for each broker in turn (alternating), one confluent-kafka (librdkafka) producer sends
N keyed records (``acks=1``, 4 partitions; warm-up first) and one confluent-kafka consumer reads
them all back. Reported: the median round's seconds and the broker process's CPU seconds
(user + system, ``/proc``) for each phase; the broker CPU per record is the figure that least
depends on the machine's other load.

    python bench/metrics_overhead.py [--records 300000] [--rounds 5] [--quick]
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
from _common import (
    BrokerCpu,
    base_parser,
    create_topic,
    make_keys,
    median_of_rounds,
    print_table,
    topic_name,
    topic_record_count,
)
from broker_ingest import Settings, _produce_timed

ROOT = Path(__file__).resolve().parent.parent

_SERVE = """
import json, sys
from spark_kafkalite.local_cluster import LocalCluster
cluster = LocalCluster(brokers=1).start()
urls = getattr(cluster, "metrics_urls", [None])
print(json.dumps({"bootstrap": cluster.bootstrap_servers, "pid": cluster.pid(1), "metrics": urls[0]}), flush=True)
sys.stdin.read()
cluster.stop()
"""


def _baseline_tree(dest: Path) -> str:
    """Export the parent of the commit that added the meters into ``dest``; returns its id."""
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "broker/metrics/meters.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        raise SystemExit("cannot find the commit that added broker/metrics/meters.py")
    parent = added[-1] + "~1"
    archive = subprocess.run(["git", "archive", parent], cwd=ROOT, capture_output=True, check=True).stdout
    archive_path = dest / "baseline.tar"
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(dest / "tree", filter="data")
    for so in ROOT.glob("spark_kafkalite/**/*.so"):  # the same compiled record paths
        target = dest / "tree" / so.relative_to(ROOT)
        if target.with_suffix("").with_suffix(".pyx").exists() or target.parent.exists():
            shutil.copy2(so, target)
    return subprocess.run(
        ["git", "rev-parse", "--short", parent], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


@contextlib.contextmanager
def _cluster(tree: Path) -> Iterator[dict[str, object]]:
    """A one-broker LocalCluster started from ``tree`` in a child process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    child = subprocess.Popen(
        [sys.executable, "-c", _SERVE],
        cwd=tree,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        yield json.loads(child.stdout.readline())
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)


class _Scraper:
    """Scrapes a /metrics URL every ``interval_s`` on a thread; counts scrapes and their bytes."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url, self.interval_s = url, interval_s
        self.scrapes = self.bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with urllib.request.urlopen(self.url, timeout=10) as response:
                self.bytes += len(response.read())
            self.scrapes += 1

    def __enter__(self) -> _Scraper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def consume_all(bootstrap_servers: str, topic: str, partitions: int, expected: int, broker_cpu: BrokerCpu):
    """(seconds, broker CPU s, note) to read ``expected`` records of ``topic`` from the start."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": topic,
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    cpu_before = broker_cpu.read()
    started = time.perf_counter()
    seen = 0
    deadline = time.monotonic() + 120
    try:
        while seen < expected and time.monotonic() < deadline:
            for message in consumer.consume(10000, 1.0):
                if message.error() is None:
                    seen += 1
    finally:
        elapsed = time.perf_counter() - started
        cpu_after = broker_cpu.read()
        consumer.close()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return elapsed, cpu, "" if seen == expected else f"WRONG COUNT: {seen} of {expected}"


def _scrape_cpu(url: str, pid: int, count: int = 20) -> float:
    """Broker CPU ms per scrape of ``url``, over ``count`` back-to-back scrapes."""
    cpu = BrokerCpu(pid)
    before = cpu.read()
    for _ in range(count):
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read()
    after = cpu.read()
    return float("nan") if before is None or after is None else (after - before) / count * 1000


VARIANTS = ("on", "scraped", "off")
LABELS = {
    "on": "ours: metrics on (meters only, not scraped)",
    "scraped": "ours: metrics on, /metrics scraped every {interval:g} s",
    "off": "peer: metrics off (broker at {baseline})",
}


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], default_records=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup-records", type=int, default=20_000)
    parser.add_argument("--scrape-interval-s", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="100k records, 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds = 100_000, 3
    keys = make_keys(args.records)
    warmup = [b"warm-%07d" % i for i in range(args.warmup_records)]
    value = os.urandom(100)
    settings = Settings(5, 65536, False, args.timeout_s)
    load = os.getloadavg()[0]
    runs: dict[str, dict[str, list[tuple[float, float | None, str]]]] = {
        v: {"produce": [], "consume": []} for v in VARIANTS
    }
    scrapes = [0, 0]
    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-metrics-") as tmp:
        baseline = _baseline_tree(Path(tmp))
        with _cluster(ROOT) as on, _cluster(ROOT) as scraped, _cluster(Path(tmp) / "tree") as off:
            clusters = {"on": on, "scraped": scraped, "off": off}
            for round_no in range(args.rounds):
                order = VARIANTS[round_no % 3 :] + VARIANTS[: round_no % 3]  # each goes first in turn
                for variant in order:
                    info = clusters[variant]
                    print(f"metrics overhead, round {round_no + 1}/{args.rounds}: {variant} ...", flush=True)
                    bootstrap = str(info["bootstrap"])
                    cpu = BrokerCpu(int(str(info["pid"])))
                    with contextlib.ExitStack() as stack:
                        scraper = None
                        if variant == "scraped":
                            scraper = stack.enter_context(
                                _Scraper(str(info["metrics"]), args.scrape_interval_s)
                            )
                        topic = topic_name("bench-metrics")
                        create_topic(bootstrap, topic, args.partitions)
                        config = {**settings.config(), "bootstrap.servers": bootstrap}
                        cpu_before = cpu.read()
                        elapsed = _produce_timed(
                            config, topic, args.partitions, keys, warmup, value, args.timeout_s
                        )
                        cpu_after = cpu.read()
                        written = topic_record_count(bootstrap, topic, args.partitions)
                        note = "" if written == len(keys) + len(warmup) else f"WRONG COUNT: {written}"
                        used = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
                        runs[variant]["produce"].append((elapsed, used, note))
                        runs[variant]["consume"].append(
                            consume_all(bootstrap, topic, args.partitions, len(keys) + len(warmup), cpu)
                        )
                    if scraper is not None:
                        scrapes[0] += scraper.scrapes
                        scrapes[1] += scraper.bytes
            scrape_ms = _scrape_cpu(str(scraped["metrics"]), int(str(scraped["pid"])))
    payload = sum(len(k) for k in keys) + 100 * len(keys)
    total = len(keys) + len(warmup)
    for phase, records in (("produce", len(keys)), ("consume", total)):
        results = [
            median_of_rounds(
                f"{LABELS[v].format(interval=args.scrape_interval_s, baseline=baseline)}, {phase}",
                records,
                runs[v][phase],
                payload,
            )
            for v in VARIANTS
        ]
        medians = {}
        for v in VARIANTS:
            per_record = sorted(c / total * 1e6 for _s, c, _n in runs[v][phase] if c is not None)
            medians[v] = per_record[(len(per_record) - 1) // 2] if per_record else float("nan")
        off = medians["off"]
        print_table(
            f"metrics overhead, {phase}: {records:,} records (100-byte values, 4 partitions, acks=1), median of "
            f"{args.rounds} rounds, the three brokers in turn; broker CPU per record (warm-up included): "
            f"meters only {medians['on']:.3f} µs ({(medians['on'] / off - 1) * 100:+.1f} %), scraped "
            f"{medians['scraped']:.3f} µs ({(medians['scraped'] / off - 1) * 100:+.1f} %), off {off:.3f} µs; "
            f"{scrapes[0]} scrapes of {scrapes[1] // max(scrapes[0], 1):,} bytes, {scrape_ms:.1f} ms of broker CPU "
            f"each; load average {load:.1f} at start",
            results,
            mb_label="key+value MB/s",
        )


if __name__ == "__main__":
    main()
