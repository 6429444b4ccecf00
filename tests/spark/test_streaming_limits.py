"""Streaming read limits beyond maxOffsetsPerTrigger, end to end: maxBytesPerTrigger,
minOffsetsPerTrigger with maxTriggerDelay, and the lag computed from the progress."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from spark_kafkalite.datasource.progress import offsets_behind_latest

pytestmark = pytest.mark.timeout(180)


def _stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _data_batches(query: Any) -> list[dict[str, Any]]:
    return [p for p in (json.loads(p.json) for p in query.recentProgress) if p["numInputRows"] > 0]


def test_max_bytes_per_trigger_and_lag_in_progress(spark, bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic(partitions=2)
    produce(topic, [(i % 2, None, b"x" * 200) for i in range(60)])  # ~270 bytes per record on disk
    name = f"mem_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(
            spark, bootstrap_servers, subscribe=topic, startingOffsets="earliest", maxBytesPerTrigger="4000"
        )
        .writeStream.format("memory")
        .queryName(name)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert spark.sql(f"select count(*) from {name}").collect()[0][0] == 60
    batches = _data_batches(query)
    assert len(batches) >= 3, [b["numInputRows"] for b in batches]
    assert all(b["numInputRows"] <= 20 for b in batches), [b["numInputRows"] for b in batches]
    first, last = offsets_behind_latest(batches[0]), offsets_behind_latest(batches[-1])
    assert first["maxOffsetsBehindLatest"] > 0
    assert last["maxOffsetsBehindLatest"] == 0 and last["partitions"] == {f"{topic}-0": 0, f"{topic}-1": 0}


def test_min_offsets_per_trigger_waits_for_enough_records(
    spark, bootstrap_servers, make_topic, produce
) -> None:
    topic = make_topic()
    name = f"mem_{uuid.uuid4().hex[:8]}"
    query = (
        _stream(
            spark,
            bootstrap_servers,
            subscribe=topic,
            startingOffsets="earliest",
            minOffsetsPerTrigger="5",
            maxTriggerDelay="1h",
        )
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def count() -> int:
        return spark.sql(f"select count(*) from {name}").collect()[0][0]

    try:
        deadline = time.monotonic() + 60
        while not query.recentProgress and time.monotonic() < deadline:
            time.sleep(0.2)  # the first trigger always runs (it reads nothing here)
        produce(topic, [(0, None, b"a")] * 3)
        time.sleep(3)  # ~15 triggers: all delayed, 3 < minOffsetsPerTrigger
        assert count() == 0
        produce(topic, [(0, None, b"b")] * 2)
        deadline = time.monotonic() + 30
        while count() < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert count() == 5
        assert [b["numInputRows"] for b in _data_batches(query)] == [5]  # one batch, not 3 + 2
    finally:
        query.stop()
    assert query.exception() is None


def test_unknown_option_is_named(spark, bootstrap_servers, make_topic) -> None:
    topic = make_topic()
    with pytest.raises(Exception, match="Unknown option 'startingoffset'.*Did you mean 'startingOffsets'"):
        (
            spark.read.format("kafkalite")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffset", "earliest")
            .load()
            .collect()
        )
