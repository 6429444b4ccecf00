"""The exactly-once sink's task protocol (``exactly_once.write_task`` with the writer's real
producer, marker read and send path) against the session broker, without Spark: a zombie attempt
is fenced and its records never become visible, a re-run of a committed batch writes nothing, a
re-run giving the partition other rows fails, the next batch writes. Checked by a
confluent-kafka consumer (read_committed and read_uncommitted)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka import TopicPartition as CkTopicPartition

from spark_kafkalite.client import KafkaAdminClient, KafkaProducer, NewTopic
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.datasource.errors import KafkaLiteWriteError
from spark_kafkalite.datasource.exactly_once import TaskIdentity, TaskOutcome, write_task
from spark_kafkalite.datasource.options import parse_sink_options
from spark_kafkalite.datasource.writer import (
    WritePlan,
    _new_producer,
    _read_marker_offsets,
    _send_all,
    producer_config,
)
from spark_kafkalite.protocol.errors import KafkaError as OurKafkaError

pytestmark = pytest.mark.timeout(90)


def _values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify-" + uuid.uuid4().hex[:8],
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        for _ in range(300):
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(str(msg.error()))
            out.append(msg.value())
        raise AssertionError(f"{topic}: end not reached")
    finally:
        consumer.close()


def test_zombie_fenced_rerun_skipped_next_batch_written(bootstrap_servers: str, unique_topic: str) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, 1, 1)])
    sink = parse_sink_options(
        {
            "kafka.bootstrap.servers": bootstrap_servers,
            "topic": unique_topic,
            "deliveryGuarantee": "exactly-once",
            "transactionalIdPrefix": "it-" + uuid.uuid4().hex[:8],
            "batchId": "1",
        }
    )
    plan = WritePlan(unique_topic, False, False, False, False, False)
    config = producer_config(sink)
    txn_id = f"{sink.exactly_once.transactional_id_prefix}-0"  # type: ignore[union-attr]

    def run(batch_id: int, values: list[bytes]) -> TaskOutcome:
        rows = pa.RecordBatch.from_arrays([pa.array(values, pa.binary())], names=["value"])
        return write_task(
            [rows],
            TaskIdentity(txn_id, batch_id, 0),
            new_producer=lambda txn: _new_producer({**config, "transactional.id": txn}),
            read_offsets=lambda group: _read_marker_offsets(sink, group),
            send_rows=lambda batches, producer: _send_all(batches, plan, producer),
            offset_and_metadata=OffsetAndMetadata,
            transaction_timeout_ms=60000,
        )

    # a zombie attempt of the same partition: its records are in the log, its transaction open
    zombie = KafkaProducer({**config, "transactional.id": txn_id})
    try:
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(unique_topic, b"zombie", partition=0).result(30)
        assert run(1, [b"a", b"b"]) == TaskOutcome(records=2, skipped=False)
        with pytest.raises(OurKafkaError):  # fenced: its transaction was aborted
            zombie.commit_transaction()
    finally:
        zombie.close()
    assert _values(bootstrap_servers, unique_topic, "read_committed") == [b"a", b"b"]

    assert run(1, [b"a", b"b"]) == TaskOutcome(records=0, skipped=True)  # a re-run of batch 1
    # a re-run of batch 1 giving the partition other rows (the partitioning changed): skipping
    # would lose rows, so it fails, from the counts the marker carries through the broker
    with pytest.raises(
        KafkaLiteWriteError, match=r"batch 1 with 2 rows .* gives it 1 rows \(1 value bytes\)"
    ):
        run(1, [b"a"])
    with pytest.raises(
        KafkaLiteWriteError, match=r"\(2 value bytes\), but .* gives it 2 rows \(3 value bytes\)"
    ):
        run(1, [b"a", b"bb"])
    assert run(2, [b"c"]) == TaskOutcome(records=1, skipped=False)
    assert _values(bootstrap_servers, unique_topic, "read_committed") == [b"a", b"b", b"c"]
    # the re-run left nothing in the log; the zombie's record is there, aborted
    assert _values(bootstrap_servers, unique_topic, "read_uncommitted") == [b"zombie", b"a", b"b", b"c"]
