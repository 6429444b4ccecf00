"""Streaming read and write with format("kafkalite"): admission control, AvailableNow,
processing-time triggers, checkpoint restarts, the streaming sink."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

pytestmark = pytest.mark.timeout(180)


def _stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _batches(query: Any) -> list[dict[str, Any]]:
    """Progress of the micro-batches that read data, as plain dicts."""
    progress = [json.loads(p.json) for p in query.recentProgress]
    return [p for p in progress if p["numInputRows"] > 0]


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    return json.loads(value) if isinstance(value, str) else value


def test_max_offsets_per_trigger_available_now_memory_sink(
    spark, bootstrap_servers, make_topic, produce
) -> None:
    topic = make_topic(partitions=2)
    produce(topic, [(p, f"k{i}".encode(), f"{p}-{i}".encode()) for p in (0, 1) for i in range(25)])
    name = f"mem_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(
            spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="12"
        )
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    rows = spark.sql(f"select * from {name}").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, i) for p in (0, 1) for i in range(25)]
    assert all(r.value == f"{r.partition}-{r.offset}".encode() for r in rows)
    batches = _batches(query)
    assert len(batches) >= 4  # 50 records, at most 12 per micro-batch
    assert all(b["numInputRows"] <= 12 for b in batches)
    last = batches[-1]["sources"][0]
    assert _offsets(last["endOffset"]) == {topic: {"0": 25, "1": 25}}
    assert _offsets(last["latestOffset"]) == {topic: {"0": 25, "1": 25}}  # reportLatestOffset


def test_default_latest_then_processing_time(spark, bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic(partitions=2)
    produce(topic, [(p, None, b"old") for p in (0, 1) for _ in range(3)])
    name = f"mem_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(spark, bootstrap_servers, subscribe=topic)
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        deadline = time.monotonic() + 60
        while not query.recentProgress and time.monotonic() < deadline:  # the start offsets are resolved
            time.sleep(0.2)
        query.processAllAvailable()
        produce(topic, [(p, None, f"new-{p}-{i}".encode()) for p in (0, 1) for i in range(4)])
        query.processAllAvailable()
        rows = spark.sql(f"select * from {name}").collect()
    finally:
        query.stop()
    assert sorted(r.value for r in rows) == sorted(f"new-{p}-{i}".encode() for p in (0, 1) for i in range(4))
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in (0, 1) for o in range(3, 7)]


def test_streaming_write_to_topic(
    spark, bootstrap_servers, make_topic, produce, consume_all, tmp_path: Path
) -> None:
    source, sink = make_topic(partitions=2), make_topic(partitions=3)
    produce(source, [(i % 2, f"k{i}".encode(), f"{i}".encode()) for i in range(40)])
    query = (
        _stream(
            spark, bootstrap_servers, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger="15"
        )
        .select(
            F.col("key"),
            F.concat(F.lit("seen-"), F.col("value").cast("string")).alias("value"),
            F.array(
                F.struct(
                    F.lit("src-offset").alias("key"),
                    F.col("offset").cast("string").cast("binary").alias("value"),
                )
            ).alias("headers"),
        )
        .writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    records = consume_all(sink)
    assert sorted(r.value for r in records) == sorted(f"seen-{i}".encode() for i in range(40))
    by_value = {r.value: r for r in records}
    for i in range(40):
        record = by_value[f"seen-{i}".encode()]
        assert record.key == f"k{i}".encode()
        assert [h[0] for h in record.headers] == ["src-offset"]
    assert len(_batches(query)) >= 3


def _run_to_parquet(spark: Any, bootstrap: str, topic: str, out: Path, checkpoint: Path) -> Any:
    query = (
        _stream(spark, bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="10")
        .select("partition", "offset", F.col("value").cast("string").alias("value"))
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    return query


def test_restart_from_checkpoint_no_gap_no_duplicate(
    spark, bootstrap_servers, make_topic, produce, tmp_path: Path
) -> None:
    topic = make_topic(partitions=2)
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    produce(topic, [(i % 2, None, f"a{i}".encode()) for i in range(24)])
    first = _run_to_parquet(spark, bootstrap_servers, topic, out, checkpoint)
    assert sum(b["numInputRows"] for b in _batches(first)) == 24
    produce(topic, [(i % 2, None, f"b{i}".encode()) for i in range(17)])
    second = _run_to_parquet(spark, bootstrap_servers, topic, out, checkpoint)
    assert sum(b["numInputRows"] for b in _batches(second)) == 17
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 41
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        [(0, o) for o in range(21)] + [(1, o) for o in range(20)]
    )
    assert sorted(r.value for r in rows) == sorted(
        [f"a{i}" for i in range(24)] + [f"b{i}" for i in range(17)]
    )


def test_streaming_option_errors(spark, bootstrap_servers, make_topic) -> None:
    topic = make_topic()
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        query = (
            _stream(spark, bootstrap_servers, subscribe=topic, endingOffsets="latest")
            .writeStream.format("memory")
            .queryName(f"mem_{uuid.uuid4().hex[:8]}")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(60)
        raise AssertionError(str(query.exception()))
    query = (
        _stream(spark, bootstrap_servers, subscribe="no-such-topic-kafkalite-stream")
        .writeStream.format("memory")
        .queryName(f"mem_{uuid.uuid4().hex[:8]}")
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="Topic 'no-such-topic-kafkalite-stream' does not exist"):
        query.awaitTermination(60)


def test_uncommitted_first_batch_replays_with_the_same_start(
    spark, bootstrap_servers, make_topic, produce, tmp_path: Path
) -> None:
    """Spark calls initialOffset() again when it replays an uncommitted batch 0: with
    startingOffsets=latest the start must not move (it stays the -1 marker)."""
    topic = make_topic()
    out, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    produce(topic, [(0, None, b"before-start")] * 3)

    def write_batch(
        df: Any, batch_id: int
    ) -> None:  # re-executes a replayed batch (a file sink would skip it)
        df.withColumn("batch", F.lit(batch_id)).write.mode("append").parquet(str(out))

    def run() -> Any:
        query = (
            _stream(spark, bootstrap_servers, subscribe=topic)
            .select(F.col("offset"), F.col("value").cast("string").alias("value"))
            .writeStream.foreachBatch(write_batch)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(120)
        assert query.exception() is None
        return query

    run()
    first_start = json.loads((checkpoint / "offsets" / "0").read_text().splitlines()[-1])
    assert first_start == {topic: {"0": 3}}
    for name in ("0", ".0.crc"):  # as if the query died before committing batch 0
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    produce(topic, [(0, None, b"after-start")] * 5)
    run()
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.offset, r.value, r.batch) for r in rows) == [(o, "after-start", 1) for o in range(3, 8)]


def test_deleted_topic_is_data_loss(spark, bootstrap_servers, make_topic, produce) -> None:
    from spark_kafkalite.client import KafkaAdminClient

    topic = make_topic()
    produce(topic, [(0, None, b"x")] * 3)
    query = (
        _stream(spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName(f"mem_{uuid.uuid4().hex[:8]}")
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
            admin.delete_topics([topic])
        with pytest.raises(Exception, match=rf"\[{topic}-0\] are gone.*failOnDataLoss"):
            query.awaitTermination(60)
    finally:
        query.stop()
