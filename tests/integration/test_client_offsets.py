"""Positions, seeks and ListOffsets lookups against a real broker: beginning/end offsets,
offsets_for_times, OFFSET_OUT_OF_RANGE handling per auto.offset.reset."""

from __future__ import annotations

import time

import pytest

from spark_kafkalite.client import (
    KafkaAdminClient,
    KafkaConsumer,
    KafkaProducer,
    NewTopic,
    NoOffsetForPartitionError,
    OffsetAndTimestamp,
    TopicPartition,
)
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.protocol.errors import OffsetOutOfRangeError

pytestmark = pytest.mark.timeout(60)

BASE_TS = 1_700_000_000_000


def produce_topic(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for p in range(partitions):
            for i in range(per_partition):
                producer.send(topic, value=f"{p}-{i}".encode(), partition=p, timestamp_ms=BASE_TS + i * 1000)
        producer.flush(20)


def consumer_for(bootstrap: str, reset: str = "earliest") -> KafkaConsumer:
    return KafkaConsumer(
        {"bootstrap.servers": bootstrap, "auto.offset.reset": reset, "default.api.timeout.ms": 10_000}
    )


def poll_values(consumer: KafkaConsumer, count: int) -> list[bytes | None]:
    out: list[bytes | None] = []
    deadline = time.monotonic() + 10
    while len(out) < count and time.monotonic() < deadline:
        for records in consumer.poll(200).values():
            out.extend(r.value for r in records)
    return out


def test_beginning_and_end_offsets(bootstrap_servers: str, unique_topic: str) -> None:
    produce_topic(bootstrap_servers, unique_topic, 2, 10)
    tps = [TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)]
    with consumer_for(bootstrap_servers) as consumer:
        assert consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert consumer.end_offsets(tps) == {tps[0]: 10, tps[1]: 10}
        assert consumer.partitions_for_topic(unique_topic) == {0, 1}
        assert consumer.list_topics()[unique_topic] == {0, 1}


def test_seek_position_and_seek_to_beginning_end(bootstrap_servers: str, unique_topic: str) -> None:
    produce_topic(bootstrap_servers, unique_topic, 1, 10)
    tp = TopicPartition(unique_topic, 0)
    with consumer_for(bootstrap_servers, "latest") as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 10  # latest
        consumer.seek(tp, 7)
        assert consumer.position(tp) == 7
        assert poll_values(consumer, 3) == [b"0-7", b"0-8", b"0-9"]
        assert consumer.position(tp) == 10
        assert consumer.highwater(tp) == 10
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        assert poll_values(consumer, 2)[:2] == [b"0-0", b"0-1"]
        consumer.seek_to_end()
        assert consumer.position(tp) == 10
        assert consumer.poll(300) == {}
        with pytest.raises(IllegalStateError):
            consumer.seek(TopicPartition(unique_topic, 5), 0)


def test_seek_while_data_is_buffered_returns_data_from_the_new_position(
    bootstrap_servers: str, unique_topic: str
) -> None:
    produce_topic(bootstrap_servers, unique_topic, 1, 50)
    tp = TopicPartition(unique_topic, 0)
    consumer = KafkaConsumer(
        {"bootstrap.servers": bootstrap_servers, "auto.offset.reset": "earliest", "max.poll.records": 5}
    )
    consumer.assign([tp])
    first = consumer.poll(5000)[tp]
    assert [r.offset for r in first] == [0, 1, 2, 3, 4]
    consumer.seek(tp, 40)
    after = consumer.poll(5000)[tp]
    assert [r.offset for r in after] == [40, 41, 42, 43, 44]
    consumer.close()


def test_offsets_for_times(bootstrap_servers: str, unique_topic: str) -> None:
    produce_topic(bootstrap_servers, unique_topic, 2, 10)
    tp0, tp1 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    with consumer_for(bootstrap_servers) as consumer:
        found = consumer.offsets_for_times({tp0: BASE_TS + 3500, tp1: BASE_TS})
        assert found == {tp0: OffsetAndTimestamp(4, BASE_TS + 4000), tp1: OffsetAndTimestamp(0, BASE_TS)}
        assert consumer.offsets_for_times({tp0: BASE_TS + 10_000_000}) == {tp0: None}
        with pytest.raises(ValueError):
            consumer.offsets_for_times({tp0: -5})


def test_out_of_range_position_resets_to_earliest(bootstrap_servers: str, unique_topic: str) -> None:
    produce_topic(bootstrap_servers, unique_topic, 1, 5)
    tp = TopicPartition(unique_topic, 0)
    with consumer_for(bootstrap_servers, "earliest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        assert poll_values(consumer, 5) == [f"0-{i}".encode() for i in range(5)]
        assert consumer.position(tp) == 5


def test_out_of_range_position_resets_to_latest(bootstrap_servers: str, unique_topic: str) -> None:
    produce_topic(bootstrap_servers, unique_topic, 1, 5)
    tp = TopicPartition(unique_topic, 0)
    with consumer_for(bootstrap_servers, "latest") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        deadline = time.monotonic() + 10
        while consumer.position(tp) == 1000 and time.monotonic() < deadline:
            assert consumer.poll(100) == {}
        assert consumer.position(tp) == 5
        with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as producer:
            producer.send(unique_topic, value=b"new", partition=0)
        assert poll_values(consumer, 1) == [b"new"]


def test_out_of_range_without_reset_policy_raises(bootstrap_servers: str, unique_topic: str) -> None:
    produce_topic(bootstrap_servers, unique_topic, 1, 5)
    tp = TopicPartition(unique_topic, 0)
    with consumer_for(bootstrap_servers, "none") as consumer:
        consumer.assign([tp])
        with pytest.raises(NoOffsetForPartitionError):
            consumer.poll(100)  # no position and no reset policy
        consumer.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRangeError) as info:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                consumer.poll(200)
        assert info.value.partitions == {tp: 1000}  # type: ignore[attr-defined]
        consumer.seek(tp, 3)
        assert poll_values(consumer, 2) == [b"0-3", b"0-4"]


def test_admin_list_offsets(bootstrap_servers: str, unique_topic: str) -> None:
    produce_topic(bootstrap_servers, unique_topic, 1, 4)
    tp = TopicPartition(unique_topic, 0)
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        assert admin.list_offsets({tp: -2})[tp].offset == 0
        assert admin.list_offsets({tp: -1})[tp].offset == 4
        assert admin.list_offsets({tp: BASE_TS + 2000})[tp] == OffsetAndTimestamp(2, BASE_TS + 2000)
        assert admin.list_offsets({tp: BASE_TS + 99_000})[tp] == OffsetAndTimestamp(-1, -1)
