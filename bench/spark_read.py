"""Spark batch read: ``spark.read.format("kafkalite")`` vs the Spark overhead floor.

A 4-partition topic is filled once (confluent-kafka) with N keyed records, 100-byte values.
Then, on a local[2] SparkSession, every source is warmed up with both actions (untimed), and
each action - ``count()`` and a full materialisation of every column with
``.write.format("noop")`` - is timed ``--rounds`` times with the sources alternating within a
round (the JVM is still compiling after the first queries: whoever ran first used to pay it);
the table shows the median round and the note every round. Peers, with rows of the same Kafka
schema and sizes:

- an in-memory DataFrame (``spark.createDataFrame`` of an Arrow table, repartitioned and
  cached; the warm-up count fills the cache): Spark's own floor;
- a Python DataSource yielding pre-built Arrow batches from memory (no Kafka): the floor for
  any Python data source, i.e. the cost of the Python worker -> JVM Arrow path alone.

    python bench/spark_read.py [--records 200000] [--rounds 3] [--bootstrap-server 127.0.0.1:9092]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from _common import (
    VALUE_SIZE_BYTES,
    Result,
    base_parser,
    bootstrap,
    console,
    create_topic,
    fill_topic_with_confluent,
    print_table,
    topic_name,
)

ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
    ]
)
SPARK_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)


def make_rows(records: int, partitions: int, topic: str) -> pa.Table:
    """``records`` Kafka-shaped rows (12-byte keys, 100-byte values) as an Arrow table.

    Self-contained (no ``_common`` import) because Spark's Python workers run it too."""
    value = os.urandom(VALUE_SIZE_BYTES)
    now = datetime.now(UTC)
    return pa.table(
        [
            pa.array([b"key-%08d" % i for i in range(records)], pa.binary()),
            pa.array([value] * records, pa.binary()),
            pa.array([topic] * records, pa.string()),
            pa.array([i % partitions for i in range(records)], pa.int32()),
            pa.array([i // partitions for i in range(records)], pa.int64()),
            pa.array([now] * records, pa.timestamp("us", tz="UTC")),
            pa.array([0] * records, pa.int32()),
        ],
        schema=ARROW_SCHEMA,
    )


def memory_arrow_source() -> type:
    """A Python DataSource ``bench_memory_arrow`` (options: records, partitions, batch_rows)
    whose reader yields one pre-built Arrow batch over and over: no I/O, no decoding."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class MemoryArrowReader(DataSourceReader):
        def __init__(self, options: dict[str, str]) -> None:
            self.records = int(options["records"])
            self.num_partitions = int(options["partitions"])
            self.batch_rows = int(options.get("batch_rows", "10000"))

        def partitions(self) -> list[InputPartition]:  # type: ignore[override]
            share, extra = divmod(self.records, self.num_partitions)
            return [InputPartition(share + (1 if i < extra else 0)) for i in range(self.num_partitions)]

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            rows: int = partition.value
            template = make_rows(min(rows, self.batch_rows), 1, "memory").to_batches()[0]
            while rows > 0:
                n = min(rows, template.num_rows)
                yield template if n == template.num_rows else template.slice(0, n)
                rows -= n

    class MemoryArrowSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "bench_memory_arrow"

        def schema(self) -> str:
            return SPARK_DDL

        def reader(self, schema: Any) -> DataSourceReader:
            return MemoryArrowReader(dict(self.options))

    return MemoryArrowSource


ACTIONS = ("count()", "write noop")


def run_action(action: str, make_df: Callable[[], Any]) -> tuple[int | None, float]:
    """Run one timed ``action`` on a fresh DataFrame; (count or None, seconds)."""
    start = time.perf_counter()
    if action == "count()":
        count: int | None = make_df().count()
    else:
        make_df().write.format("noop").mode("overwrite").save()
        count = None
    return count, time.perf_counter() - start


def time_sources(
    sources: list[tuple[str, Callable[[], Any]]], expected: int, rounds: int, results: list[Result]
) -> None:
    """Warm every source up with each action (untimed), then time each action ``rounds`` times,
    the sources alternating within a round (so none is systematically measured on a colder JVM
    or a busier moment than another); one Result per (source, action) with the median round."""
    for name, make_df in sources:
        console.print(f"warming up {name} ...")
        for action in ACTIONS:
            run_action(action, make_df)
    times: dict[tuple[str, str], list[float]] = {}
    wrong: dict[tuple[str, str], str] = {}
    for round_no in range(rounds):
        console.print(f"round {round_no + 1}/{rounds} ...")
        for action in ACTIONS:
            for name, make_df in sources:
                count, elapsed = run_action(action, make_df)
                times.setdefault((name, action), []).append(elapsed)
                if count is not None and count != expected:
                    wrong[(name, action)] = f"WRONG COUNT: {count:,} of {expected:,}"
    for name, _make_df in sources:
        for action in ACTIONS:
            rounds_s = times[(name, action)]
            note = wrong.get((name, action), "rounds " + ", ".join(f"{t:.2f}" for t in rounds_s) + " s")
            results.append(Result(f"{name}: {action}", expected, statistics.median(rounds_s), note=note))


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed runs of each action (the median is reported)"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra kafkalite source option, e.g. kafka.fetch.max.wait.ms=10",
    )
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    with bootstrap(args.bootstrap_server) as (bootstrap_servers, _broker_cpu):
        topic = topic_name("bench-spark")
        create_topic(bootstrap_servers, topic, args.partitions)
        console.print(f"filling {topic} with {args.records:,} records (confluent-kafka) ...")
        fill_topic_with_confluent(bootstrap_servers, topic, args.records, args.timeout_s)

        spark = (
            SparkSession.builder.master(args.master)
            .appName("kafkalite-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("WARN")
        try:
            results: list[Result] = []

            extra = dict(option.split("=", 1) for option in args.option)

            def ours() -> Any:
                return (
                    spark.read.format("kafkalite")
                    .option("kafka.bootstrap.servers", bootstrap_servers)
                    .option("subscribe", topic)
                    .option("startingOffsets", "earliest")
                    .option("endingOffsets", "latest")
                    .options(**extra)
                    .load()
                )

            label = "ours: format(kafkalite)" + (f" {' '.join(args.option)}" if args.option else "")

            # cached, so the floor is Spark's columnar cache, not shipping a LocalRelation per task
            in_memory = spark.createDataFrame(make_rows(args.records, args.partitions, topic))
            in_memory = in_memory.repartition(args.partitions).cache()

            spark.dataSource.register(memory_arrow_source())

            def memory_source() -> Any:
                return (
                    spark.read.format("bench_memory_arrow")
                    .option("records", str(args.records))
                    .option("partitions", str(args.partitions))
                    .load()
                )

            time_sources(
                [
                    (label, ours),
                    ("peer: in-memory DataFrame", lambda: in_memory),
                    ("peer: Python source, Arrow from memory", memory_source),
                ],
                args.records,
                args.rounds,
                results,
            )
        finally:
            spark.stop()

    print_table(
        f"spark read: {args.records:,} Kafka rows ({VALUE_SIZE_BYTES}-byte values), "
        f"{args.partitions} topic partitions, master {args.master}, median of {args.rounds} rounds",
        results,
        with_mb=False,
        unit="rows",
    )


if __name__ == "__main__":
    main()
