"""Shared helpers for the benchmark scripts in ``bench/``.

Each script measures our code beside a peer (confluent-kafka, kafka-python, or a Spark floor) in
the same run, against the same broker, on the same topic. Numbers are printed as a rich table.
Everything talks to 127.0.0.1 only: either a ``LocalCluster`` started here or the broker named
with ``--bootstrap-server``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import platform
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

console = Console(width=120)

VALUE_SIZE_BYTES = 100


@dataclass(slots=True)
class Result:
    """One measured run: ``records`` done in ``elapsed_s`` seconds moving ``payload_bytes``."""

    name: str
    records: int
    elapsed_s: float
    payload_bytes: int = 0
    note: str = ""
    broker_cpu_s: float | None = None

    @property
    def records_per_s(self) -> float:
        return self.records / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    @property
    def mb_per_s(self) -> float:
        return self.payload_bytes / self.elapsed_s / 1e6 if self.elapsed_s > 0 else float("nan")


def base_parser(description: str, default_records: int = 200_000) -> argparse.ArgumentParser:
    """Arguments shared by every bench script."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--records", type=int, default=default_records, help="records per run")
    parser.add_argument(
        "--bootstrap-server",
        default=None,
        help="use this running broker (127.0.0.1:port) instead of starting a LocalCluster",
    )
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the bench topic")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="give up on any single run after this")
    return parser


class BrokerCpu:
    """CPU seconds (user + system) used by the LocalCluster's broker process, from /proc.

    ``read()`` returns None when the broker is external (``--bootstrap-server``)."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid

    def read(self) -> float | None:
        if self.pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def bootstrap(bootstrap_server: str | None) -> Iterator[tuple[str, BrokerCpu]]:
    """Yield (bootstrap address, broker CPU meter): the given address, or a fresh
    ``LocalCluster()`` (stopped on exit)."""
    if bootstrap_server:
        host = bootstrap_server.split(":")[0]
        if host not in ("127.0.0.1", "localhost"):
            raise SystemExit("benchmarks only talk to 127.0.0.1")
        yield bootstrap_server, BrokerCpu(None)
        return
    from spark_kafkalite import LocalCluster

    with LocalCluster() as cluster:
        yield cluster.bootstrap_servers, BrokerCpu(cluster.pid(1))


def median_of_rounds(
    name: str, records: int, rounds: list[tuple[float, float | None, str]], payload_bytes: int = 0
) -> Result:
    """One Result from timed rounds of the same run: [(seconds, broker CPU s or None, note)].
    Reports the median round (its CPU), every round's seconds in the note, and any round's own
    note (e.g. a wrong count) first, so a bad round is never hidden by the median."""
    ordered = sorted(rounds, key=lambda r: r[0])
    seconds, cpu, _ = ordered[(len(ordered) - 1) // 2]  # the median (the lower one of an even count)
    problems = [n for _s, _c, n in rounds if n]
    note = "; ".join([*problems, "rounds " + ", ".join(f"{s:.2f}" for s, _c, _n in rounds) + " s"])
    return Result(name, records, seconds, payload_bytes, note, cpu)


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    timeout_s: float = 30.0,
    config: dict[str, str] | None = None,
) -> None:
    """Create ``topic`` (with topic ``config`` overrides, if any) with confluent-kafka's
    AdminClient (a reference peer) and wait for metadata."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    new_topic = NewTopic(topic, partitions, 1, config=config or {})
    futures = admin.create_topics([new_topic], operation_timeout=timeout_s)
    futures[topic].result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=topic, timeout=5)
        tmd = md.topics.get(topic)
        if tmd is not None and tmd.error is None and len(tmd.partitions) == partitions:
            if all(p.leader >= 0 for p in tmd.partitions.values()):
                return
        time.sleep(0.1)
    raise TimeoutError(f"topic {topic} has no leaders after {timeout_s}s")


