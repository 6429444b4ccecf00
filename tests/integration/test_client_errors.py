"""Client error paths against real sockets: unknown topics, unreachable brokers, request
timeouts and a broker restart (the client reconnects and refreshes metadata)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from spark_kafkalite import LocalCluster
from spark_kafkalite.client import KafkaAdminClient, KafkaConsumer, KafkaProducer, NewTopic, TopicPartition
from spark_kafkalite.client.metadata import Metadata, metadata_request
from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
)

pytestmark = pytest.mark.timeout(60)


def test_producer_to_unknown_topic_without_auto_creation(bootstrap_servers: str, unique_topic: str) -> None:
    with KafkaProducer(
        {"bootstrap.servers": bootstrap_servers, "allow.auto.create.topics": False, "max.block.ms": 500}
    ) as producer:
        started = time.monotonic()
        future = producer.send(unique_topic, value=b"x")
        with pytest.raises(UnknownTopicOrPartitionError, match="not present in metadata"):
            future.result(timeout=5)
        assert 0.4 < time.monotonic() - started < 5


def test_consumer_lookups_on_unknown_topic(bootstrap_servers: str, unique_topic: str) -> None:
    with KafkaConsumer(
        {"bootstrap.servers": bootstrap_servers, "default.api.timeout.ms": 10_000}
    ) as consumer:
        assert consumer.partitions_for_topic(unique_topic) is None
        assert unique_topic not in consumer.list_topics()
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.end_offsets([TopicPartition(unique_topic, 0)])
    # reading never creates the topic
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        assert unique_topic not in admin.list_topics()


def test_unknown_partition_of_existing_topic(bootstrap_servers: str, unique_topic: str) -> None:
    with KafkaAdminClient({"bootstrap.servers": bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(unique_topic, 1, 1)])
    with KafkaConsumer(
        {"bootstrap.servers": bootstrap_servers, "default.api.timeout.ms": 10_000}
    ) as consumer:
        with pytest.raises(UnknownTopicOrPartitionError, match="partition 3"):
            consumer.beginning_offsets([TopicPartition(unique_topic, 3)])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_bootstrap_times_out() -> None:
    port = free_port()  # nothing listens there
    admin = KafkaAdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "reconnect.backoff.max.ms": 50})
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        admin.list_topics(timeout_ms=500)
    assert time.monotonic() - started < 5
    admin.close()
    with KafkaProducer({"bootstrap.servers": f"127.0.0.1:{port}", "max.block.ms": 300}) as producer:
        with pytest.raises(KafkaTimeoutError):
            producer.send("t", value=b"x").result(timeout=5)


def test_request_timeout_closes_the_connection() -> None:
    """A peer that accepts but never answers: the request fails with KafkaTimeoutError after
    request.timeout.ms (the ApiVersions handshake never completes, so the connection setup is what
    times out here)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(server.accept()[0]), daemon=True).start()
    port = server.getsockname()[1]
    config = {"bootstrap.servers": f"127.0.0.1:{port}", "request.timeout.ms": 300}
    client = NetworkClient(config, Metadata(config))
    try:
        future = client.send(-1, metadata_request([]))
        started = time.monotonic()
        with pytest.raises((KafkaTimeoutError, KafkaConnectionError)):
            client.wait_for(future, 5000)
        assert 0.2 < time.monotonic() - started < 3
        assert client.api_version(-1, ApiKey.METADATA) is None
    finally:
        client.close()
        server.close()
        for s in accepted:
            s.close()


def test_clients_survive_a_broker_restart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with LocalCluster(data_dir=tmp_path) as cluster:
        bootstrap = cluster.bootstrap_servers
        with KafkaAdminClient({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([NewTopic("restart", 1, 1)])
        producer = KafkaProducer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 0,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
            }
        )
        consumer = KafkaConsumer(
            {"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest", "reconnect.backoff.max.ms": 200}
        )
        tp = TopicPartition("restart", 0)
        consumer.assign([tp])
        try:
            assert producer.send("restart", value=b"before").result(timeout=10).offset == 0
            assert [r.value for r in consumer.poll(5000)[tp]] == [b"before"]
            cluster.restart(1)
            assert producer.send("restart", value=b"after").result(timeout=20).offset == 1
            values: list[bytes | None] = []
            deadline = time.monotonic() + 20
            while not values and time.monotonic() < deadline:
                for records in consumer.poll(500).values():
                    values.extend(r.value for r in records)
            assert values == [b"after"]
        finally:
            producer.close(5)
            consumer.close()


def test_delivery_timeout_and_forced_close_when_the_broker_is_gone(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with LocalCluster(data_dir=tmp_path) as cluster:
        bootstrap = cluster.bootstrap_servers
        producer = KafkaProducer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 0,
                "delivery.timeout.ms": 1500,
                "request.timeout.ms": 1000,
                "retry.backoff.ms": 50,
            }
        )
        try:
            assert producer.send("gone", value=b"first").result(timeout=10).offset == 0
            cluster.kill(1)
            started = time.monotonic()
            future = producer.send("gone", value=b"lost")
            with pytest.raises(KafkaTimeoutError, match="delivery.timeout.ms"):
                future.result(timeout=10)
            assert time.monotonic() - started < 5
            pending = producer.send("gone", value=b"never")
        finally:
            started = time.monotonic()
            producer.close(timeout_s=0.5)
        assert time.monotonic() - started < 7
        assert pending.done() and pending.exception() is not None
