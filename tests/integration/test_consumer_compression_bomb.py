"""Our consumer against a broker that serves a compression bomb (issue #14 item 1, client side).

The broker is real (in-process, real sockets on 127.0.0.1) with a permissive
``kafkalite.message.max.uncompressed.bytes`` (256 MiB), so it stores a zstd batch of a few KB
that inflates to 80 MiB, past the client's ``MAX_UNCOMPRESSED_RECORDS_BYTES`` (64 MiB). The
consumer hands out the records before the bomb, then raises a CorruptRecordError naming the
limit at the bomb's offset (again on the next poll)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from inprocess_broker import InProcessBroker

from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import CorruptRecordError
from spark_kafkalite.protocol.record_batch import MAX_UNCOMPRESSED_RECORDS_BYTES
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(90)

TOPIC = "bombed"
BOMB_BYTES = 80 << 20


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path, {"kafkalite.message.max.uncompressed.bytes": str(256 << 20)}).start()
    try:
        yield b
    finally:
        b.stop()


def _produce_raw(bootstrap: str, batch: bytes) -> int:
    """Error code of a Produce (acks=all) carrying ``batch`` as it is."""
    host, port = bootstrap.rsplit(":", 1)
    client = NetworkClient({"client.id": "bomb-test", "request.timeout.ms": 20000})
    client.add_node(0, host, int(port))

    def build(version: int):  # type: ignore[no-untyped-def]
        cls = request_class(ApiKey.PRODUCE, version)
        part = nested(cls, "PartitionProduceData")(index=0, records=batch)
        topic_data = (nested(cls, "TopicProduceData")(name=TOPIC, partition_data=(part,)),)
        return make(cls, transactional_id=None, acks=-1, timeout=20000, topic_data=topic_data)

    try:
        response = client.send_and_wait(0, RequestBuilder(ApiKey.PRODUCE, build), timeout_ms=20000)
        return int(response.responses[0].partition_responses[0].error_code)
    finally:
        client.close()


def test_consumer_refuses_a_compression_bomb(broker: InProcessBroker) -> None:
    bootstrap = broker.bootstrap_servers
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    try:
        assert producer.send(TOPIC, value=b"before").result(timeout=10).offset == 0
    finally:
        producer.close(5)
    bomb = encode_batch([(None, bytes(BOMB_BYTES), int(time.time() * 1000), [])], compression_type=4)
    assert len(bomb) < 64 << 10 and BOMB_BYTES > MAX_UNCOMPRESSED_RECORDS_BYTES
    assert _produce_raw(bootstrap, bomb) == 0

    tp = TopicPartition(TOPIC, 0)
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"})
    consumer.assign([tp])
    try:
        values: list[bytes | None] = []
        deadline = time.monotonic() + 20
        while not values and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                values.extend(r.value for r in records)
        assert values == [b"before"]
        for _ in range(2):  # the failing batch stays next: it raises again
            with pytest.raises(
                CorruptRecordError, match=f"offset 1 .*more than {MAX_UNCOMPRESSED_RECORDS_BYTES}"
            ):
                consumer.poll(5000)
        assert consumer.position(tp) == 1
    finally:
        consumer.close()
