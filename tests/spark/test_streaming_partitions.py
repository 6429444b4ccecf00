"""A running stream when the topic changes: partitions added (read from offset 0) and a topic
deleted with failOnDataLoss=false (warned and skipped; the query keeps running)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from spark_kafkalite.client import KafkaAdminClient

pytestmark = pytest.mark.timeout(180)


def _memory_query(spark: Any, bootstrap: str, name: str, **options: str) -> Any:
    reader = spark.readStream.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="200 milliseconds")
        .start()
    )


def _rows(spark: Any, name: str) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.partition, r.offset) for r in spark.sql(f"select * from {name}").collect())


def _wait_rows(spark: Any, name: str, expected: int, timeout_s: float = 60.0) -> list[tuple[str, int, int]]:
    deadline = time.monotonic() + timeout_s
    rows = _rows(spark, name)
    while len(rows) < expected and time.monotonic() < deadline:
        time.sleep(0.3)
        rows = _rows(spark, name)
    return rows


def test_added_partitions_are_read_from_earliest(spark, bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic(partitions=1)
    produce(topic, [(0, None, b"a")] * 3)
    name = f"mem_{uuid.uuid4().hex[:8]}"
    query = _memory_query(spark, bootstrap_servers, name, subscribe=topic, startingOffsets="earliest")
    try:
        assert _wait_rows(spark, name, 3) == [(topic, 0, o) for o in range(3)]
        with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
            admin.create_partitions({topic: 3})
        produce(topic, [(1, None, b"b")] * 2 + [(2, None, b"c")] * 4)
        rows = _wait_rows(spark, name, 9)
        assert rows == [(topic, 0, o) for o in range(3)] + [(topic, 1, o) for o in range(2)] + [
            (topic, 2, o) for o in range(4)
        ]
        assert query.isActive and query.exception() is None
    finally:
        query.stop()


def test_deleted_topic_is_skipped_without_fail_on_data_loss(
    spark, bootstrap_servers, make_topic, produce
) -> None:
    kept, deleted = make_topic(), make_topic()
    produce(kept, [(0, None, b"k")] * 2)
    produce(deleted, [(0, None, b"d")] * 2)
    name = f"mem_{uuid.uuid4().hex[:8]}"
    query = _memory_query(
        spark,
        bootstrap_servers,
        name,
        subscribe=f"{kept},{deleted}",
        startingOffsets="earliest",
        failOnDataLoss="false",
    )
    try:
        assert len(_wait_rows(spark, name, 4)) == 4
        with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
            admin.delete_topics([deleted])
        time.sleep(1.0)  # a few triggers plan batches without the deleted topic
        produce(kept, [(0, None, b"k2")] * 3)
        rows = _wait_rows(spark, name, 7)
        assert [r for r in rows if r[0] == kept] == [(kept, 0, o) for o in range(5)]
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
