"""Helpers of the transaction interop and fault tests: confluent-kafka transactional
producers, a read_committed reader, kafka-python's DescribeTransactions."""

from __future__ import annotations

import time
import uuid
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient


def producer(bootstrap: str, transactional_id: str, **config: object) -> confluent_kafka.Producer:
    return confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **config}
    )


def describe(bootstrap: str, transactional_id: str) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return admin.describe_transactions([transactional_id])[transactional_id]
    finally:
        admin.close()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def read_committed(bootstrap: str, topic: str, partitions: int, timeout_s: float = 15) -> list[bytes]:
    """Values a confluent read_committed consumer reads from the start of ``topic`` up to the
    end (the last stable offset) of every partition."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,  # no group coordinator needed (none after a failover)
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    values: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(eof) < partitions and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    eof.add(message.partition())
                continue
            values.append(message.value())
    finally:
        consumer.close()
    assert len(eof) == partitions, "read_committed consumer did not reach the end"
    return values
