"""The demo's steps against a cluster and a SparkSession; :func:`run_demo` returns the result.

See the package docstring for why every (carrier, day) window is written exactly once and is
correct.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalite.demo.data import DemoError, airline_names, finish_row, rank_key, read_flights
from spark_kafkalite.demo.progress import Display, StreamStats, watch

__all__ = ["DemoConfig", "DemoResult", "run_demo", "SENTINEL_YEAR"]

log = logging.getLogger(__name__)

SENTINEL_YEAR = 2100
_END_OF_DATA = "2014-01-01 00:00:00"  # every 2013 event is before this; sentinels are after it
_FLIGHTS_JSON_SCHEMA = (
    "year int, month int, day int, dep_time int, sched_dep_time int, dep_delay int, arr_time int, "
    "sched_arr_time int, arr_delay int, carrier string, flight int, tailnum string, origin string, "
    "dest string, air_time int, distance int, hour int, minute int, time_hour timestamp"
)
_WINDOW_JSON_SCHEMA = (
    "carrier string, day string, flights long, departed long, sum_dep_delay long, avg_dep_delay double, "
    "max_dep_delay int, delayed_15 long"
)


@dataclass
class DemoConfig:
    """Demo settings (the ``kafkalite demo`` flags)."""

    data_dir: str | None = None
    bootstrap_servers: str | None = None
    partitions: int = 4
    max_offsets_per_trigger: int = 50_000
    watermark_delay: str = "14 days"
    show_progress: bool = True
    force: bool = False  # with an external bootstrap server: delete existing demo topics anyway
    input_topic: str = "flights"
    output_topic: str = "delays_by_carrier"
    timeout_s: float = 600.0
    brokers: int = 1  # embedded cluster size; topics get replication factor min(brokers, 3)
    replication_factor: int = -1  # -1: the cluster's default.replication.factor


@dataclass
class DemoResult:
    """What :func:`run_demo` returns.

    ``carriers``: one dict per carrier, sorted by ``avg_dep_delay`` descending, with keys
    ``carrier``, ``name``, ``flights`` (scheduled), ``departed`` (with a departure delay, i.e. not
    cancelled), ``cancelled``, ``sum_dep_delay`` (minutes), ``avg_dep_delay`` (minutes, over
    departed flights), ``max_dep_delay`` (minutes), ``delayed_15`` (departures more than 15
    minutes late), ``pct_delayed_15`` (percent of departed), ``days`` (windows, i.e. days with
    flights).
    """

    carriers: list[dict[str, Any]]
    rows_loaded: int = 0
    micro_batches: int = 0
    windows_written: int = 0
    duplicate_windows: int = 0
    rows_dropped_by_watermark: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def check_demo_topics_absent(bootstrap: str, config: DemoConfig) -> None:
    """Refuse to touch a user's cluster that already has the demo topics (the demo deletes and
    recreates them); ``config.force`` skips the check.

    Raises:
        DemoError: ``config.input_topic`` or ``config.output_topic`` exists on ``bootstrap``.
    """
    if config.force:
        return
    from spark_kafkalite.client import KafkaAdminClient

    with KafkaAdminClient({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo"}) as admin:
        existing = sorted(set(admin.list_topics()) & {config.input_topic, config.output_topic})
    if existing:
        raise DemoError(
            f"topic(s) {', '.join(existing)} already exist on {bootstrap}; the demo deletes and recreates"
            " them: pass --force to allow that"
        )


def _recreate_topics(bootstrap: str, topics: dict[str, int], replication_factor: int = -1) -> None:
    from spark_kafkalite.client import KafkaAdminClient, NewTopic

    with KafkaAdminClient({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo"}) as admin:
        existing = set(admin.list_topics()) & set(topics)
        if existing:
            admin.delete_topics(sorted(existing))
        admin.create_topics(
            [NewTopic(name, partitions, replication_factor) for name, partitions in topics.items()]
        )


def _end_offsets(consumer: Any, topic: str, partitions: int) -> dict[int, int]:
    from spark_kafkalite.client import TopicPartition

    ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    return {tp.partition: off for tp, off in ends.items()}


def _send_sentinels(bootstrap: str, topic: str, partitions: int) -> None:
    from spark_kafkalite.client import KafkaProducer

    event = json.dumps(
        {"year": SENTINEL_YEAR, "month": 1, "day": 1, "hour": 0, "minute": 0, "carrier": "__END__"}
    )
    with KafkaProducer({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo-sentinel"}) as producer:
        futures = [
            producer.send(topic, value=event.encode(), key=b"__END__", partition=p) for p in range(partitions)
        ]
        producer.flush()
        for future in futures:
            future.result(timeout=30)


def _load_flights(spark: Any, bootstrap: str, config: DemoConfig, table: pa.Table, display: Display) -> int:
    from pyspark.sql import functions as F

    from spark_kafkalite.client import KafkaConsumer
    from spark_kafkalite.client.producer.partitioner import partition_for_key

    display.task("load", f"load flights -> topic {config.input_topic}", table.num_rows)
    # Each record goes to the partition the default partitioner picks for its key (murmur2), but
    # computed here so that one Spark task writes each Kafka partition, in event-time order.
    partition_of = {
        carrier: partition_for_key(carrier.encode(), config.partitions)
        for carrier in pc.unique(table.column("carrier")).to_pylist()
    }
    partition_map = F.create_map(*[F.lit(x) for item in partition_of.items() for x in item])
    event_order = ["year", "month", "day", "hour", "minute"]
    events = (
        spark.createDataFrame(table)
        .withColumn("partition", partition_map[F.col("carrier")].cast("int"))
        .repartition(config.partitions, "partition")
        .sortWithinPartitions("partition", *event_order)
        .select(
            F.col("carrier").alias("key"),
            F.to_json(F.struct(*[F.col(c) for c in table.column_names])).alias("value"),
            F.col("partition"),
        )
    )
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo-progress"})

    def poll() -> None:
        display.update(
            "load", completed=sum(_end_offsets(consumer, config.input_topic, config.partitions).values())
        )

    try:
        with watch(0.5, poll):
            (
                events.write.format("kafkalite")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("topic", config.input_topic)
                .mode("append")
                .save()
            )
        loaded = sum(_end_offsets(consumer, config.input_topic, config.partitions).values())
    finally:
        consumer.close()
    display.update("load", completed=loaded, info="done")
    if loaded != table.num_rows:
        raise DemoError(f"loaded {loaded} records into {config.input_topic}, expected {table.num_rows}")
    return loaded


def _start_query(spark: Any, bootstrap: str, config: DemoConfig, checkpoint: Path) -> Any:
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", config.input_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(config.max_offsets_per_trigger))
        .load()
        .select(F.from_json(F.col("value").cast("string"), _FLIGHTS_JSON_SCHEMA).alias("f"))
        .select("f.carrier", "f.dep_delay", "f.year", "f.month", "f.day", "f.hour", "f.minute")
        .withColumn(
            "event_time",
            F.make_timestamp(
                F.col("year"),
                F.col("month"),
                F.col("day"),
                F.col("hour"),
                F.col("minute"),
                F.lit(0),
                F.lit("UTC"),
            ),
        )
        .withWatermark("event_time", config.watermark_delay)
        # After the watermark: drops the end-of-stream sentinels once they moved the watermark.
        .where(F.col("event_time") < F.lit(_END_OF_DATA).cast("timestamp"))
    )
    windows = events.groupBy(F.window("event_time", "1 day"), F.col("carrier")).agg(
        F.count(F.lit(1)).alias("flights"),
        F.count("dep_delay").alias("departed"),
        F.sum("dep_delay").alias("sum_dep_delay"),
        F.avg("dep_delay").alias("avg_dep_delay"),
        F.max("dep_delay").alias("max_dep_delay"),
        F.sum(F.when(F.col("dep_delay") > 15, 1).otherwise(0)).cast("long").alias("delayed_15"),
    )
    output = windows.select(
        F.concat_ws("|", F.col("carrier"), F.date_format(F.col("window.start"), "yyyy-MM-dd")).alias("key"),
        F.to_json(
            F.struct(
                F.col("carrier"),
                F.date_format(F.col("window.start"), "yyyy-MM-dd").alias("day"),
                F.col("flights"),
                F.col("departed"),
                F.coalesce(F.col("sum_dep_delay"), F.lit(0)).alias("sum_dep_delay"),
                F.col("avg_dep_delay"),
                F.col("max_dep_delay"),
                F.col("delayed_15"),
            )
        ).alias("value"),
    )
    return (
        output.writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", config.output_topic)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(processingTime="500 milliseconds")
        .start()
    )


def _run_stream(
    spark: Any,
    bootstrap: str,
    config: DemoConfig,
    checkpoint: Path,
    loaded_ends: dict[int, int],
    display: Display,
) -> tuple[StreamStats, int]:
    from spark_kafkalite.client import KafkaConsumer

    total = sum(loaded_ends.values())
    display.task("stream", "stream: aggregate per carrier/day", total)
    query = _start_query(spark, bootstrap, config, checkpoint)
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo-progress"})
    stats = StreamStats()
    final_ends = {p: off + 1 for p, off in loaded_ends.items()}
    sentinels_sent = False
    deadline = time.monotonic() + config.timeout_s
    windows = 0
    try:
        while True:
            if query.exception() is not None:
                raise DemoError(f"the streaming query failed: {query.exception()}")
            stats.add(query.recentProgress)
            windows = sum(_end_offsets(consumer, config.output_topic, config.partitions).values())
            consumed = stats.end_offsets(config.input_topic)
            display.update(
                "stream",
                completed=min(total, sum(min(consumed.get(p, 0), loaded_ends[p]) for p in loaded_ends)),
                info=(
                    f"micro-batches {stats.data_batches}  behind latest {stats.behind_latest(config.input_topic):>6}"
                    f"  windows emitted {windows}"
                ),
            )
            if stats.dropped_by_watermark:
                raise DemoError(
                    f"{stats.dropped_by_watermark} rows arrived behind the watermark and were dropped; "
                    "rerun with a larger --watermark-delay"
                )
            if not sentinels_sent and consumed == loaded_ends:
                _send_sentinels(bootstrap, config.input_topic, config.partitions)
                sentinels_sent = True
            if sentinels_sent and consumed == final_ends and stats.state_rows() == 0:
                break
            if time.monotonic() > deadline:
                raise DemoError(f"the streaming query did not finish within {config.timeout_s:.0f} s")
            time.sleep(0.25)
    finally:
        try:
            query.stop()
        except Exception:  # noqa: BLE001 - the consumer still closes; the run's own error wins
            log.warning("stopping the streaming query failed", exc_info=True)
        consumer.close()
    stats.add(query.recentProgress)
    consumer = _fresh_consumer(bootstrap)
    try:
        windows = sum(_end_offsets(consumer, config.output_topic, config.partitions).values())
    finally:
        consumer.close()
    display.update(
        "stream", completed=total, info=f"micro-batches {stats.data_batches}  windows emitted {windows}"
    )
    return stats, windows


def _fresh_consumer(bootstrap: str) -> Any:
    from spark_kafkalite.client import KafkaConsumer

    return KafkaConsumer({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo-progress"})


def _read_results(spark: Any, bootstrap: str, config: DemoConfig) -> tuple[list[dict[str, Any]], int, int]:
    from pyspark.sql import functions as F

    rows = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", config.output_topic)
        .load()
        .select(F.from_json(F.col("value").cast("string"), _WINDOW_JSON_SCHEMA).alias("w"))
        .select("w.*")
        .cache()
    )
    try:
        written = rows.count()
        unique = rows.dropDuplicates(["carrier", "day"])
        per_carrier = unique.groupBy("carrier").agg(
            F.sum("flights").alias("flights"),
            F.sum("departed").alias("departed"),
            F.sum("sum_dep_delay").alias("sum_dep_delay"),
            F.max("max_dep_delay").alias("max_dep_delay"),
            F.sum("delayed_15").alias("delayed_15"),
            F.count(F.lit(1)).alias("days"),
        )
        collected = [r.asDict() for r in per_carrier.collect()]
        days = sum(r["days"] for r in collected)
    finally:
        rows.unpersist()
    names = airline_names()
    carriers = sorted((finish_row(r, names) for r in collected), key=rank_key)
    return carriers, written, written - days


def run_demo(
    spark: Any,
    bootstrap_servers: str,
    config: DemoConfig | None = None,
    work_dir: str | os.PathLike[str] | None = None,
) -> DemoResult:
    """Run steps 2-4 against ``bootstrap_servers`` with ``spark``; returns the per-carrier result.

    ``work_dir`` holds the streaming checkpoint (a temporary directory when None). Topics
    ``config.input_topic`` and ``config.output_topic`` are deleted and recreated.

    Raises:
        DemoError: rows were dropped by the watermark, the query failed or timed out, or a load
            was incomplete.
    """
    config = config or DemoConfig()
    timings: dict[str, float] = {}
    own_dir = work_dir is None
    base = Path(tempfile.mkdtemp(prefix="kafkalite-demo-")) if own_dir else Path(work_dir)  # type: ignore[arg-type]
    checkpoint = base / "checkpoints" / config.output_topic
    shutil.rmtree(checkpoint, ignore_errors=True)
    previous_tz = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    try:
        with Display(config.show_progress) as display:
            started = time.monotonic()
            table = read_flights()
            _recreate_topics(
                bootstrap_servers,
                {config.input_topic: config.partitions, config.output_topic: config.partitions},
                config.replication_factor,
            )
            timings["prepare"] = time.monotonic() - started

            started = time.monotonic()
            loaded = _load_flights(spark, bootstrap_servers, config, table, display)
            consumer = _fresh_consumer(bootstrap_servers)
            try:
                loaded_ends = _end_offsets(consumer, config.input_topic, config.partitions)
            finally:
                consumer.close()
            timings["load"] = time.monotonic() - started

            started = time.monotonic()
            stats, windows = _run_stream(spark, bootstrap_servers, config, checkpoint, loaded_ends, display)
            timings["stream"] = time.monotonic() - started

            started = time.monotonic()
            display.task("read", f"read back topic {config.output_topic}", None)
            carriers, written, duplicates = _read_results(spark, bootstrap_servers, config)
            display.update("read", completed=written, total=written, info=f"{written} windows")
            timings["read"] = time.monotonic() - started
        if stats.input_rows != loaded + config.partitions:
            raise DemoError(
                f"the stream read {stats.input_rows} rows, expected {loaded} flights + {config.partitions} sentinels"
            )
        return DemoResult(
            carriers=carriers,
            rows_loaded=loaded,
            micro_batches=stats.data_batches,
            windows_written=written,
            duplicate_windows=duplicates,
            rows_dropped_by_watermark=stats.dropped_by_watermark,
            seconds=timings,
        )
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous_tz)
        if own_dir:
            shutil.rmtree(base, ignore_errors=True)
