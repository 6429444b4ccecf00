"""Compressed batches, all four codecs, both ways (issue 4), complementing
``test_interop_produce_consume`` and ``integration/test_client_interop`` (confluent-kafka
producer -> our consumer, all codecs):

- our producer with ``compression.type=X`` -> confluent-kafka and kafka-python consumers;
- kafka-python producer with ``compression_type=X`` -> our consumer;
- a confluent-kafka producer with codec X into a topic whose ``compression.type`` is Y (set by
  CreateTopics or IncrementalAlterConfigs) -> kafka-python / confluent-kafka consumers: the
  leader rebuilds the batches in Y (issue #26), as a raw Fetch's batch attributes show.

The other tests also read the partition's segment files to check that the broker stored the
batches with the producer's codec (``compression.type=producer``, the default: stored as sent,
never recompressed). kafka-python needs its codec libraries (python-snappy, lz4, zstandard) for
snappy / lz4 / zstd.
"""

from __future__ import annotations

import time

import kafka.codec
import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from peers import (
    Msg,
    by_partition,
    ck_consume,
    ck_create_topic,
    ck_produce,
    kp_consume,
    kp_produce,
    make_messages,
)
from txn_wire import raw_client

from spark_kafkalite.client import KafkaConsumer, KafkaProducer, TopicPartition
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build, nested
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


def fetched_batches(bootstrap: str, topic: str, version: int = 11) -> tuple[set[int], set[int]]:
    """(error codes, codecs of the batches) of a raw consumer Fetch of every partition of
    ``topic`` from offset 0 (our protocol encoder; the codec from each batch's attributes)."""
    cls = request_class(ApiKey.FETCH, version)
    partition_fields = {"current_leader_epoch": -1, "log_start_offset": -1}
    parts = tuple(
        build(
            nested(cls, "FetchPartition"),
            partition=p,
            fetch_offset=0,
            partition_max_bytes=1 << 20,
            **partition_fields,
        )
        for p in range(PARTITIONS)
    )
    extra = {"rack_id": ""} if version >= 11 else {}
    request = build(
        cls, replica_id=-1, max_wait=0, min_bytes=0, max_bytes=1 << 22, isolation_level=0, session_id=0,
        session_epoch=-1, topics=(nested(cls, "FetchTopic")(topic=topic, partitions=parts),),
        forgotten_topics_data=(), **extra,
    )  # fmt: skip
    client = raw_client(bootstrap)
    try:
        response = client.send_and_wait(0, request, timeout_ms=10000)
    finally:
        client.close()
    partitions = response.responses[0].partitions
    codecs = {h.compression_type for p in partitions for _, h in iter_batch_headers(bytes(p.records or b""))}
    return {int(p.error_code) for p in partitions}, codecs


@pytest.mark.parametrize(
    ("producer_codec", "topic_config", "consumer"),
    [
        ("lz4", {"compression.type": "zstd"}, "kafka-python"),
        ("none", {"compression.type": "gzip", "compression.gzip.level": "1"}, "confluent"),
        ("zstd", {"compression.type": "uncompressed"}, "kafka-python"),
    ],
)
def test_topic_compression_type_recompresses(
    cluster: LocalCluster, unique_topic: str, producer_codec: str, topic_config: dict[str, str], consumer: str
) -> None:
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new_topic = NewTopic(unique_topic, PARTITIONS, 1, config=topic_config)
    admin.create_topics([new_topic], operation_timeout=10)[unique_topic].result(timeout=15)
    messages = make_messages(300, PARTITIONS, seed=17, null_headers=consumer != "kafka-python")
    ck_produce(bootstrap, unique_topic, messages, "all", producer_codec)
    target = (
        "none" if topic_config["compression.type"] == "uncompressed" else topic_config["compression.type"]
    )
    assert fetched_batches(bootstrap, unique_topic) == ({0}, {COMPRESSION_CODECS[target]})
    read = kp_consume if consumer == "kafka-python" else ck_consume
    assert by_partition(read(bootstrap, unique_topic, PARTITIONS, len(messages))) == by_partition(messages)
    if target == "zstd":  # KIP-110: a consumer Fetch below v10 cannot read a zstd topic
        assert fetched_batches(bootstrap, unique_topic, version=9) == (
            {76},
            set(),
        )  # UNSUPPORTED_COMPRESSION_TYPE


def test_incremental_alter_configs_switches_the_codec_of_later_batches(
    cluster: LocalCluster, unique_topic: str
) -> None:
    """``compression.type`` set by IncrementalAlterConfigs applies to the batches produced after
    it; the earlier ones stay as they were stored."""
    bootstrap = cluster.bootstrap_servers
    ck_create_topic(bootstrap, unique_topic, PARTITIONS)
    first = make_messages(100, PARTITIONS, seed=19)
    ck_produce(bootstrap, unique_topic, first, "all", "lz4")
    assert fetched_batches(bootstrap, unique_topic)[1] == {COMPRESSION_CODECS["lz4"]}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("compression.type", "snappy", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("TOPIC", unique_topic, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)
    second = make_messages(100, PARTITIONS, seed=23)
    ck_produce(bootstrap, unique_topic, second, "all", "lz4")
    assert fetched_batches(bootstrap, unique_topic)[1] == {
        COMPRESSION_CODECS["lz4"],
        COMPRESSION_CODECS["snappy"],
    }
    got = ck_consume(bootstrap, unique_topic, PARTITIONS, 200)
    assert by_partition(got) == {
        p: by_partition(first)[p] + by_partition(second)[p] for p in range(PARTITIONS)
    }
