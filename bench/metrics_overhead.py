"""Metrics overhead: our broker with its Prometheus meters and a scraped /metrics endpoint vs the
same broker built from the commit before the meters existed, in the same run.

The meters (``broker.metrics``) are plain counters the record path always updates (once per
request, appended batch and fetch response), so "metrics off" is the same broker with every meter
call made a no-op: this checkout's HEAD exported with ``git archive`` (the compiled record
extensions copied over) plus a ``sitecustomize`` module that replaces the meter functions and
``KafkaApis``'s error counting and recording with no-ops before the broker starts, run as a
one-broker ``LocalCluster`` from that tree. (The remaining no-op calls make the figure a slight
underestimate.) "Metrics on" is this checkout's broker (its
endpoint listening, not scraped during the runs; one scrape's broker CPU is measured at the end
over 20 scrapes, a cost per scrape interval, not per record).

Each round runs both brokers back to back (which goes first alternates): one confluent-kafka
(librdkafka) producer sends N keyed records (``acks=1``, 4 partitions; warm-up first) and one
confluent-kafka consumer reads them all back. Reported per phase: the median round's seconds and
the broker process's CPU seconds (user + system, ``/proc``), and the median over the rounds of the
on / off ratio of the two adjacent runs (broker CPU and throughput): pairing adjacent runs keeps
the machine's changing load out of the ratio as far as possible.

    python bench/metrics_overhead.py [--records 100000] [--rounds 12] [--quick]
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
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
from _common import (
    BrokerCpu,
    aa_noise,
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


#: Loaded first by the "off" broker's interpreter (``sitecustomize`` on its PYTHONPATH): every
#: meter call on the request and record paths becomes a no-op (the calls themselves remain).
_METERS_OFF = """
import broker.metrics.meters as meters

def _nothing(*_args, **_kwargs):
    return None

meters.BrokerTopicStats.record_produce = _nothing
meters.BrokerTopicStats.record_bytes_out = _nothing
meters.BrokerTopicStats.record_failure = _nothing
meters.IsrChangeMeters.record = _nothing
meters.record_fetch = _nothing

import broker.apis.kafka_apis as kafka_apis

_EMPTY = {}
kafka_apis.error_counts = lambda _response: _EMPTY
kafka_apis.KafkaApis._record = _nothing
"""


def _baseline_tree(dest: Path) -> str:
    """This checkout's HEAD exported into ``dest / "tree"`` (the compiled record extensions
    copied over) with a ``sitecustomize`` that turns the meters into no-ops; returns HEAD's id."""
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True).stdout
    archive_path = dest / "baseline.tar"
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(dest / "tree", filter="data")
    for so in ROOT.glob("spark_kafkalite/**/*.so"):  # the same compiled record paths
        shutil.copy2(so, dest / "tree" / so.relative_to(ROOT))
    (dest / "tree" / "sitecustomize.py").write_text(_METERS_OFF, encoding="utf-8")
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
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


VARIANTS = ("on", "off")


