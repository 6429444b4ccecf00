"""Batch read and write with format("kafkalite") against the session broker.

No test calls ``spark.dataSource.register``: the format is found through the ``pyspark_kafkalite``
module (auto-registration).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from pyspark.sql import functions as F

from spark_kafkalite.client.producer.partitioner import partition_for_key

pytestmark = pytest.mark.timeout(180)

UTC = dt.UTC


def _read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kafkalite").option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_write_then_read_exact(spark, bootstrap_servers, make_topic, consume_all) -> None:
    topic = make_topic(partitions=3)
    # recent timestamps: the broker's time-based retention (7 days) would delete older records
    base = dt.datetime.now(UTC).replace(microsecond=123000) - dt.timedelta(minutes=5)
    rows = [
        (
            f"k{i % 5}" if i % 7 else None,
            f"value-{i}".encode(),
            i % 3 if i % 2 else None,
            base + dt.timedelta(milliseconds=i),
            [("h", f"{i}".encode()), ("dup", None), ("dup", b"x")] if i % 4 == 0 else None,
        )
        for i in range(60)
    ]
    df = spark.createDataFrame(
        rows,
        "key string, value binary, partition int, timestamp timestamp, "
        "headers array<struct<key:string,value:binary>>",
    ).coalesce(1)
    df.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap_servers).option(
        "topic", topic
    ).mode("append").save()

    written = consume_all(topic)
    assert len(written) == 60
    by_value = {r.value: r for r in written}
    for key, value, partition, ts, headers in rows:
        record = by_value[value]
        assert record.key == (None if key is None else key.encode())
        assert record.timestamp_ms == int(ts.timestamp() * 1000)
        assert record.headers == (headers or [])
        if partition is not None:
            assert record.partition == partition
        elif key is not None:
            assert record.partition == partition_for_key(key.encode(), 3)

    read = _read(spark, bootstrap_servers, subscribe=topic, includeHeaders="true")
    assert [f.name for f in read.schema.fields] == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    got = sorted(read.collect(), key=lambda r: (r.partition, r.offset))
    assert [(r.partition, r.offset) for r in got] == [(r.partition, r.offset) for r in written]
    for row, record in zip(got, written, strict=True):
        assert row.topic == topic
        assert row.key == record.key and row.value == record.value
        assert int(row.timestamp.replace(tzinfo=UTC).timestamp() * 1000) == record.timestamp_ms
        assert row.timestampType == record.timestamp_type == 0
        expected_headers = [(k, v) for k, v in record.headers] or None
        actual_headers = None if row.headers is None else [(h.key, h.value) for h in row.headers]
        assert actual_headers == expected_headers


def test_write_string_values_and_topic_column(spark, bootstrap_servers, make_topic, consume_all) -> None:
    first, second = make_topic(), make_topic()
    df = spark.createDataFrame(
        [(first, "a", "1"), (second, "b", "2"), (first, None, "3")], "topic string, key string, value string"
    )
    df.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap_servers).mode("append").save()
    assert sorted(((r.key, r.value) for r in consume_all(first)), key=lambda kv: kv[1]) == [
        (b"a", b"1"),
        (None, b"3"),
    ]
    assert [(r.key, r.value) for r in consume_all(second)] == [(b"b", b"2")]


def test_offset_ranges_json(spark, bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic(partitions=2)
    produce(topic, [(p, None, f"{p}-{i}".encode()) for p in (0, 1) for i in range(10)])
    df = _read(
        spark,
        bootstrap_servers,
        subscribe=topic,
        startingOffsets=f'{{"{topic}":{{"0":2,"1":-2}}}}',
        endingOffsets=f'{{"{topic}":{{"0":5,"1":-1}}}}',
    )
    got = sorted((r.partition, r.offset, r.value) for r in df.collect())
    expected = [(0, i, f"0-{i}".encode()) for i in range(2, 5)] + [
        (1, i, f"1-{i}".encode()) for i in range(10)
    ]
    assert got == expected


def test_assign_reads_only_assigned_partitions(spark, bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic(partitions=3)
    produce(topic, [(p, None, f"{p}".encode()) for p in (0, 1, 2) for _ in range(4)])
    df = _read(
        spark,
        bootstrap_servers,
        assign=f'{{"{topic}":[1,2]}}',
        endingOffsets=f'{{"{topic}":{{"1":3,"2":-1}}}}',
    )
    counts = {r.partition: r["count"] for r in df.groupBy("partition").count().collect()}
    assert counts == {1: 3, 2: 4}


def test_subscribe_pattern_and_min_partitions(spark, bootstrap_servers, make_topic, produce) -> None:
    prefix = f"pat{make_topic().split('-')[-1]}"
    first, second = make_topic(prefix=prefix), make_topic(prefix=prefix)
    produce(first, [(0, None, b"x")] * 30)
    produce(second, [(0, None, b"y")] * 5)
    df = _read(spark, bootstrap_servers, subscribePattern=f"{prefix}-.*", minPartitions="4")
    assert df.rdd.getNumPartitions() >= 4
    assert sorted(r.topic for r in df.select("topic").distinct().collect()) == sorted([first, second])
    assert df.count() == 35


def test_empty_topic_reads_nothing(spark, bootstrap_servers, make_topic) -> None:
    df = _read(spark, bootstrap_servers, subscribe=make_topic(partitions=2))
    assert df.count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "x"}, "Option 'kafka.bootstrap.servers' must be specified"),
        (
            {"bootstrap": True, "startingOffsets": "latest", "subscribe": "x"},
            "starting offset can't be latest",
        ),
        ({"bootstrap": True}, "One of the following options must be specified for Kafka source"),
        ({"bootstrap": True, "subscribe": "x", "assign": '{"x":[0]}'}, "Only one of the following options"),
        (
            {"bootstrap": True, "subscribe": "no-such-topic-kafkalite"},
            "Topic 'no-such-topic-kafkalite' does not exist",
        ),
        ({"bootstrap": True, "subscribe": "x", "failOnDataLoss": "nope"}, "option 'failOnDataLoss'"),
    ],
)
def test_read_option_errors(spark, bootstrap_servers, options: dict[str, Any], message: str) -> None:
    reader = spark.read.format("kafkalite")
    for key, value in options.items():
        if key == "bootstrap":
            reader = reader.option("kafka.bootstrap.servers", bootstrap_servers)
        else:
            reader = reader.option(key, value)
    with pytest.raises(Exception, match=message):
        reader.load().collect()


def test_json_offsets_must_name_every_partition(spark, bootstrap_servers, make_topic) -> None:
    topic = make_topic(partitions=2)
    with pytest.raises(Exception, match="KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED"):
        _read(spark, bootstrap_servers, subscribe=topic, startingOffsets=f'{{"{topic}":{{"0":0}}}}').collect()


def test_write_errors(spark, bootstrap_servers, make_topic) -> None:
    topic = make_topic()
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        no_value.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap_servers).option(
            "topic", topic
        ).mode("append").save()
    no_topic = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match="topic option required"):
        no_topic.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap_servers).mode(
            "append"
        ).save()
    bad_partition = spark.createDataFrame([("v", "p")], "value string, partition string")
    with pytest.raises(Exception, match="partition attribute type must be an IntegerType"):
        bad_partition.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap_servers).option(
            "topic", topic
        ).mode("append").save()
    with pytest.raises(Exception, match="use .mode"):
        no_topic.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap_servers).option(
            "topic", topic
        ).mode("overwrite").save()


def test_failed_send_fails_the_task_with_the_producer_error(spark, bootstrap_servers, make_topic) -> None:
    topic = make_topic(partitions=1)
    df = spark.range(3).select(F.lit("v").alias("value"), F.lit(5).cast("int").alias("partition"))
    with pytest.raises(Exception, match="partition 5 is not in the range"):
        df.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap_servers).option(
            "topic", topic
        ).mode("append").save()


def test_timestamp_offsets(spark, bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic()
    base_ms = int(time.time() * 1000) - 60_000  # recent: older records could fall to retention
    records = [
        {"value": f"{i}".encode(), "partition": 0, "timestamp_ms": base_ms + 1000 * (i + 1)}
        for i in range(10)
    ]
    produce(topic, records)
    df = _read(
        spark,
        bootstrap_servers,
        subscribe=topic,
        startingOffsetsByTimestamp=f'{{"{topic}":{{"0":{base_ms + 3000}}}}}',
        endingTimestamp=str(base_ms + 7000),
    )
    assert sorted(r.offset for r in df.collect()) == [2, 3, 4, 5]
    after_all = str(base_ms + 99_999)
    everything_after = _read(
        spark,
        bootstrap_servers,
        subscribe=topic,
        startingTimestamp=after_all,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert everything_after.count() == 0
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        _read(spark, bootstrap_servers, subscribe=topic, startingTimestamp=after_all).collect()


def test_topic_level_earliest_latest_in_offset_json(spark, bootstrap_servers, make_topic, produce) -> None:
    """SPARK-58774: a whole topic may be "earliest"/"latest" inside startingOffsets/endingOffsets."""
    first, second = make_topic(partitions=2), make_topic()
    produce(first, [(p, None, b"a") for p in (0, 1) for _ in range(4)])
    produce(second, [(0, None, b"b")] * 6)
    df = _read(
        spark,
        bootstrap_servers,
        subscribe=f"{first},{second}",
        startingOffsets=f'{{"{first}":"earliest","{second}":{{"0":2}}}}',
        endingOffsets=f'{{"{first}":{{"0":3,"1":-1}},"{second}":"latest"}}',
    )
    counts = {(r.topic, r.partition): r["count"] for r in df.groupBy("topic", "partition").count().collect()}
    assert counts == {(first, 0): 3, (first, 1): 4, (second, 0): 4}
    with pytest.raises(Exception, match="startingOffsets for topic .* can't be latest for batch"):
        _read(spark, bootstrap_servers, subscribe=first, startingOffsets=f'{{"{first}":"latest"}}').collect()
