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
(:mod:`spark_kafkalite.datasource.phase_timing`). A fourth gives the CPU each process role
(JVM, each kind of Spark Python worker, broker) uses per micro-batch, for both queries.

Spark settings: both queries run in one SparkSession, so they share every setting. By default
that session uses the checkpoint file manager the README recommends for low latency
(``spark.sql.streaming.checkpointFileManagerClass`` = ``FileSystemBasedCheckpointFileManager``:
without Hadoop's native library the default FileContext manager starts ~10 ``chmod`` /
``readlink`` processes per checkpoint file, two files per micro-batch); ``--spark-defaults``
measures Spark's defaults instead.

    python bench/spark_latency.py [--seconds 15] [--interval-ms 100] [--spark-defaults] [--bootstrap-server 127.0.0.1:9092]
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
from _proc_cpu import CpuSnapshot, cpu_by_role, cpu_snapshot
from rich.table import Table

CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"
#: ``FileSystemBasedCheckpointFileManager`` by package: Spark 4.3 (``checkpointing``), older Spark.
FILE_SYSTEM_CHECKPOINT_MANAGERS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)


def low_latency_conf(spark: object) -> dict[str, str]:
    """The README's low-latency settings that this Spark has (its JVM is asked which checkpoint
    manager class exists), set on ``spark``'s runtime conf; returns what was set."""
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    for name in FILE_SYSTEM_CHECKPOINT_MANAGERS:
        try:
            jvm.java.lang.Class.forName(name)
        except Exception:  # noqa: BLE001 - py4j raises Py4JJavaError(ClassNotFoundException)
            continue
        spark.conf.set(CHECKPOINT_MANAGER_KEY, name)  # type: ignore[attr-defined]
        return {CHECKPOINT_MANAGER_KEY: name}
    return {}


class CpuWindow:
    """CPU per process role over a measured window, divided by the micro-batches it ran."""

    def __init__(self) -> None:
        self.used_s: dict[str, float] = {}
        self.batches = 0
        self._start: CpuSnapshot = {}
        self._first_batch = 0

    def start(self, query: object) -> None:
        self._start = cpu_snapshot()
        self._first_batch = _last_batch_id(query)

    def stop(self, query: object) -> None:
        self.used_s = cpu_by_role(self._start, cpu_snapshot())
        self.batches = max(0, _last_batch_id(query) - self._first_batch)

    def measured(self, progress: list) -> list:
        """The batches with rows that started after :meth:`start` (warm-up batches left out)."""
        return [p for p in progress if p.numInputRows > 0 and p.batchId > self._first_batch]


def _last_batch_id(query: object) -> int:
    progress = query.lastProgress  # type: ignore[attr-defined]
    return int(progress["batchId"]) if progress else 0


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


def _run_peer(
    spark: object, work: str, seconds: float, interval_ms: float, warmup_s: float, cpu: CpuWindow
) -> list:
    """Progress of the no-op Python source -> noop sink query (batches with rows only), after
    the same warm-up as ours (the JVM is cold when the peer starts: JIT compilation)."""
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
        time.sleep(warmup_s)
        cpu.start(query)
        time.sleep(seconds)
        cpu.stop(query)
        return cpu.measured(query.recentProgress)
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


def _cpu_rows(ours: CpuWindow, peer: CpuWindow) -> list[list[str]]:
    def per_batch(window: CpuWindow, role: str) -> str:
        if not window.batches or role not in window.used_s:
            return "-"
        return f"{window.used_s[role] * 1000 / window.batches:.0f}"

    roles = sorted(set(ours.used_s) | set(peer.used_s), key=lambda r: -(ours.used_s.get(r, 0.0)))
    rows = [["micro-batches in the window", str(ours.batches), str(peer.batches)]]
    rows += [[role, per_batch(ours, role), per_batch(peer, role)] for role in roles if role != "gone"]
    total = [f"{sum(w.used_s.values()) * 1000 / w.batches:.0f}" if w.batches else "-" for w in (ours, peer)]
    return rows + [["total", *total]]


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="how long records are produced")
    parser.add_argument("--interval-ms", type=float, default=100.0, help="one record every this many ms")
    parser.add_argument(
        "--warmup-s",
        type=float,
        default=5.0,
        help="records sent (and micro-batches run) in the first seconds are dropped; the peer warms up as long",
    )
    parser.add_argument(
        "--peer-seconds", type=float, default=None, help="how long the no-op peer runs (default: --seconds)"
    )
    parser.add_argument(
        "--no-phase-log", action="store_true", help="do not record kafkalite's own phase timings"
    )
    parser.add_argument(
        "--spark-defaults",
        action="store_true",
        help="Spark's default checkpoint file manager instead of the README's low-latency one (both queries)",
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
        spark_conf = {} if args.spark_defaults else low_latency_conf(spark)
        conf_note = (
            "Spark defaults"
            if not spark_conf
            else "checkpoint manager " + spark_conf[CHECKPOINT_MANAGER_KEY].rsplit(".", 1)[-1]
        )
        console.print(
            f"peer (no-op Python source -> noop sink) for {args.peer_seconds or args.seconds:.0f} s, {conf_note} ..."
        )
        peer_cpu, our_cpu = CpuWindow(), CpuWindow()
        peer_progress = _run_peer(
            spark, work, args.peer_seconds or args.seconds, args.interval_ms, args.warmup_s, peer_cpu
        )
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
                if not warm and not sent:
                    our_cpu.start(query)
                producer.produce(source, value=struct.pack(">q?", time.time_ns(), warm))
                producer.poll(0)
                sent += 0 if warm else 1
                time.sleep(args.interval_ms / 1000.0)
            our_cpu.stop(query)
            producer.flush(10)
            wait_until = time.monotonic() + 30
            while len(latencies_ms) < sent and time.monotonic() < wait_until:
                time.sleep(0.2)
            stop.set()
            reader.join(10)
            progress = our_cpu.measured(query.recentProgress)
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
        f"streaming end-to-end latency, default trigger, 1 record / {args.interval_ms:.0f} ms, {conf_note}",
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
    _emit(
        "CPU per micro-batch by process role (ms; /proc user + system over the measured window)",
        ["measure", "ours", "peer"],
        _cpu_rows(our_cpu, peer_cpu),
    )
    console.print(f"[dim]{machine_summary()}[/dim]")


if __name__ == "__main__":
    main()
