"""Spark batch write: ``df.write.format("kafkalite")`` vs a no-op Arrow writer.

The same cached DataFrame of N Kafka-shaped rows (12-byte keys, 100-byte values, 2 Spark
partitions) is written, on a local[2] SparkSession:

- ours: ``format("kafkalite")`` to a 4-partition topic (our producer, acks=all, default
  linger / batch size; the record count on the topic is checked with confluent-kafka);
- peer: a Python ``DataSourceArrowWriter`` that receives the same Arrow batches and drops them:
  the floor of any Python sink (JVM -> Python worker Arrow transfer, no Kafka);
- ours with ``deliveryGuarantee=exactly-once`` (issue #12): the same write, each task in one
  Kafka transaction with its batch marker (a new ``batchId`` per round), to its own topic; its
  ratio is taken against the at-least-once row (goal >= 0.7x).

Each is warmed up once with the whole DataFrame (untimed: both Python workers have done their
imports, and the JVM's cached-rows -> Arrow path, shared by both writers, is compiled before
either is timed; with a 10k-row warm-up the first timed write paid that for the other), then
timed ``--rounds`` times, alternately (ours, peer, exactly-once, ours, peer, ...); the table
shows each one's median round and the note its rounds.

    python bench/spark_write.py [--records 100000] [--rounds 3] [--bootstrap-server 127.0.0.1:9092]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from _common import (
    VALUE_SIZE_BYTES,
    Result,
    base_parser,
    bootstrap,
    committed_record_count,
    console,
    create_topic,
    make_keys,
    make_value,
    print_table,
    topic_name,
    topic_record_count,
)


def noop_arrow_sink() -> type:
    """A Python DataSource ``bench_noop_arrow_sink`` whose Arrow writer counts rows and drops them."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class Counted(WriterCommitMessage):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class NoopArrowWriter(DataSourceArrowWriter):
        def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
            return Counted(sum(batch.num_rows for batch in iterator))

    class NoopArrowSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_noop_arrow_sink"

        def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
            return NoopArrowWriter()

    return NoopArrowSink


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], default_records=100_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=3, help="timed writes of each (the median is reported)")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra sink option, e.g. kafka.linger.ms=20",
    )
    args = parser.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from spark_kafkalite.demo.session import expose_auto_registration_module

    expose_auto_registration_module()
    from pyspark.sql import SparkSession

    extra = dict(option.split("=", 1) for option in args.option)
    with bootstrap(args.bootstrap_server) as (bootstrap_servers, broker_cpu):
        spark = (
            SparkSession.builder.master(args.master)
            .appName("kafkalite-bench-write")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
        try:
            value = make_value()
            table = pa.table(
                {
                    "key": pa.array(make_keys(args.records), pa.binary()),
                    "value": pa.array([value] * args.records, pa.binary()),
                }
            )
            df = spark.createDataFrame(table).repartition(2).cache()
            df.count()
            spark.dataSource.register(noop_arrow_sink())

            def kafkalite(frame: Any, topic: str) -> None:
                (
                    frame.write.format("kafkalite")
                    .option("kafka.bootstrap.servers", bootstrap_servers)
                    .option("topic", topic)
                    .options(**extra)
                    .mode("append")
                    .save()
                )

            eos_prefix = topic_name("bench-spark-write-eos")

            def exactly_once(frame: Any, topic: str, batch_id: int) -> None:
                (
                    frame.write.format("kafkalite")
                    .option("kafka.bootstrap.servers", bootstrap_servers)
                    .option("topic", topic)
                    .options(**extra)
                    .option("deliveryGuarantee", "exactly-once")
                    .option("transactionalIdPrefix", eos_prefix)
                    .option("batchId", str(batch_id))
                    .mode("append")
                    .save()
                )

            def noop(frame: Any) -> None:
                frame.write.format("bench_noop_arrow_sink").mode("append").save()

            warm_topic = topic_name("bench-spark-write-warm")
            create_topic(bootstrap_servers, warm_topic, args.partitions)
            console.print("warming up both writers with the whole DataFrame ...")
            kafkalite(df, warm_topic)
            noop(df)
            exactly_once(df, warm_topic, 0)
            ours_s: list[float] = []
            ours_cpu: list[float] = []
            peer_s: list[float] = []
            eos_s: list[float] = []
            notes: list[str] = []
            eos_notes: list[str] = []
            for round_no in range(args.rounds):
                topic = topic_name("bench-spark-write")
                create_topic(bootstrap_servers, topic, args.partitions)
                console.print(
                    f"round {round_no + 1}/{args.rounds}: ours: format(kafkalite), peer: no-op Arrow writer ..."
                )
                cpu_before = broker_cpu.read()
                start = time.perf_counter()
                kafkalite(df, topic)
                ours_s.append(time.perf_counter() - start)
                cpu_after = broker_cpu.read()
                if cpu_before is not None and cpu_after is not None:
                    ours_cpu.append(cpu_after - cpu_before)
                on_topic = topic_record_count(bootstrap_servers, topic, args.partitions)
                if on_topic != args.records:
                    notes.append(f"WRONG COUNT on topic: {on_topic:,}")
                start = time.perf_counter()
                noop(df)
                peer_s.append(time.perf_counter() - start)
                eos_topic = topic_name("bench-spark-write-eos")
                create_topic(bootstrap_servers, eos_topic, args.partitions)
                start = time.perf_counter()
                exactly_once(df, eos_topic, round_no + 1)
                eos_s.append(time.perf_counter() - start)
                on_topic = committed_record_count(bootstrap_servers, eos_topic, args.partitions)
                if on_topic != args.records:
                    eos_notes.append(f"WRONG COUNT on topic (read_committed): {on_topic:,}")

            def rounds_note(times: list[float]) -> str:
                return "/".join(f"{t:.2f}" for t in times) + " s"

            label = "ours: write.format(kafkalite)" + (f" {' '.join(args.option)}" if args.option else "")
            results: list[Result] = [
                Result(
                    label,
                    args.records,
                    statistics.median(ours_s),
                    args.records * (VALUE_SIZE_BYTES + 12),
                    "; ".join([*notes, rounds_note(ours_s)]),
                    statistics.median(ours_cpu) if ours_cpu else None,
                ),
                Result(
                    "peer: Python DataSourceArrowWriter, no-op",
                    args.records,
                    statistics.median(peer_s),
                    args.records * (VALUE_SIZE_BYTES + 12),
                    rounds_note(peer_s),
                ),
                Result(
                    "eos: write.format(kafkalite) deliveryGuarantee=exactly-once",
                    args.records,
                    statistics.median(eos_s),
                    args.records * (VALUE_SIZE_BYTES + 12),
                    "; ".join([*eos_notes, rounds_note(eos_s)]),
                ),
            ]
        finally:
            spark.stop()
    print_table(
        f"spark write: {args.records:,} rows (12-byte keys, {VALUE_SIZE_BYTES}-byte values), 2 Spark partitions, "
        f"topic with {args.partitions} partitions, master {args.master}, median of {args.rounds} rounds",
        results,
        unit="rows",
        mb_label="key+value MB/s",
    )


if __name__ == "__main__":
    main()
