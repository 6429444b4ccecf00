"""Helpers for replication fault tests on real broker processes (LocalCluster(brokers=3))."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalite.local_cluster import LocalCluster

#: Fast failure detection for tests (the session timeout bounds the failover pause).
FAULT_OVERRIDES = {
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
}


def start_cluster(tmp_path: Path, **overrides: str) -> LocalCluster:
    return LocalCluster(
        brokers=3, data_dir=tmp_path / "cluster", config_overrides={**FAULT_OVERRIDES, **overrides}
    ).start()


def create_topic(cluster: LocalCluster, partitions: int = 1, min_isr: int = 2, **configs: str) -> str:
    topic = "repl-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, partitions, 3, config={"min.insync.replicas": str(min_isr), **configs})
    admin.create_topics([new])[topic].result(30)
    for p in range(partitions):
        cluster.wait_for_leader(topic, p, timeout_s=30)
        cluster.wait_for_isr(topic, p, 3, timeout_s=30)
    return topic


@dataclass
class AckLog:
    """Records acknowledged (value -> offset, in ack order) and failed by a producer."""

    acked: list[tuple[bytes, int, int]] = field(default_factory=list)  # (value, partition, offset)
    failed: list[tuple[bytes, str]] = field(default_factory=list)
    ack_times: list[tuple[float, int]] = field(default_factory=list)  # (monotonic time, partition)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_ack(self, value: bytes, partition: int, offset: int) -> None:
        with self.lock:
            self.acked.append((value, partition, offset))
            self.ack_times.append((time.monotonic(), partition))

    def on_fail(self, value: bytes, error: str) -> None:
        with self.lock:
            self.failed.append((value, error))

    def first_ack_after(self, t: float, partition: int) -> float | None:
        with self.lock:
            return next((a for a, p in self.ack_times if a > t and p == partition), None)


def confluent_producer(cluster: LocalCluster, **extra: object) -> Producer:
    conf: dict[str, object] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "acks": "all",
        "linger.ms": 2,
        "enable.idempotence": True,
        "message.timeout.ms": 60000,
        "retry.backoff.ms": 100,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    conf.update(extra)
    return Producer(conf)


def consume_all(
    cluster: LocalCluster, topic: str, partitions: int = 1, timeout_s: float = 30.0
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` up to the current high watermark: {partition: [(offset, value)]}."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "verify-" + uuid.uuid4().hex[:6],
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        done = {p for p in range(partitions) if ends[p] == 0}
        while len(done) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= ends[msg.partition()]:
                        done.add(msg.partition())
                    continue
                raise AssertionError(f"consumer error {msg.error()}")
            out[msg.partition()].append((msg.offset(), msg.value()))
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        assert len(done) == partitions, (
            f"did not reach the ends {ends}: {[(p, len(v)) for p, v in out.items()]}"
        )
        return out
    finally:
        consumer.close()


def assert_acked_read_back_once_in_order(acks: AckLog, consumed: dict[int, list[tuple[int, bytes]]]) -> None:
    """Every acknowledged record is stored exactly once, at the offset it was acknowledged
    with, and per partition the log order is the order the records were sent (values carry
    their send sequence)."""
    by_value: dict[bytes, list[tuple[int, int]]] = {}
    for p, records in consumed.items():
        offsets = [o for o, _ in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        for o, v in records:
            by_value.setdefault(v, []).append((p, o))
    lost = [v for v, _p, _o in acks.acked if v not in by_value]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    dups = {v: locs for v, locs in by_value.items() if len(locs) > 1}
    assert not dups, f"{len(dups)} records stored twice, e.g. {list(dups.items())[:3]}"
    for v, p, o in acks.acked:
        assert by_value[v] == [(p, o)], f"{v!r} acknowledged at {p}/{o} but stored at {by_value[v]}"
    for p, records in consumed.items():
        seqs = [int(v.split(b"-")[1]) for _, v in records]
        assert seqs == sorted(seqs), f"partition {p}: records out of send order"
