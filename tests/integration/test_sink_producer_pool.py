"""The kafkalite sink's producer pool against a real broker: ``write_batches`` reuses one
producer across write tasks / micro-batches (no reconnect), and closes it when a task fails."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.datasource.client_pool import ClientPool
from spark_kafkalite.datasource.options import parse_sink_options
from spark_kafkalite.datasource.writer import WritePlan, write_batches
from spark_kafkalite.protocol.errors import InvalidPartitionsError

pytestmark = pytest.mark.timeout(60)


def _plan(topic: str, *, has_partition: bool = False) -> WritePlan:
    return WritePlan(
        topic_option=topic,
        has_key=False,
        has_topic=False,
        has_partition=has_partition,
        has_headers=False,
        has_timestamp=False,
    )


def _values(bootstrap: str, topic: str) -> list[bytes]:
    tp = TopicPartition(topic, 0)
    with KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        out: list[bytes] = []
        while len(out) < end:
            for records in consumer.poll(500).values():
                out.extend(r.value for r in records)
        return out


@pytest.fixture
def topic(bootstrap_servers: str, unique_topic: str) -> str:
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, 1, 1)])
    return unique_topic


def test_producer_is_reused_across_micro_batches(bootstrap_servers: str, topic: str) -> None:
    made: list[KafkaProducer] = []

    def factory(config: dict) -> KafkaProducer:
        made.append(KafkaProducer(config))
        return made[-1]

    pool = ClientPool(factory)
    sink = parse_sink_options({"kafka.bootstrap.servers": bootstrap_servers, "topic": topic})
    try:
        for batch_id in range(3):
            values = pa.array([f"{batch_id}-{i}".encode() for i in range(5)], pa.binary())
            rows = pa.RecordBatch.from_arrays([values], names=["value"])
            assert write_batches(iter([rows]), _plan(topic), sink, pool) == 5
        assert len(made) == 1  # one connection for every micro-batch
        assert pool.idle_count() == 1
        assert _values(bootstrap_servers, topic) == [f"{b}-{i}".encode() for b in range(3) for i in range(5)]
    finally:
        pool.close_all()
    assert made[0]._closed


def test_failed_task_closes_its_producer(bootstrap_servers: str, topic: str) -> None:
    made: list[KafkaProducer] = []

    def factory(config: dict) -> KafkaProducer:
        made.append(KafkaProducer(config))
        return made[-1]

    pool = ClientPool(factory)
    sink = parse_sink_options({"kafka.bootstrap.servers": bootstrap_servers, "topic": topic})
    bad = pa.RecordBatch.from_arrays(
        [pa.array([b"v"], pa.binary()), pa.array([7], pa.int32())], names=["value", "partition"]
    )
    try:
        with pytest.raises(InvalidPartitionsError, match="partition 7"):
            write_batches(iter([bad]), _plan(topic, has_partition=True), sink, pool)
        assert made[0]._closed
        assert pool.idle_count() == 0
        good = pa.RecordBatch.from_arrays([pa.array([b"ok"], pa.binary())], names=["value"])
        assert write_batches(iter([good]), _plan(topic), sink, pool) == 1
        assert len(made) == 2  # the next task got a fresh producer
        assert not made[1]._closed
    finally:
        pool.close_all()


def test_open_batches_continue_across_arrow_batches(bootstrap_servers: str, topic: str) -> None:
    """Each partition's last record batch stays open for the next Arrow batch: 30 Arrow batches of
    10 rows become full ``batch.size`` record batches (not one per Arrow batch), every row in
    order, and the last rows are sent when the input ends."""
    sizes: list[int] = []

    def factory(config: dict) -> KafkaProducer:
        producer = KafkaProducer(config)
        send_batch = producer.send_batch

        def counting(topic: str, partition: int, builder, size_bytes: int):  # type: ignore[no-untyped-def]
            sizes.append(builder.record_count)
            return send_batch(topic, partition, builder, size_bytes)

        producer.send_batch = counting  # type: ignore[method-assign]
        return producer

    pool = ClientPool(factory)
    sink = parse_sink_options(
        {"kafka.bootstrap.servers": bootstrap_servers, "topic": topic, "kafka.batch.size": "4096"}
    )
    expected = [b"%03d-" % i + b"v" * 100 for i in range(300)]
    arrow_batches = [
        pa.RecordBatch.from_arrays([pa.array(expected[i : i + 10], pa.binary())], names=["value"])
        for i in range(0, 300, 10)
    ]
    try:
        assert write_batches(iter(arrow_batches), _plan(topic), sink, pool) == 300
    finally:
        pool.close_all()
    assert _values(bootstrap_servers, topic) == expected
    # ~110 bytes per record: a 4096-byte batch holds ~36 rows, so 300 rows take 9 batches
    # (30 if each Arrow batch closed its own); all full but the last
    assert sum(sizes) == 300 and len(sizes) <= 10, sizes
    assert min(sizes[:-1]) >= 30, sizes
