"""Streaming end-to-end latency: produce -> kafkalite source -> Spark -> kafkalite sink ->
visible to a consumer of the output topic, with the default trigger (a micro-batch starts as
soon as the previous one ends).

A producer (confluent-kafka, linger 0) sends one record every ``--interval-ms`` carrying its send
time; a query copies the input topic to an output topic (``readStream``/``writeStream``
``format("kafkalite")``); a confluent-kafka consumer on the output topic records, per record,
``receive time - send time``. The first records (while the query warms up) are dropped.

Peer, measured first in the same run: a no-op Python streaming source (one row per
``--interval-ms``, yielded as an Arrow batch) -> ``format("noop")`` sink with the default
trigger: the floor of a Python-source micro-batch on this machine (issue #10 item 5: ours
should take at most 1.5x that). A second table breaks both queries' micro-batches down by
Spark's ``StreamingQueryProgress.durationMs`` phases; a third gives kafkalite's own phases
(driver Metadata / ListOffsets, planning, read task, producer acquisition, encode + send, flush,
the commit process's start-up), recorded through ``KAFKALITE_PHASE_LOG``
(:mod:`spark_kafkalite.datasource.phase_timing`).

    python bench/spark_latency.py [--seconds 15] [--interval-ms 100] [--bootstrap-server 127.0.0.1:9092]
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import struct
import sys
import tempfile
import threading
import time

from _common import base_parser, bootstrap, console, create_topic, emit_table, machine_summary, topic_name
from rich.table import Table


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


_PHASES = (
    "latestOffset",
    "queryPlanning",
    "getBatch",
    "addBatch",
    "walCommit",
    "commitOffsets",
    "triggerExecution",
)


def _noop_source(interval_ms: float) -> type:
    """A Python streaming source whose offset is the number of ``interval_ms`` ticks since the
    epoch; each micro-batch yields one row per tick as a single Arrow batch (the cheapest
    Python source: no I/O)."""
    import pyarrow as pa
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class _TickReader(DataSourceStreamReader):
        def _now(self) -> dict:
            return {"tick": int(time.time() * 1000 / interval_ms)}

        def initialOffset(self) -> dict:
            return self._now()

        def latestOffset(self, start: dict | None = None, limit: object = None) -> dict:
            return self._now()

        def partitions(self, start: dict, end: dict) -> list:
            return [InputPartition((start["tick"], end["tick"]))]

        def read(self, partition: InputPartition):  # type: ignore[no-untyped-def]
            first, last = partition.value
            n = max(0, last - first)
            values = [struct.pack(">q?", i, False) for i in range(first, last)]
            yield pa.RecordBatch.from_arrays(
                [pa.array([b"k"] * n, pa.binary()), pa.array(values, pa.binary())], names=["key", "value"]
            )

        def commit(self, end: dict) -> None:
            pass

    class _TickSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kafkalite_bench_ticks"

        def schema(self) -> str:
            return "key binary, value binary"

        def streamReader(self, schema: object) -> DataSourceStreamReader:
            return _TickReader()

    return _TickSource


def _run_peer(spark: object, work: str, seconds: float, interval_ms: float) -> list:
    """Progress of the no-op Python source -> noop sink query (batches with rows only)."""
    spark.dataSource.register(_noop_source(interval_ms))  # type: ignore[attr-defined]
    query = (
        spark.readStream.format("kafkalite_bench_ticks")  # type: ignore[attr-defined]
        .load()
        .select("key", "value")
        .writeStream.format("noop")
        .option("checkpointLocation", f"{work}/peer-checkpoint")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(seconds)
        return [p for p in query.recentProgress if p.numInputRows > 0]
    finally:
        query.stop()


def _row(name: str, values: list[float], samples: str | None = None) -> list[str]:
    return [
        name,
        samples if samples is not None else str(len(values)),
        f"{statistics.median(values):.0f}",
        f"{_percentile(values, 0.95):.0f}",
        f"{max(values):.0f}",
        f"{statistics.mean(values):.0f}",
    ]


def _emit(title: str, columns: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in ("measure", "phase") else "right")
    for row in rows:
        table.add_row(*row)
    emit_table(title, columns, rows)
    console.print(table)


def _phase_rows(progress: list, who: str) -> list[list[str]]:
    rows = []
    for name in _PHASES:
        values = [float(p.durationMs.get(name, 0)) for p in progress if name in p.durationMs]
        if values:
            rows.append(
                [
                    f"{who}: {name}",
                    f"{len(values)}",
                    f"{statistics.median(values):.0f}",
                    f"{_percentile(values, 0.95):.0f}",
                    f"{statistics.mean(values):.0f}",
                ]
            )
    return rows


def _phase_log_rows(path: str, since: float) -> list[list[str]]:
    by_phase: dict[str, list[float]] = {}
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                entry = json.loads(line)
                if entry["t"] >= since:
                    by_phase.setdefault(entry["phase"], []).append(float(entry["ms"]))
    except FileNotFoundError:
        return []
    return [
        [
            f"ours: {name}",
            f"{len(v)}",
            f"{statistics.median(v):.1f}",
            f"{_percentile(v, 0.95):.1f}",
            f"{statistics.mean(v):.1f}",
        ]
        for name, v in sorted(by_phase.items())
    ]


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="how long records are produced")
    parser.add_argument("--interval-ms", type=float, default=100.0, help="one record every this many ms")
    parser.add_argument(
        "--warmup-s", type=float, default=5.0, help="records sent in the first seconds are dropped"
    )
    parser.add_argument(
        "--peer-seconds", type=float, default=None, help="how long the no-op peer runs (default: --seconds)"
    )
    parser.add_argument(
        "--no-phase-log", action="store_true", help="do not record kafkalite's own phase timings"
    )
    args = parser.parse_args()
    phase_log = None
    if not args.no_phase_log:
        fd, phase_log = tempfile.mkstemp(prefix="kafkalite-phases-", suffix=".jsonl")
        os.close(fd)
        os.environ["KAFKALITE_PHASE_LOG"] = phase_log  # inherited by Spark's Python workers
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from spark_kafkalite.demo.session import expose_auto_registration_module

    expose_auto_registration_module()
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from pyspark.sql import SparkSession

    with bootstrap(args.bootstrap_server) as (bootstrap_servers, _cpu), tempfile.TemporaryDirectory() as work:
        source, sink = topic_name("bench-latency-in"), topic_name("bench-latency-out")
        create_topic(bootstrap_servers, source, 1)
        create_topic(bootstrap_servers, sink, 1)
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("kafkalite-bench-latency")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
        console.print(
            f"peer (no-op Python source -> noop sink) for {args.peer_seconds or args.seconds:.0f} s ..."
        )
        peer_progress = _run_peer(spark, work, args.peer_seconds or args.seconds, args.interval_ms)
        latencies_ms: list[float] = []
        stop = threading.Event()

        def consume() -> None:
            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap_servers,
                    "group.id": "bench-latency",  # required by librdkafka; no group is joined
                    "enable.auto.commit": False,
                    # a long poll: the broker's fetch purgatory answers as soon as a record is
                    # appended, so this adds no latency, and the harness does not load the
                    # broker with ~200 empty fetches/s while Spark is measured
                    "fetch.wait.max.ms": 200,
                }
            )
            consumer.assign([TopicPartition(sink, 0, OFFSET_BEGINNING)])
            try:
                while not stop.is_set():
                    msg = consumer.poll(0.05)
                    if msg is None or msg.error():
                        continue
                    received_ns = time.time_ns()
                    sent_ns, warm = struct.unpack(">q?", msg.value())
                    if not warm:
                        latencies_ms.append((received_ns - sent_ns) / 1e6)
            finally:
                consumer.close()

        try:
            query = (
                spark.readStream.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("subscribe", source)
                .option("kafka.fetch.max.wait.ms", "10")
                .load()
                .select("key", "value")
                .writeStream.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .option("kafka.linger.ms", "0")
                .option("topic", sink)
                .option("checkpointLocation", f"{work}/checkpoint")
                .start()  # default trigger
            )
            deadline = time.monotonic() + 120
            while not query.recentProgress and time.monotonic() < deadline:
                time.sleep(0.2)  # the first (empty) batch resolved startingOffsets=latest
            reader = threading.Thread(target=consume, daemon=True)
            reader.start()
            producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 0})
            started = time.monotonic()
            measured_since = time.time() + args.warmup_s
            sent = 0
            console.print(f"producing for {args.seconds:.0f} s ...")
            while time.monotonic() - started < args.seconds:
                warm = time.monotonic() - started < args.warmup_s
                producer.produce(source, value=struct.pack(">q?", time.time_ns(), warm))
                producer.poll(0)
                sent += 0 if warm else 1
                time.sleep(args.interval_ms / 1000.0)
            producer.flush(10)
            wait_until = time.monotonic() + 30
            while len(latencies_ms) < sent and time.monotonic() < wait_until:
                time.sleep(0.2)
            stop.set()
            reader.join(10)
            progress = [p for p in query.recentProgress if p.numInputRows > 0]
            query.stop()
        finally:
            spark.stop()

    trigger_ms = [float(p.durationMs.get("triggerExecution", 0)) for p in progress]
    peer_ms = [float(p.durationMs.get("triggerExecution", 0)) for p in peer_progress]
    rows = []
    if latencies_ms:
        rows.append(
            _row(
                "ours: produce -> kafkalite -> Spark -> kafkalite -> consumer",
                latencies_ms,
                f"{len(latencies_ms)}/{sent}",
            )
        )
    if trigger_ms:
        rows.append(_row("ours: micro-batch (triggerExecution), kafkalite -> kafkalite", trigger_ms))
    if peer_ms:
        rows.append(_row("peer: micro-batch (triggerExecution), no-op Python source -> noop sink", peer_ms))
    _emit(
        f"streaming end-to-end latency, default trigger, 1 record / {args.interval_ms:.0f} ms",
        ["measure", "samples", "p50 ms", "p95 ms", "max ms", "mean ms"],
        rows,
    )
    _emit(
        "micro-batch phases (StreamingQueryProgress.durationMs), batches with rows",
        ["phase", "batches", "p50 ms", "p95 ms", "mean ms"],
        _phase_rows(progress, "ours") + _phase_rows(peer_progress, "peer"),
    )
    if phase_log:
        _emit(
            "kafkalite phases (KAFKALITE_PHASE_LOG), per call, after warm-up",
            ["phase", "calls", "p50 ms", "p95 ms", "mean ms"],
            _phase_log_rows(phase_log, measured_since),
        )
        with contextlib.suppress(OSError):
            os.unlink(phase_log)
    console.print(f"[dim]{machine_summary()}[/dim]")


if __name__ == "__main__":
    main()
