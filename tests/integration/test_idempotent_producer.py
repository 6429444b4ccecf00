"""Idempotent producer end to end (KIP-98): our producer and independent clients against real
broker processes; a lost produce response (proxy) is retried without duplicates; sequence and
epoch errors on raw requests; producer state survives a broker restart (clean and crash)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_proxy import ResponseDroppingProxy, free_port

from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.client.producer import KafkaProducer
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.record_batch import iter_batch_headers
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(60)


# -- helpers -------------------------------------------------------------------------------------


def ck_create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=15)


def raw_client(bootstrap: str) -> NetworkClient:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    client = NetworkClient({"client.id": "idem-test", "request.timeout.ms": 10000})
    client.add_node(0, host, int(port))
    return client


def init_producer_id(client: NetworkClient, transactional_id: str | None = None, version: int = 4) -> Any:
    request = make(
        request_class(ApiKey.INIT_PRODUCER_ID, version),
        transactional_id=transactional_id,
        transaction_timeout=60000,
        producer_id=-1,
        producer_epoch=-1,
    )
    return client.send_and_wait(0, request, timeout_ms=10000)


def raw_produce(client: NetworkClient, topic: str, batch: bytes, partition: int = 0) -> tuple[int, int]:
    """(error_code, base_offset) of a Produce v9 with acks=all carrying one batch."""

    def build(version: int) -> Any:
        cls = request_class(ApiKey.PRODUCE, version)
        part = nested(cls, "PartitionProduceData")(index=partition, records=batch)
        topic_data = (nested(cls, "TopicProduceData")(name=topic, partition_data=(part,)),)
        return make(cls, transactional_id=None, acks=-1, timeout=10000, topic_data=topic_data)

    response = client.send_and_wait(0, RequestBuilder(ApiKey.PRODUCE, build), timeout_ms=10000)
    p = response.responses[0].partition_responses[0]
    return int(p.error_code), int(p.base_offset)


def idem_batch(pid: int, epoch: int, seq: int, n: int = 2, tag: bytes = b"r") -> bytes:
    now = int(time.time() * 1000)
    return encode_batch(
        [(None, tag + b"-%d" % (seq + i), now, []) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def ck_read_all(
    bootstrap: str, topic: str, expected: int, partitions: int = 1, timeout_s: float = 20
) -> list[Any]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False}
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    out: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(500, 0.5)
            out += [m for m in msgs if m.error() is None]
            if len(out) >= expected:
                # linger a little to catch duplicates beyond the expected count
                out += [m for m in consumer.consume(500, 0.5) if m.error() is None]
                break
    finally:
        consumer.close()
    return out


def stored_headers(log_dir: Path, topic: str, partition: int = 0) -> list[Any]:
    data = b"".join(p.read_bytes() for p in sorted((log_dir / f"{topic}-{partition}").glob("*.log")))
    return [h for _, h in iter_batch_headers(data)]


# -- our producer --------------------------------------------------------------------------------


def test_our_producer_is_idempotent_by_default(cluster: LocalCluster, unique_topic: str) -> None:
    bootstrap = cluster.bootstrap_servers
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 20}) as producer:
        assert producer.idempotent
        futures = [producer.send(unique_topic, b"v%d" % i) for i in range(300)]
        producer.flush(20)
        offsets = [f.result(10).offset for f in futures]
    assert offsets == list(range(300))
    headers = stored_headers(cluster.log_dir(1), unique_topic)
    assert headers and all(h.producer_id >= 0 and h.producer_epoch == 0 for h in headers)
    seqs = [(h.base_sequence, h.last_offset_delta) for h in headers]
    expected_next = 0
    for base, delta in seqs:  # contiguous sequences from 0
        assert base == expected_next
        expected_next = base + delta + 1
    values = [m.value() for m in ck_read_all(bootstrap, unique_topic, 300)]
    assert values == [b"v%d" % i for i in range(300)]


def test_idempotence_needs_acks_all() -> None:
    from spark_kafkalite.protocol.errors import InvalidConfigError

    implicit = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "acks": "1"})
    try:
        assert not implicit.idempotent  # silently off, as Java (KIP-679)
    finally:
        implicit.close(0)
    with pytest.raises(InvalidConfigError, match="acks"):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "acks": "1", "enable.idempotence": True})
    with pytest.raises(InvalidConfigError, match="max.in.flight"):
        KafkaProducer(
            {
                "bootstrap.servers": "127.0.0.1:1",
                "enable.idempotence": "true",
                "max.in.flight.requests.per.connection": 6,
            }
        )


@pytest.fixture
def proxied_cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, ResponseDroppingProxy]]:
    proxy = ResponseDroppingProxy()
    broker_port = free_port()
    proxy.set_target("127.0.0.1", broker_port)
    local = LocalCluster(
        data_dir=tmp_path / "cluster",
        config_overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{broker_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}",
        },
    )
    local.start()
    try:
        yield local, proxy
    finally:
        local.stop()
        proxy.close()


def test_lost_produce_response_is_retried_without_duplicates(
    proxied_cluster: tuple[LocalCluster, ResponseDroppingProxy],
) -> None:
    local, proxy = proxied_cluster
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic = "idem-proxy"
    ck_create_topic(bootstrap, topic, 2)
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 10, "retry.backoff.ms": 50})
    try:
        # warm up (producer id, metadata, connection) before arming the proxy
        producer.send(topic, b"warm", partition=0).result(15)
        proxy.drop_produce_responses = 3
        futures = [producer.send(topic, b"m%d" % i, partition=i % 2) for i in range(400)]
        producer.flush(30)
        results = [f.result(10) for f in futures]
    finally:
        producer.close(10)
    assert proxy.dropped == 3
    records = ck_read_all(bootstrap, topic, 401, partitions=2)
    values = [m.value() for m in records]
    assert len(values) == len(set(values)) == 401, "duplicates or losses after retries"
    for p in (0, 1):
        offsets = [m.offset() for m in records if m.partition() == p]
        assert offsets == list(range(len(offsets)))
        in_order = [m.value() for m in records if m.partition() == p and m.value() != b"warm"]
        assert in_order == [b"m%d" % i for i in range(p, 400, 2)]
    assert [r.offset for r in results if r.partition == 0] == list(range(1, 201))


def test_without_idempotence_a_lost_response_duplicates(
    proxied_cluster: tuple[LocalCluster, ResponseDroppingProxy],
) -> None:
    """The control experiment: proves the proxy really causes re-sends."""
    local, proxy = proxied_cluster
    bootstrap = f"127.0.0.1:{proxy.port}"
    topic = "plain-proxy"
    ck_create_topic(bootstrap, topic, 1)
    producer = KafkaProducer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": False, "retry.backoff.ms": 50, "linger.ms": 0}
    )
    try:
        producer.send(topic, b"warm").result(15)
        proxy.drop_produce_responses = 1
        producer.send(topic, b"once").result(15)
    finally:
        producer.close(10)
    values = [m.value() for m in ck_read_all(bootstrap, topic, 3)]
    assert values.count(b"once") == 2


# -- independent clients ----------------------------------------------------------------------------


def test_confluent_kafka_idempotent_producer(cluster: LocalCluster, unique_topic: str) -> None:
    bootstrap = cluster.bootstrap_servers
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    errors: list[Any] = []
    for i in range(500):
        producer.produce(unique_topic, value=b"c%d" % i, on_delivery=lambda e, m: e and errors.append(e))
    assert producer.flush(20) == 0 and not errors
    headers = stored_headers(cluster.log_dir(1), unique_topic)
    assert all(h.producer_id >= 0 for h in headers)
    values = [m.value() for m in ck_read_all(bootstrap, unique_topic, 500)]
    assert values == [b"c%d" % i for i in range(500)]


def test_kafka_python_defaults_idempotent_acks_all(cluster: LocalCluster, unique_topic: str) -> None:
    bootstrap = cluster.bootstrap_servers
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap)  # kafka-python 3: idempotent by default
    try:
        futures = [producer.send(unique_topic, b"k%d" % i) for i in range(200)]
        producer.flush(20)
        offsets = [f.get(10).offset for f in futures]
    finally:
        producer.close(5)
    assert offsets == list(range(200))
    headers = stored_headers(cluster.log_dir(1), unique_topic)
    assert headers and all(h.producer_id >= 0 for h in headers)


def test_confluent_producer_to_our_consumer_and_back(cluster: LocalCluster, unique_topic: str) -> None:
    from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer
    from spark_kafkalite.client.types import TopicPartition

    bootstrap = cluster.bootstrap_servers
    ck = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(50):
        ck.produce(unique_topic, key=b"k", value=b"from-ck-%d" % i)
    assert ck.flush(15) == 0
    with KafkaProducer({"bootstrap.servers": bootstrap}) as ours:
        for i in range(50):
            ours.send(unique_topic, b"from-us-%d" % i, key=b"k")
        ours.flush(15)
    consumer = KafkaConsumer({"bootstrap.servers": bootstrap})
    try:
        consumer.assign([TopicPartition(unique_topic, 0)])
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 100 and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    assert got == [b"from-ck-%d" % i for i in range(50)] + [b"from-us-%d" % i for i in range(50)]


# -- raw requests: the broker's rules -----------------------------------------------------------------


def test_init_producer_id_and_sequence_errors(cluster: LocalCluster, unique_topic: str) -> None:
    bootstrap = cluster.bootstrap_servers
    ck_create_topic(bootstrap, unique_topic, 1)
    client = raw_client(bootstrap)
    try:
        first = init_producer_id(client)
        second = init_producer_id(client, version=0)
        assert first.error_code == second.error_code == ErrorCode.none
        assert first.producer_epoch == 0 and first.producer_id != second.producer_id >= 0
        pid = int(first.producer_id)
        assert raw_produce(client, unique_topic, idem_batch(pid, 0, 0)) == (ErrorCode.none, 0)
        assert raw_produce(client, unique_topic, idem_batch(pid, 0, 2)) == (ErrorCode.none, 2)
        # duplicate of an earlier batch: original offset, no error, nothing appended
        assert raw_produce(client, unique_topic, idem_batch(pid, 0, 0)) == (ErrorCode.none, 0)
        # gap
        assert (
            raw_produce(client, unique_topic, idem_batch(pid, 0, 9))[0]
            == ErrorCode.out_of_order_sequence_number
        )
        # new epoch must start at sequence 0
        assert (
            raw_produce(client, unique_topic, idem_batch(pid, 1, 4))[0]
            == ErrorCode.out_of_order_sequence_number
        )
        assert raw_produce(client, unique_topic, idem_batch(pid, 1, 0)) == (ErrorCode.none, 4)
        # the old epoch is fenced
        assert raw_produce(client, unique_topic, idem_batch(pid, 0, 4))[0] == ErrorCode.invalid_producer_epoch
        # negative sequence with a producer id
        assert raw_produce(client, unique_topic, idem_batch(pid, 1, -1))[0] == ErrorCode.invalid_record
        # a transactional id goes to its transaction coordinator: none before FindCoordinator
        # created __transaction_state (Kafka's NOT_COORDINATOR); after that this single broker
        # leads every partition of it (the shared cluster may have run transactions already)
        topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
        answer = init_producer_id(client, "txn-1")
        if "__transaction_state" in topics:
            assert answer.error_code == ErrorCode.none and answer.producer_id >= 0
        else:
            assert answer.error_code == ErrorCode.not_coordinator
        assert init_producer_id(client, "").error_code == ErrorCode.invalid_request
    finally:
        client.close()
    values = [m.value() for m in ck_read_all(bootstrap, unique_topic, 6)]
    assert values == [b"r-0", b"r-1", b"r-2", b"r-3", b"r-0", b"r-1"]


@pytest.mark.parametrize("crash", [False, True], ids=["clean", "kill-9"])
def test_producer_state_survives_restart(tmp_path: Path, crash: bool) -> None:
    local = LocalCluster(data_dir=tmp_path / "cluster")
    local.start()
    try:
        bootstrap = local.bootstrap_servers
        ck_create_topic(bootstrap, "durable-idem", 1)
        client = raw_client(bootstrap)
        pid = int(init_producer_id(client).producer_id)
        for seq in (0, 2, 4):
            assert raw_produce(client, "durable-idem", idem_batch(pid, 0, seq))[0] == ErrorCode.none
        client.close()
        if crash:
            local.kill(1)
        local.restart(1)
        bootstrap = local.bootstrap_servers
        client = raw_client(bootstrap)
        try:
            # retries of the last batches after the restart are still deduplicated
            assert raw_produce(client, "durable-idem", idem_batch(pid, 0, 4)) == (ErrorCode.none, 4)
            assert raw_produce(client, "durable-idem", idem_batch(pid, 0, 2)) == (ErrorCode.none, 2)
            assert (
                raw_produce(client, "durable-idem", idem_batch(pid, 0, 8))[0]
                == ErrorCode.out_of_order_sequence_number
            )
            assert raw_produce(client, "durable-idem", idem_batch(pid, 0, 6)) == (ErrorCode.none, 6)
            # producer ids are never handed out twice across restarts
            assert int(init_producer_id(client).producer_id) > pid
        finally:
            client.close()
        values = [m.value() for m in ck_read_all(bootstrap, "durable-idem", 8)]
        assert len(values) == 8
    finally:
        local.stop()


@pytest.mark.timeout(90)
def test_producer_rides_through_broker_crash_without_duplicates(tmp_path: Path) -> None:
    """kill -9 of the (only) leader while our idempotent producer keeps sending: every record
    arrives exactly once, in order, after the broker comes back (retries within
    delivery.timeout.ms; the restarted broker rebuilt the producer state from the log)."""
    local = LocalCluster(data_dir=tmp_path / "cluster")
    local.start()
    try:
        bootstrap = local.bootstrap_servers
        ck_create_topic(bootstrap, "crash-idem", 2)
        producer = KafkaProducer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "delivery.timeout.ms": 60000,
                "request.timeout.ms": 5000,
            }
        )
        futures = []
        try:
            for i in range(3000):
                futures.append(producer.send("crash-idem", b"c%d" % i, partition=i % 2))
                if i == 1500:
                    local.kill(1)
                    time.sleep(0.3)
                    local.restart(1)
                if i % 50 == 0:
                    time.sleep(0.01)
            producer.flush(60)
            results = [f.result(5) for f in futures]
        finally:
            producer.close(10)
        records = ck_read_all(local.bootstrap_servers, "crash-idem", 3000, partitions=2)
        values = [m.value() for m in records]
        assert len(values) == len(set(values)) == 3000
        for p in (0, 1):
            assert [m.value() for m in records if m.partition() == p] == [
                b"c%d" % i for i in range(p, 3000, 2)
            ]
            assert sorted(r.offset for r in results if r.partition == p) == list(range(1500))
    finally:
        local.stop()


def test_callbacks_flush_and_close(cluster: LocalCluster, unique_topic: str) -> None:
    import threading

    bootstrap = cluster.bootstrap_servers
    seen: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def on_delivery(metadata: Any, exc: BaseException | None) -> None:
        with lock:
            if exc is not None:
                errors.append(exc)
            else:
                seen.append((metadata.partition, metadata.offset))

    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 50})
    for i in range(100):
        producer.send(unique_topic, b"cb%d" % i, callback=on_delivery)
    producer.flush(15)
    assert not errors and [o for _, o in seen] == list(range(100))  # in send order
    producer.send(unique_topic, b"last", callback=on_delivery)
    producer.close(15)  # sends what is buffered
    assert [o for _, o in seen][-1] == 100
    bad: list[BaseException | None] = []
    with pytest.raises(Exception, match="closed"):
        producer.send(unique_topic, b"after-close", callback=lambda m, e: bad.append(e))


@pytest.mark.timeout(120)
def test_idempotent_producer_follows_leader_failover(tmp_path: Path) -> None:
    """Three brokers, RF 3: kill -9 the partition leader while our producer sends. The producer
    follows the new leader (metadata refresh after disconnect / NOT_LEADER_OR_FOLLOWER) and
    retries within delivery.timeout.ms; the new leader learned the producer state from
    replication, so retried batches are deduplicated: every record exactly once, in order."""
    local = LocalCluster(brokers=3, data_dir=tmp_path / "cluster")
    local.start()
    try:
        bootstrap = local.bootstrap_servers
        ck_create_topic_rf(bootstrap, "failover-idem", 1, 3)
        old_leader = local.wait_for_leader("failover-idem", 0)
        local.wait_for_isr("failover-idem", 0, 3)
        producer = KafkaProducer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "retry.backoff.ms": 100,
                "reconnect.backoff.max.ms": 500,
                "delivery.timeout.ms": 90000,
                "request.timeout.ms": 10000,
                "metadata.max.age.ms": 5000,
            }
        )
        futures = []
        try:
            for i in range(2000):
                futures.append(producer.send("failover-idem", b"f%d" % i, partition=0))
                if i == 800:
                    local.kill(old_leader)
                if i % 50 == 0:
                    time.sleep(0.02)
            producer.flush(90)
            results = [f.result(5) for f in futures]
        finally:
            producer.close(10)
        local.wait_for_leader("failover-idem", 0, not_in=[old_leader])
        records = ck_read_all(bootstrap, "failover-idem", 2000, timeout_s=30)
        assert [m.value() for m in records] == [b"f%d" % i for i in range(2000)]
        assert [r.offset for r in results] == list(range(2000))
    finally:
        local.stop()


def ck_create_topic_rf(bootstrap: str, topic: str, partitions: int, replication_factor: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replication_factor)])[topic].result(timeout=30)


def test_aiokafka_idempotent_producer(cluster: LocalCluster, unique_topic: str) -> None:
    import asyncio

    import aiokafka

    bootstrap = cluster.bootstrap_servers

    async def run() -> list[int]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            futures = [await producer.send(unique_topic, b"a%d" % i) for i in range(100)]
            return [(await f).offset for f in futures]
        finally:
            await producer.stop()

    assert asyncio.run(run()) == list(range(100))
    headers = stored_headers(cluster.log_dir(1), unique_topic)
    assert headers and all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)
