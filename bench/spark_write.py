"""Spark batch write: ``df.write.format("kafkalite")`` vs a no-op Arrow writer.

The same cached DataFrame of N Kafka-shaped rows (12-byte keys, 100-byte values, 2 Spark
partitions) is written, on a local[2] SparkSession:

- ours: ``format("kafkalite")`` to a 4-partition topic (our producer, acks=all, default
  linger / batch size; the record count on the topic is checked with confluent-kafka);
- peer: a Python ``DataSourceArrowWriter`` that receives the same Arrow batches and drops them:
  the floor of any Python sink (JVM -> Python worker Arrow transfer, no Kafka).

Each is warmed up once (untimed, 10k rows) and timed once.

    python bench/spark_write.py [--records 100000] [--bootstrap-server 127.0.0.1:9092]
"""

from __future__ import annotations

import os
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
            warm = df.limit(10_000).repartition(2)  # both Python workers warm (imports), as in the timed run
            spark.dataSource.register(noop_arrow_sink())
            results: list[Result] = []

            def kafkalite(frame: Any, topic: str) -> None:
                (
                    frame.write.format("kafkalite")
                    .option("kafka.bootstrap.servers", bootstrap_servers)
                    .option("topic", topic)
                    .options(**extra)
                    .mode("append")
                    .save()
                )

            warm_topic, topic = topic_name("bench-spark-write-warm"), topic_name("bench-spark-write")
            create_topic(bootstrap_servers, warm_topic, args.partitions)
            create_topic(bootstrap_servers, topic, args.partitions)
            console.print("running ours: format(kafkalite) ...")
            kafkalite(warm, warm_topic)
            cpu_before = broker_cpu.read()
            start = time.perf_counter()
            kafkalite(df, topic)
            elapsed = time.perf_counter() - start
            cpu_after = broker_cpu.read()
            on_topic = topic_record_count(bootstrap_servers, topic, args.partitions)
            note = "" if on_topic == args.records else f"WRONG COUNT on topic: {on_topic:,}"
            label = "ours: write.format(kafkalite)" + (f" {' '.join(args.option)}" if args.option else "")
            results.append(
                Result(
                    label,
                    args.records,
                    elapsed,
                    args.records * (VALUE_SIZE_BYTES + 12),
                    note,
                    None if cpu_before is None or cpu_after is None else cpu_after - cpu_before,
                )
            )

            console.print("running peer: no-op Arrow writer ...")
            warm.write.format("bench_noop_arrow_sink").mode("append").save()
            start = time.perf_counter()
            df.write.format("bench_noop_arrow_sink").mode("append").save()
            elapsed = time.perf_counter() - start
            results.append(
                Result(
                    "peer: Python DataSourceArrowWriter, no-op",
                    args.records,
                    elapsed,
                    args.records * (VALUE_SIZE_BYTES + 12),
                )
            )
        finally:
            spark.stop()
    print_table(
        f"spark write: {args.records:,} rows (12-byte keys, {VALUE_SIZE_BYTES}-byte values), 2 Spark partitions, "
        f"topic with {args.partitions} partitions, master {args.master}",
        results,
        unit="rows",
        mb_label="key+value MB/s",
    )


if __name__ == "__main__":
    main()
