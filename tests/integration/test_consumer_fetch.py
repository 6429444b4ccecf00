"""Our KafkaConsumer's fetch path against a real broker (the session LocalCluster), with
confluent-kafka as the independent producer / admin: max.poll.records, fetch.min.bytes /
fetch.max.wait.ms long polls, byte limits, pipelining, seeks and stale data, resets on
OFFSET_OUT_OF_RANGE, offsets_for_times, pause/resume, and unknown partitions."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import OffsetOutOfRangeError

pytestmark = pytest.mark.timeout(90)


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    topic = "cf-" + uuid.uuid4().hex[:10]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10).values():
        future.result(timeout=15)
    return topic


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    partition: int = 0,
    size: int = 0,
    tag: str = "v",
    timestamps: list[int] | None = None,
    batch_per_record: bool = False,
) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        value = f"{tag}-{i}".encode().ljust(size, b".")
        if timestamps is not None:
            producer.produce(topic, value=value, partition=partition, timestamp=timestamps[i])
        else:
            producer.produce(topic, value=value, partition=partition)
        if batch_per_record:
            assert producer.flush(15) == 0
    assert producer.flush(15) == 0


@pytest.fixture
def consumer_factory(bootstrap_servers: str) -> Iterator[object]:
    made: list[KafkaConsumer] = []

    def make(**config: object) -> KafkaConsumer:
        cfg = {
            "bootstrap.servers": bootstrap_servers,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 100,
        }
        cfg.update({k.replace("_", "."): v for k, v in config.items()})
        consumer = KafkaConsumer(cfg)
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close()


def drain(consumer: KafkaConsumer, count: int, timeout_s: float = 20.0) -> list[tuple[int, int, bytes]]:
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for records in consumer.poll(200).values():
            got.extend((r.partition, r.offset, r.value) for r in records)
    return got


def test_max_poll_records(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers)
    produce(bootstrap_servers, topic, 25)
    consumer = consumer_factory(max_poll_records=10)
    consumer.assign([TopicPartition(topic, 0)])
    sizes: list[int] = []
    offsets: list[int] = []
    deadline = time.monotonic() + 20
    while len(offsets) < 25 and time.monotonic() < deadline:
        batch = consumer.poll(500)
        if batch:
            sizes.append(sum(len(v) for v in batch.values()))
            offsets.extend(r.offset for records in batch.values() for r in records)
    assert offsets == list(range(25))
    assert max(sizes) == 10 and all(s <= 10 for s in sizes)
    assert sum(len(v) for v in consumer.poll(100, max_records=3).values()) == 0


def test_long_poll_waits_for_data_and_wakes_up_on_produce(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers)
    consumer = consumer_factory(fetch_max_wait_ms=10000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.poll(200)  # position resolved, first long poll parked on the broker
    before = consumer.metrics()["consumer-fetch-manager-metrics"]["fetch-total"]
    timer = threading.Timer(0.7, produce, (bootstrap_servers, topic, 1))
    timer.start()
    started = time.monotonic()
    got = drain(consumer, 1, timeout_s=8)
    elapsed = time.monotonic() - started
    timer.join()
    assert [v for _, _, v in got] == [b"v-0"]
    assert elapsed < 6, "the parked fetch should complete when the record arrives, not after 10 s"
    assert (
        consumer.metrics()["consumer-fetch-manager-metrics"]["fetch-total"] - before <= 3
    )  # no busy polling while waiting


def test_fetch_min_bytes_holds_the_response_until_max_wait(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers)
    produce(bootstrap_servers, topic, 1)
    consumer = consumer_factory(fetch_min_bytes=1_000_000, fetch_max_wait_ms=1200)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek(TopicPartition(topic, 0), 0)
    started = time.monotonic()
    got = drain(consumer, 1, timeout_s=10)
    assert len(got) == 1
    assert time.monotonic() - started >= 1.0  # the broker waited for min bytes until max wait


def test_byte_limits_still_deliver_everything_in_order(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers, partitions=3)
    for p in range(3):
        produce(bootstrap_servers, topic, 40, partition=p, size=1000, tag=f"p{p}", batch_per_record=True)
    produce(bootstrap_servers, topic, 1, partition=0, size=20000, tag="big")  # > max.partition.fetch.bytes
    consumer = consumer_factory(max_partition_fetch_bytes=4096, fetch_max_bytes=8192)
    consumer.assign([TopicPartition(topic, p) for p in range(3)])
    got = drain(consumer, 121, timeout_s=40)
    per_partition = {p: [o for q, o, _ in got if q == p] for p in range(3)}
    assert per_partition == {0: list(range(41)), 1: list(range(40)), 2: list(range(40))}
    metrics = consumer.metrics()["consumer-fetch-manager-metrics"]  # Kafka's consumer metric names
    assert metrics["records-consumed-total"] == 121
    assert metrics["bytes-consumed-total"] >= 140_000 and metrics["records-lag-max"] >= 0
    assert any(v.startswith(b"big-0") and len(v) == 20000 for _, _, v in got)  # KIP-74: never stuck
    # ~1 KB batches, <= 4 per partition and <= 8 per response: many fetches (KIP-74 aside)
    assert consumer.metrics()["consumer-fetch-manager-metrics"]["fetch-total"] >= 120_000 // 8192


def test_next_fetch_is_pipelined_while_records_are_handed_out(
    bootstrap_servers: str, consumer_factory
) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers)
    produce(bootstrap_servers, topic, 40, size=100, batch_per_record=True)
    consumer = consumer_factory(max_poll_records=2, max_partition_fetch_bytes=1024)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert len(drain(consumer, 1)) == 2
    # Records are still buffered, and the fetch of what follows them was sent before they were
    # handed out: it is in flight, or (a fast broker) its response is already queued behind them.
    fetcher = consumer._fetcher
    assert fetcher.has_buffered_records()
    buffered = fetcher.buffer.by_partition()[tp]
    fetched_ahead = [cf for cf in buffered[1:] if cf.fetch_offset == buffered[0].end_offset]
    assert fetcher.has_pending_fetches() or fetched_ahead, buffered
    got = drain(consumer, 38)
    assert [o for _, o, _ in got] == list(range(2, 40))


def test_seek_discards_buffered_and_in_flight_data(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers)
    produce(bootstrap_servers, topic, 50)
    consumer = consumer_factory(max_poll_records=7)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert [o for _, o, _ in drain(consumer, 7)] == list(range(7))
    consumer.seek(tp, 30)
    assert consumer.position(tp) == 30
    assert [o for _, o, _ in drain(consumer, 7)] == list(range(30, 37))
    consumer.seek(tp, 2)
    assert [o for _, o, _ in drain(consumer, 48)] == list(range(2, 50))


def test_seek_to_beginning_end_and_position(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers)
    produce(bootstrap_servers, topic, 20)
    _delete_records(bootstrap_servers, topic, 0, 5)
    consumer = consumer_factory(auto_offset_reset="latest")
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert consumer.position(tp) == 20
    consumer.seek_to_beginning(tp)
    assert consumer.position(tp) == 5
    assert [o for _, o, _ in drain(consumer, 15)] == list(range(5, 20))
    consumer.seek_to_beginning()
    consumer.seek_to_end()
    assert consumer.position(tp) == 20
    assert consumer.beginning_offsets([tp]) == {tp: 5} and consumer.end_offsets([tp]) == {tp: 20}


def _delete_records(bootstrap: str, topic: str, partition: int, before: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([confluent_kafka.TopicPartition(topic, partition, before)])
    for future in futures.values():
        future.result(timeout=15)


@pytest.mark.parametrize("policy", ["earliest", "latest", "none"])
def test_offset_out_of_range(bootstrap_servers: str, consumer_factory, policy: str) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers)
    produce(bootstrap_servers, topic, 20)
    _delete_records(bootstrap_servers, topic, 0, 10)
    consumer = consumer_factory(auto_offset_reset=policy)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 3)  # below the log start offset
    if policy == "none":
        with pytest.raises(OffsetOutOfRangeError) as info:
            drain(consumer, 1, timeout_s=10)
        assert info.value.partitions == {tp: 3}
        consumer.seek(tp, 15)
        assert [o for _, o, _ in drain(consumer, 5)] == list(range(15, 20))
        return
    if policy == "earliest":
        assert [o for _, o, _ in drain(consumer, 10)] == list(range(10, 20))
    else:
        assert drain(consumer, 1, timeout_s=2) == []
        assert consumer.position(tp) == 20
        produce(bootstrap_servers, topic, 2, tag="new")
        assert [(o, v) for _, o, v in drain(consumer, 2)] == [(20, b"new-0"), (21, b"new-1")]
    consumer.seek(tp, 1000)  # above the high watermark: out of range as well
    got = drain(consumer, 1, timeout_s=3)
    if policy == "earliest":
        assert got[0][1] == 10
    else:
        assert got == [] and consumer.position(tp) == 22


def test_offsets_for_times(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers)
    base = int(time.time() * 1000) - 100_000
    produce(bootstrap_servers, topic, 10, timestamps=[base + 1000 * i for i in range(10)])
    consumer = consumer_factory()
    tp = TopicPartition(topic, 0)
    found = consumer.offsets_for_times({tp: base + 3500})
    assert found[tp] is not None and (found[tp].offset, found[tp].timestamp_ms) == (4, base + 4000)
    assert consumer.offsets_for_times({tp: base})[tp].offset == 0  # type: ignore[union-attr]
    assert consumer.offsets_for_times({tp: base + 60_000}) == {tp: None}
    with pytest.raises(ValueError):
        consumer.offsets_for_times({tp: -5})


def test_pause_and_resume(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = new_topic(bootstrap_servers, partitions=2)
    produce(bootstrap_servers, topic, 5, partition=0, tag="a")
    produce(bootstrap_servers, topic, 5, partition=1, tag="b")
    consumer = consumer_factory()
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer.assign([tp0, tp1])
    consumer.pause(tp0)
    assert consumer.paused() == {tp0}
    got = drain(consumer, 5)
    assert {p for p, _, _ in got} == {1} and len(got) == 5
    assert drain(consumer, 1, timeout_s=1.0) == []
    consumer.resume(tp0)
    got = drain(consumer, 5)
    assert [(p, o) for p, o, _ in got] == [(0, i) for i in range(5)]


def test_unknown_partition_is_retried_until_it_exists(bootstrap_servers: str, consumer_factory) -> None:  # type: ignore[no-untyped-def]
    topic = "cf-late-" + uuid.uuid4().hex[:8]
    consumer = consumer_factory(metadata_max_age_ms=500, retry_backoff_ms=50)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    assert consumer.poll(500) == {}  # UNKNOWN_TOPIC_OR_PARTITION: metadata refreshes, no error
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    produce(bootstrap_servers, topic, 3)
    assert [o for _, o, _ in drain(consumer, 3)] == [0, 1, 2]
