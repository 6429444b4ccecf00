"""Compressed batches, all four codecs, both ways (issue 4), complementing
``test_interop_produce_consume`` and ``integration/test_client_interop`` (confluent-kafka
producer -> our consumer, all codecs):

- our producer with ``compression.type=X`` -> confluent-kafka and kafka-python consumers;
- kafka-python producer with ``compression_type=X`` -> our consumer.

Each test also reads the partition's segment files to check that the broker stored the batches
with the producer's codec (stored as sent, never recompressed). kafka-python needs its codec
libraries (python-snappy, lz4, zstandard) for snappy / lz4 / zstd.
"""

from __future__ import annotations

import time

import kafka.codec
import pytest
from peers import Msg, by_partition, ck_consume, ck_create_topic, kp_consume, kp_produce, make_messages

from spark_kafkalite.client import KafkaConsumer, KafkaProducer, TopicPartition
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.record_batch import COMPRESSION_CODECS, iter_batch_headers

pytestmark = pytest.mark.timeout(90)

CODECS = ["gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 2
COUNT = 600
KP_CODEC_AVAILABLE = {
    "gzip": kafka.codec.has_gzip,
    "snappy": kafka.codec.has_snappy,
    "lz4": kafka.codec.has_lz4,
    "zstd": kafka.codec.has_zstd,
}


def stored_codecs(cluster: LocalCluster, topic: str) -> set[int]:
    """Compression types of every batch stored for ``topic`` (read from its segment files)."""
    codecs: set[int] = set()
    for partition in range(PARTITIONS):
        for path in sorted((cluster.log_dir(1) / f"{topic}-{partition}").glob("*.log")):
            codecs.update(h.compression_type for _, h in iter_batch_headers(path.read_bytes()))
    return codecs


def our_produce(bootstrap: str, topic: str, messages: list[Msg], compression: str) -> None:
    config = {"bootstrap.servers": bootstrap, "compression.type": compression, "linger.ms": 5, "acks": "all"}
    with KafkaProducer(config) as producer:
        futures = [
            producer.send(
                topic,
                value=m.value,
                key=m.key,
                partition=m.partition,
                timestamp_ms=m.timestamp_ms,
                headers=list(m.headers),
            )
            for m in messages
        ]
        producer.flush(30)
    for future in futures:
        future.result(timeout=30)


def our_consume(bootstrap: str, topic: str, expected: int) -> list[Msg]:
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    out: list[Msg] = []
    offsets: dict[int, list[int]] = {}
    deadline = time.monotonic() + 30
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for tp, records in consumer.poll(500).items():
                for r in records:
                    assert r.timestamp_type == 0
                    out.append(Msg(tp.partition, r.key, r.value, r.timestamp_ms, tuple(r.headers)))
                    offsets.setdefault(tp.partition, []).append(r.offset)
    finally:
        consumer.close()
    for p, offs in offsets.items():
        assert offs == list(range(len(offs))), f"partition {p}: offsets not contiguous from 0"
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_our_producer_to_confluent_and_kafka_python(
    cluster: LocalCluster, unique_topic: str, codec: str
) -> None:
    ck_create_topic(cluster.bootstrap_servers, unique_topic, PARTITIONS)
    messages = make_messages(COUNT, PARTITIONS, seed=11)
    our_produce(cluster.bootstrap_servers, unique_topic, messages, codec)
    assert stored_codecs(cluster, unique_topic) == {COMPRESSION_CODECS[codec]}
    expected = by_partition(messages)
    assert by_partition(ck_consume(cluster.bootstrap_servers, unique_topic, PARTITIONS, COUNT)) == expected
    assert KP_CODEC_AVAILABLE[codec](), (
        f"kafka-python lacks its {codec} library (python-snappy / lz4 / zstandard)"
    )
    assert by_partition(kp_consume(cluster.bootstrap_servers, unique_topic, PARTITIONS, COUNT)) == expected


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_producer_to_our_consumer(cluster: LocalCluster, unique_topic: str, codec: str) -> None:
    assert KP_CODEC_AVAILABLE[codec](), (
        f"kafka-python lacks its {codec} library (python-snappy / lz4 / zstandard)"
    )
    ck_create_topic(cluster.bootstrap_servers, unique_topic, PARTITIONS)
    messages = make_messages(COUNT, PARTITIONS, seed=13, null_headers=False)
    kp_produce(cluster.bootstrap_servers, unique_topic, messages, 1, codec)
    # kafka-python sends a batch uncompressed when the codec does not make it smaller.
    stored = stored_codecs(cluster, unique_topic)
    assert COMPRESSION_CODECS[codec] in stored and stored <= {0, COMPRESSION_CODECS[codec]}, stored
    got = our_consume(cluster.bootstrap_servers, unique_topic, COUNT)
    assert by_partition(got) == by_partition(messages)


@pytest.mark.parametrize("codec", ["none", *CODECS])
def test_arrow_rows_through_send_batch_to_confluent(
    cluster: LocalCluster, unique_topic: str, codec: str
) -> None:
    """The Spark sink's path (issue #10 item 3): Arrow columns encoded by ``encode_rows`` (native
    when built) and handed to ``KafkaProducer.send_batch``; confluent-kafka reads them back."""
    import numpy as np
    import pyarrow as pa

    from spark_kafkalite.protocol.record_encoding import ArrowRecordColumns, encode_rows

    ck_create_topic(cluster.bootstrap_servers, unique_topic, PARTITIONS)
    messages = make_messages(COUNT, PARTITIONS, seed=5)
    headers_type = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    config = {"bootstrap.servers": cluster.bootstrap_servers, "compression.type": codec, "acks": "all"}
    futures = []
    with KafkaProducer(config) as producer:
        for partition in range(PARTITIONS):
            rows = [m for m in messages if m.partition == partition]
            columns = ArrowRecordColumns(
                pa.array([m.value for m in rows], pa.binary()),
                pa.array([m.key for m in rows], pa.binary()),
                pa.array([m.timestamp_ms * 1000 for m in rows], pa.timestamp("us", tz="UTC")),
                pa.array([[{"key": k, "value": v} for k, v in m.headers] for m in rows], headers_type),
            )
            for builder in encode_rows(columns, np.arange(len(rows)), 4096, 1 << 20):
                futures.append(producer.send_batch(unique_topic, partition, builder, builder.size_bytes))
        producer.flush(30)
    assert len(futures) > PARTITIONS  # several batches per partition (4 KiB each)
    for future in futures:
        assert future.result(timeout=30) >= 0
    assert stored_codecs(cluster, unique_topic) == {COMPRESSION_CODECS[codec]}
    got = ck_consume(cluster.bootstrap_servers, unique_topic, PARTITIONS, COUNT)
    assert by_partition(got) == by_partition(messages)
