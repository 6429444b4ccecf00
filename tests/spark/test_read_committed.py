"""Spark batch read with ``kafka.isolation.level=read_committed`` (as Spark's ``kafka`` format):
the offset range ends at the Last Stable Offset, aborted records and transaction markers never
become rows, and the offset gaps they leave are not data loss (``failOnDataLoss`` stays true).
The transactions are written by confluent-kafka's transactional producer (an independent peer)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.timeout(180)


def _read(spark: Any, bootstrap: str, topic: str, **options: str) -> list[tuple[int, int, str]]:
    reader = (
        spark.read.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("failOnDataLoss", "true")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    rows = reader.load().select("partition", "offset", "value").collect()
    return sorted((r.partition, r.offset, bytes(r.value).decode()) for r in rows)


def test_batch_read_committed_skips_aborted_records_and_stops_at_the_lso(
    spark: Any, bootstrap_servers: str, make_topic: Any
) -> None:
    topic = make_topic(partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap_servers, "transactional.id": f"spark-{topic}"})
    producer.init_transactions(20)
    for name, count, commit in (("c", 6, True), ("a", 4, False), ("d", 2, True), ("o", 3, None)):
        producer.begin_transaction()
        for i in range(count):
            producer.produce(topic, f"{name}{i}".encode(), partition=i % 2)
        producer.flush(10)
        if commit is True:
            producer.commit_transaction(20)
        elif commit is False:
            producer.abort_transaction(20)
    try:  # the "o" transaction stays open while Spark reads
        committed = _read(spark, bootstrap_servers, topic, **{"kafka.isolation.level": "read_committed"})
        # per partition: c (3 records) + marker, a (2) + marker, d (1) + marker, o open at offset 9
        assert committed == [
            (p, offset, value)
            for p in (0, 1)
            for offset, value in ((0, f"c{p}"), (1, f"c{p + 2}"), (2, f"c{p + 4}"), (7, f"d{p}"))
        ]
        everything = _read(spark, bootstrap_servers, topic)  # read_uncommitted: up to the HW
        assert sorted(v for _, _, v in everything) == sorted(
            [f"c{i}" for i in range(6)] + [f"a{i}" for i in range(4)] + ["d0", "d1", "o0", "o1", "o2"]
        )
    finally:
        producer.abort_transaction(20)
        del producer