def _messages_in(url: str) -> float:
    """The all-topics ``kafka_server_brokertopicmetrics_messagesin_total`` of a broker."""
    with urllib.request.urlopen(url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("kafka_server_brokertopicmetrics_messagesin_total "):
                return float(line.split()[1])
    return 0.0


def _requests(url: str, request: str) -> float:
    """``kafka_network_requestmetrics_requests_total{request=...}`` summed over versions."""
    total = 0.0
    with urllib.request.urlopen(url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            if (
                line.startswith("kafka_network_requestmetrics_requests_total{")
                and f'request="{request}"' in line
            ):
                total += float(line.split()[-1])
    return total


def _meter_cost_us(partitions: int) -> float:
    """CPU µs the meters add to one Produce request of ``partitions`` batches, measured here with
    ``time.process_time`` over many calls: the response's error counts, the request record (six
    histograms), one MessagesIn / BytesIn update per batch and the five clock reads."""
    from broker.metrics.meters import BrokerTopicStats, RequestMetrics, error_counts, request_name
    from spark_kafkalite.protocol.produce_response import (
        ProducePartitionResult,
        ProduceResponseData,
        ProduceTopicResult,
    )

    response = ProduceResponseData(
        9,
        (
            ProduceTopicResult(
                "t", tuple(ProducePartitionResult(i, 0, 5, 0, None) for i in range(partitions))
            ),
        ),
    )
    metrics, stats = RequestMetrics(), BrokerTopicStats()
    clock = time.monotonic
    calls = 20000
    started = time.process_time()
    for _ in range(calls):
        received = clock()
        begun = clock()
        for _p in range(partitions):
            stats.record_produce("t", 80, 9000)
        ready = clock()
        written = clock()
        metrics.record(
            0,
            9,
            (request_name(0),),
            error_counts(response),
            begun - received,
            ready - begun,
            0.0,
            written - ready,
            clock() - written,
        )
    return (time.process_time() - started) / calls * 1e6


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2] if ordered else float("nan")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], default_records=100_000)
    parser.add_argument("--rounds", type=int, default=12, help="pairs of runs (one per broker, adjacent)")
    parser.add_argument("--warmup-records", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="50k records, 6 rounds")
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds = 50_000, 6
    keys = make_keys(args.records)
    warmup = [b"warm-%07d" % i for i in range(args.warmup_records)]
    value = os.urandom(100)
    settings = Settings(5, 65536, False, args.timeout_s)
    load = os.getloadavg()[0]
    runs: dict[str, dict[str, list[tuple[float, float | None, str]]]] = {
        v: {"produce": [], "consume": []} for v in VARIANTS
    }
    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-metrics-") as tmp:
        baseline = _baseline_tree(Path(tmp))
        with _cluster(ROOT) as on, _cluster(Path(tmp) / "tree") as off:
            clusters = {"on": on, "off": off}
            for round_no in range(args.rounds):
                for variant in VARIANTS if round_no % 2 == 0 else VARIANTS[::-1]:
                    info = clusters[variant]
                    print(
                        f"metrics overhead, round {round_no + 1}/{args.rounds}: metrics {variant} ...",
                        flush=True,
                    )
                    bootstrap = str(info["bootstrap"])
                    cpu = BrokerCpu(int(str(info["pid"])))
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
            with urllib.request.urlopen(str(on["metrics"]), timeout=10) as response:
                scrape_bytes = len(response.read())
            for variant, info in clusters.items():  # the meters counted in "on" only
                counted = _messages_in(str(info["metrics"]))
                if (counted > 0) != (variant == "on"):
                    raise SystemExit(f"metrics {variant}: MessagesIn counted {counted} records")
            scrape_ms = _scrape_cpu(str(on["metrics"]), int(str(on["pid"])))
            produce_requests = _requests(str(on["metrics"]), "Produce")
    per_request_us = _meter_cost_us(args.partitions)
    payload = sum(len(k) for k in keys) + 100 * len(keys)
    total = len(keys) + len(warmup)
    for phase, records in (("produce", len(keys)), ("consume", total)):
        results = [
            median_of_rounds(f"ours: metrics on, {phase}", records, runs["on"][phase], payload),
            median_of_rounds(
                f"peer: metrics off (meters no-op, {baseline}), {phase}", records, runs["off"][phase], payload
            ),
        ]
        on_cpu = [c for _s, c, _n in runs["on"][phase]]
        off_cpu = [c for _s, c, _n in runs["off"][phase]]
        pairs = [a / b for a, b in zip(on_cpu, off_cpu, strict=True) if a is not None and b]
        speed = [b[0] / a[0] for a, b in zip(runs["on"][phase], runs["off"][phase], strict=True)]
        cpu_noise, _ = aa_noise([c for c in on_cpu if c], [c for c in off_cpu if c])
        speed_noise, _ = aa_noise(
            [1 / s for s, _c, _n in runs["on"][phase]], [1 / s for s, _c, _n in runs["off"][phase]]
        )
        print_table(
            f"metrics overhead, {phase}: {records:,} records (100-byte values, {args.partitions} partitions, "
            f"acks=1), {args.rounds} adjacent pairs of runs; broker CPU on / off per pair: median "
            f"{(_median(pairs) - 1) * 100:+.1f} % (pairs {', '.join(f'{(p - 1) * 100:+.0f}' for p in pairs)} %); "
            f"throughput on / off per pair: median {(_median(speed) - 1) * 100:+.1f} %; A/A noise (median "
            f"|ratio - 1| of each run to the next run of the same broker): broker CPU ±{cpu_noise:.1f} %, "
            f"throughput ±{speed_noise:.1f} %; broker CPU per record "
            f"(warm-up included): on {_median([c / total * 1e6 for c in on_cpu if c]):.2f} µs, off "
            f"{_median([c / total * 1e6 for c in off_cpu if c]):.2f} µs; one scrape: {scrape_bytes:,} bytes, "
            f"{scrape_ms:.1f} ms of broker CPU; meters per Produce request ({args.partitions} batches) "
            f"{per_request_us:.1f} µs CPU, {produce_requests / (args.rounds * total):.4f} requests per record: "
            f"{per_request_us * produce_requests / (args.rounds * total):.3f} µs per record; load average {load:.1f} at start",
            results,
            mb_label="key+value MB/s",
        )


if __name__ == "__main__":
    main()
