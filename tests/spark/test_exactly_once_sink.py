"""``deliveryGuarantee=exactly-once`` (issue #12 item 5) in a local SparkSession against the session
broker, checked by an independent reader: a confluent-kafka (librdkafka) consumer with
``isolation.level=read_committed`` (and ``read_uncommitted`` to see what reached the log at all).

- a batch ``df.write`` run twice with the same ``transactionalIdPrefix`` and ``batchId`` writes
  once; a larger ``batchId`` writes again; an older one fails naming the committed batch;
- a streaming query ``in`` -> ``kafkalite`` sink restarted from its checkpoint after losing the
  commit of its last micro-batch (what a driver killed after the sink wrote, before Spark's commit
  log, leaves behind): Spark re-runs that batch; the exactly-once sink writes every source record
  once, the default mode writes the re-run batch twice (the duplicates the README documents).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from kafka import KafkaAdminClient

pytestmark = pytest.mark.timeout(240)


def read_values(
    bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"
) -> list[bytes]:
    """Every value of ``topic`` that a confluent-kafka consumer with ``isolation`` returns, read
    from the beginning to the end of each partition (the LSO under read_committed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify-" + uuid.uuid4().hex[:8],
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        at_end: set[int] = set()
        for _ in range(600):
            if len(at_end) == partitions:
                return values
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                raise AssertionError(f"confluent-kafka consumer error on {topic}: {msg.error()}")
            at_end.discard(msg.partition())
            values.append(msg.value())
        raise AssertionError(f"{topic}: not every partition reached its end ({sorted(at_end)} did)")
    finally:
        consumer.close()


def _write(df: Any, bootstrap: str, topic: str, **options: str) -> None:
    writer = df.write.format("kafkalite").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


def test_batch_write_with_the_same_batch_id_writes_once(spark, bootstrap_servers, make_topic) -> None:
    topic = make_topic(partitions=2, prefix="eos-batch")
    prefix = "eos-batch-" + uuid.uuid4().hex[:8]
    rows = [(f"k{i}", f"v-{i}".encode()) for i in range(40)]
    # three Spark partitions by key hash: deterministic, so a re-run has the same rows per task
    df = spark.createDataFrame(rows, "key string, value binary").repartition(3, "key")
    eos = {"deliveryGuarantee": "exactly-once", "transactionalIdPrefix": prefix}

    _write(df, bootstrap_servers, topic, batchId="1", **eos)
    _write(df, bootstrap_servers, topic, batchId="1", **eos)  # a re-run of write 1: nothing new
    expected = sorted(v for _, v in rows)
    assert sorted(read_values(bootstrap_servers, topic, 2)) == expected
    # nothing reached the log at all on the re-run (not even an aborted attempt)
    assert sorted(read_values(bootstrap_servers, topic, 2, "read_uncommitted")) == expected

    # the marker of each task, read by an independent admin client: batch 1 in the metadata.
    # kafka-python, not confluent-kafka: librdkafka copies a listed offset's metadata without a
    # trailing NUL and confluent-kafka's binding reads it as a C string, so its ``metadata`` can
    # carry whatever bytes follow the buffer (seen in CI: '{...}`4\x7f').
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        listed = admin.list_group_offsets({f"{prefix}-{p}": None for p in range(3)})
    finally:
        admin.close()
    markers = [json.loads(o.metadata) for offsets in listed.values() for o in offsets.values()]
    assert markers and all((m["batchId"], m["sink"], m["v"]) == (1, "kafkalite", 1) for m in markers)
    # and what each task wrote: the rows and value bytes of the tasks add up to the input
    assert sum(m["records"] for m in markers) == len(rows)
    assert sum(m["valueBytes"] for m in markers) == sum(len(v) for _, v in rows)

    _write(df, bootstrap_servers, topic, batchId="2", **eos)  # the next write
    assert sorted(read_values(bootstrap_servers, topic, 2)) == sorted(expected * 2)

    with pytest.raises(Exception, match="already committed batch 2, later than this batch 1"):
        _write(df, bootstrap_servers, topic, batchId="1", **eos)


def _run_available_now(spark: Any, bootstrap: str, src: str, out: str, checkpoint: Path, eos: bool) -> Any:
    stream = (
        spark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20")
        .load()
        .selectExpr("key", "value")
        .writeStream.format("kafkalite")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    if eos:
        stream = stream.option("deliveryGuarantee", "exactly-once").option(
            "transactionalIdPrefix", "eos-stream"
        )
    query = stream.start()
    assert query.awaitTermination(180)
    assert query.exception() is None
    return query


def _progress(query: Any) -> list[tuple[int, int]]:
    """``(batchId, numInputRows)`` of the query's micro-batches that read rows."""
    progress = [json.loads(p.json) for p in query.recentProgress]
    return [(p["batchId"], p["numInputRows"]) for p in progress if p["numInputRows"]]


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_streaming_batch_rerun_after_restart(
    spark, bootstrap_servers, make_topic, produce, tmp_path: Path, mode: str
) -> None:
    src = make_topic(partitions=2, prefix="eos-in")
    out = make_topic(partitions=2, prefix="eos-out")
    checkpoint = tmp_path / "checkpoint"
    eos = mode == "exactly-once"
    produce(src, [(i % 2, None, f"a-{i}".encode()) for i in range(40)])
    first = _run_available_now(spark, bootstrap_servers, src, out, checkpoint, eos)
    assert _progress(first) == [(0, 20), (1, 20)]

    # a driver that died after the sink wrote batch 1 but before Spark's commit log recorded it
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink()
    produce(src, [(i % 2, None, f"b-{i}".encode()) for i in range(20)])
    second = _run_available_now(spark, bootstrap_servers, src, out, checkpoint, eos)
    assert _progress(second) == [(1, 20), (2, 20)]  # batch 1 ran again, with the same 20 records

    source = [f"a-{i}".encode() for i in range(40)] + [f"b-{i}".encode() for i in range(20)]
    counts = Counter(read_values(bootstrap_servers, out, 2))
    assert set(counts) == set(source)  # nothing lost
    duplicated = sorted(v for v, n in counts.items() if n > 1)
    if eos:
        assert duplicated == []
        assert len(read_values(bootstrap_servers, out, 2, "read_uncommitted")) == 60  # re-run skipped
    else:
        assert len(duplicated) == 20 and all(counts[v] == 2 for v in duplicated)  # batch 1, twice