def make_keys(n: int) -> list[bytes]:
    """``n`` distinct keys of 12 bytes, so murmur2 spreads records over all partitions."""
    return [b"key-%08d" % i for i in range(n)]


def make_value() -> bytes:
    """One incompressible ``VALUE_SIZE_BYTES`` value shared by every record."""
    return os.urandom(VALUE_SIZE_BYTES)


def fill_topic_with_confluent(bootstrap_servers: str, topic: str, records: int, timeout_s: float) -> None:
    """Produce ``records`` keyed 100-byte records with confluent-kafka (acks=1), then flush."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "acks": "1", "linger.ms": 5, "batch.size": 65536}
    )
    value = make_value()
    for key in make_keys(records):
        while True:
            try:
                producer.produce(topic, value=value, key=key)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(timeout_s)
    if remaining:
        raise TimeoutError(f"{remaining} records not delivered after {timeout_s}s")


def topic_record_count(bootstrap_servers: str, topic: str, partitions: int) -> int:
    """Sum of high watermarks minus low watermarks over the topic's partitions (confluent-kafka)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": "bench-watermarks"})
    try:
        total = 0
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def committed_record_count(
    bootstrap_servers: str, topic: str, partitions: int, timeout_s: float = 120.0
) -> int:
    """Records a confluent-kafka consumer with ``isolation.level=read_committed`` reads from the
    topic's partitions (a transactional topic's watermarks also count its commit markers)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "bench-count-" + uuid.uuid4().hex[:6],
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        count = 0
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is None:
                    count += 1
                    at_end.discard(msg.partition())
                elif msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
        return count
    finally:
        consumer.close()


def aa_noise(*series: list[float]) -> tuple[float, list[float]]:
    """A/A noise of repeated measurements of one unchanged variant: the ratios of each run to
    the next run of the same series (``later / earlier``), pooled over ``series``, and their
    median absolute deviation from 1 in percent. Beside an A/B ratio it says how large a
    difference the same code shows from run to run on this machine at this load."""
    ratios = [b / a for runs in series for a, b in itertools.pairwise(runs) if a and b]
    deviations = sorted(abs(r - 1) * 100 for r in ratios)
    median = deviations[(len(deviations) - 1) // 2] if deviations else float("nan")
    return median, ratios


def machine_summary() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def emit_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """Append one printed table as a JSON line to ``$KAFKALITE_BENCH_JSON`` (set by
    ``python -m bench``, which computes the ratios and regenerates BENCHMARKS.md); no-op otherwise."""
    path = os.environ.get("KAFKALITE_BENCH_JSON")
    if not path:
        return
    import json
    import sys

    line = {"script": Path(sys.argv[0]).stem, "title": title, "columns": columns, "rows": rows}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def print_table(
    title: str,
    results: list[Result],
    *,
    with_mb: bool = True,
    unit: str = "records",
    mb_label: str = "payload MB/s",
) -> None:
    """Print ``results`` (ours and peers, measured in the same run) as one rich table."""
    table = Table(title=title)
    table.add_column("run")
    table.add_column(unit, justify="right")
    table.add_column("seconds", justify="right")
    table.add_column(f"{unit}/s", justify="right")
    if with_mb:
        table.add_column(mb_label, justify="right")
    with_cpu = any(r.broker_cpu_s is not None for r in results)
    if with_cpu:
        table.add_column("broker CPU s", justify="right")
    table.add_column("note")
    emitted: list[list[str]] = []
    for r in results:
        row = [r.name, f"{r.records:,}", f"{r.elapsed_s:.2f}", f"{r.records_per_s:,.0f}"]
        if with_mb:
            row.append(f"{r.mb_per_s:.1f}")
        if with_cpu:
            row.append("" if r.broker_cpu_s is None else f"{r.broker_cpu_s:.2f}")
        row.append(r.note)
        table.add_row(*row)
        emitted.append(row)
    emit_table(title, [str(c.header) for c in table.columns], emitted)
    console.print(table)
    console.print(f"[dim]{machine_summary()}[/dim]")
