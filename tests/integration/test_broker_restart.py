"""Durability across restarts: clean stop (SIGTERM), crash (SIGKILL) and a torn tail batch.
Every record acknowledged before the stop must be served after the restart, on the same port,
with the same cluster id and topic id; offsets continue where they stopped."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(60)

TOPIC = "durable"


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(data_dir=tmp_path / "cluster")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def create_topic(bootstrap: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(timeout=15)


def produce(bootstrap: str, values: list[bytes], partitions: int = 2, acks: str = "all") -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 1})
    for i, v in enumerate(values):
        producer.produce(TOPIC, value=v, key=b"%d" % i, partition=i % partitions)
    assert producer.flush(15) == 0


def consume_all(bootstrap: str, expected: int, partitions: int = 2) -> dict[int, list[tuple[int, bytes]]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "restart-test", "enable.auto.commit": False}
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    count = 0
    deadline = time.monotonic() + 20
    try:
        while count < expected and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.1):
                assert m.error() is None, m.error()
                out[m.partition()].append((m.offset(), m.value()))
                count += 1
        for m in consumer.consume(1000, timeout=0.3):  # nothing beyond what was expected
            out[m.partition()].append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


def expected_layout(values: list[bytes], partitions: int = 2) -> dict[int, list[tuple[int, bytes]]]:
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    for i, v in enumerate(values):
        out[i % partitions].append((len(out[i % partitions]), v))
    return out


def cluster_identity(bootstrap: str) -> tuple[str, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=10)
    return metadata.cluster_id, len(metadata.topics[TOPIC].partitions)


def test_clean_restart_keeps_data_port_and_ids(local: LocalCluster) -> None:
    bootstrap = local.bootstrap_servers
    create_topic(bootstrap)
    first = [b"before-%d" % i for i in range(500)]
    produce(bootstrap, first)
    identity = cluster_identity(bootstrap)
    topic_id = (local.log_dir(1) / f"{TOPIC}-0" / "partition.metadata").read_text()
    old_pid = local.pid(1)

    assert local.terminate(1) == 0  # SIGTERM -> clean shutdown, exit code 0
    assert (local.log_dir(1) / ".kafka_cleanshutdown").exists()
    assert not (local.log_dir(1) / ".broker-endpoints.json").exists()
    local.restart(1)

    assert local.pid(1) != old_pid
    assert local.bootstrap_servers == bootstrap  # same port
    endpoints = json.loads((local.log_dir(1) / ".broker-endpoints.json").read_text())
    assert endpoints["pid"] == local.pid(1) and endpoints["listeners"]["PLAINTEXT"] == bootstrap
    assert cluster_identity(bootstrap) == identity
    assert (local.log_dir(1) / f"{TOPIC}-0" / "partition.metadata").read_text() == topic_id
    second = [b"after-%d" % i for i in range(100)]
    produce(bootstrap, second)
    assert consume_all(bootstrap, 600) == expected_layout(first + second)


def test_kill_9_loses_no_acknowledged_record(local: LocalCluster) -> None:
    bootstrap = local.bootstrap_servers
    create_topic(bootstrap)
    values = [b"acked-%d" % i for i in range(2000)]
    produce(bootstrap, values[:1000], acks="all")
    produce(bootstrap, values[1000:], acks="1")
    local.kill(1)
    assert not (local.log_dir(1) / ".kafka_cleanshutdown").exists()
    output_before = len(local.output(1))
    local.restart(1)
    assert "not shut down cleanly" in local.output(1)[output_before:]  # recovery ran
    assert consume_all(bootstrap, 2000) == expected_layout(values)
    more = [b"more-%d" % i for i in range(10)]
    produce(bootstrap, more)
    assert consume_all(bootstrap, 2010) == expected_layout(values + more)


def test_partial_tail_batch_truncated_on_recovery(local: LocalCluster) -> None:
    bootstrap = local.bootstrap_servers
    create_topic(bootstrap, partitions=1)
    values = [b"whole-%d" % i for i in range(300)]
    produce(bootstrap, values, partitions=1)
    local.kill(1)

    segment = local.log_dir(1) / f"{TOPIC}-0" / ("0" * 20 + ".log")
    data = segment.read_bytes()
    size_before = len(data)
    # A torn write: the first 100 bytes of a copy of the first batch, with a later base offset.
    first_batch_length = int.from_bytes(data[8:12], "big") + 12
    torn = bytearray(data[: min(100, first_batch_length)])
    torn[0:8] = (10_000).to_bytes(8, "big")
    with open(segment, "ab") as f:
        f.write(torn)

    local.restart(1)
    assert segment.stat().st_size == size_before  # truncated back to the last whole batch
    assert consume_all(bootstrap, 300, partitions=1) == expected_layout(values, partitions=1)
    produce(bootstrap, [b"next"], partitions=1)
    consumer_view = consume_all(bootstrap, 301, partitions=1)
    assert consumer_view[0][-1] == (300, b"next")


def test_sigterm_while_clients_connected_exits_cleanly(local: LocalCluster) -> None:
    bootstrap = local.bootstrap_servers
    create_topic(bootstrap, partitions=1)
    produce(bootstrap, [b"x"], partitions=1)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "sigterm"})
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_END)])
    consumer.consume(1, timeout=0.5)  # a long-polling fetch is parked in the broker
    pid = local.pid(1)
    assert pid is not None
    start = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    assert local.terminate(1) == 0
    assert time.monotonic() - start < 5
    consumer.close()
