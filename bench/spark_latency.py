"""Streaming end-to-end latency: produce -> kafkalite source -> Spark -> kafkalite sink ->
visible to a consumer of the output topic, with the default trigger (a micro-batch starts as
soon as the previous one ends).

A producer (confluent-kafka, linger 0) sends one record every ``--interval-ms`` carrying its send
time; a query copies the input topic to an output topic (``readStream``/``writeStream``
``format("kafkalite")``); a confluent-kafka consumer on the output topic records, per record,
``receive time - send time``. The first records (while the query warms up) are dropped. Peer:
the same pipeline's Spark-side micro-batch duration (``triggerExecution`` from the progress),
i.e. the part of the latency spent in Spark per batch.

    python bench/spark_latency.py [--seconds 15] [--interval-ms 100] [--bootstrap-server 127.0.0.1:9092]
"""

from __future__ import annotations

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


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="how long records are produced")
    parser.add_argument("--interval-ms", type=float, default=100.0, help="one record every this many ms")
    parser.add_argument(
        "--warmup-s", type=float, default=5.0, help="records sent in the first seconds are dropped"
    )
    args = parser.parse_args()
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
        latencies_ms: list[float] = []
        stop = threading.Event()

        def consume() -> None:
            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap_servers,
                    "group.id": "bench-latency",  # required by librdkafka; no group is joined
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 5,
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

    trigger_ms = [p.durationMs.get("triggerExecution", 0) for p in progress]
    table = Table(
        title=f"streaming end-to-end latency, default trigger, 1 record / {args.interval_ms:.0f} ms"
    )
    for column in ("measure", "samples", "p50 ms", "p95 ms", "max ms", "mean ms"):
        table.add_column(column, justify="right" if column != "measure" else "left")
    if latencies_ms:
        table.add_row(
            "ours: produce -> kafkalite -> Spark -> kafkalite -> consumer",
            f"{len(latencies_ms)}/{sent}",
            f"{statistics.median(latencies_ms):.0f}",
            f"{_percentile(latencies_ms, 0.95):.0f}",
            f"{max(latencies_ms):.0f}",
            f"{statistics.mean(latencies_ms):.0f}",
        )
    if trigger_ms:
        table.add_row(
            "peer: Spark micro-batch duration (triggerExecution)",
            f"{len(trigger_ms)}",
            f"{statistics.median(trigger_ms):.0f}",
            f"{_percentile(trigger_ms, 0.95):.0f}",
            f"{max(trigger_ms):.0f}",
            f"{statistics.mean(trigger_ms):.0f}",
        )
    emit_table(
        str(table.title),
        [str(c.header) for c in table.columns],
        [[str(cell) for cell in row] for row in zip(*(list(c.cells) for c in table.columns), strict=True)],
    )
    console.print(table)
    console.print(f"[dim]{machine_summary()}[/dim]")


if __name__ == "__main__":
    main()
