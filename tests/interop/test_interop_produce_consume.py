"""Real clients produce to and consume from the broker; every record must come back exactly
(key, value, headers, timestamp, per-partition order, offsets contiguous from 0)."""

from __future__ import annotations

import pytest
from peers import (
    by_partition,
    ck_consume,
    ck_create_topic,
    ck_produce,
    kp_consume,
    kp_produce,
    make_messages,
)

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 4
COUNT = 3000


@pytest.mark.parametrize(
    ("producer", "consumer", "acks", "compression"),
    [
        ("confluent", "confluent", "all", "none"),
        ("confluent", "kafka-python", "1", "lz4"),
        ("kafka-python", "kafka-python", "1", None),
        ("kafka-python", "confluent", "all", "gzip"),
    ],
)
def test_produce_consume_exact(
    bootstrap_servers: str,
    unique_topic: str,
    producer: str,
    consumer: str,
    acks: str,
    compression: str | None,
) -> None:
    ck_create_topic(bootstrap_servers, unique_topic, PARTITIONS)
    messages = make_messages(COUNT, PARTITIONS, null_headers=producer == "confluent")
    if producer == "confluent":
        ck_produce(bootstrap_servers, unique_topic, messages, acks, compression or "none")
    else:
        kp_produce(bootstrap_servers, unique_topic, messages, -1 if acks == "all" else int(acks), compression)
    if consumer == "confluent":
        got = ck_consume(bootstrap_servers, unique_topic, PARTITIONS, COUNT)
    else:
        got = kp_consume(bootstrap_servers, unique_topic, PARTITIONS, COUNT)
    assert len(got) == COUNT
    expected = by_partition(messages)
    actual = by_partition(got)
    assert sorted(actual) == list(range(PARTITIONS))
    for p in range(PARTITIONS):
        assert actual[p] == expected[p], f"partition {p} differs"


def test_zstd_and_snappy_from_librdkafka(bootstrap_servers: str, unique_topic: str) -> None:
    """zstd needs Produce v7+ / Fetch v10+; both codecs pass through the broker as opaque batches."""
    ck_create_topic(bootstrap_servers, unique_topic, 2)
    messages = make_messages(400, 2, seed=3)
    ck_produce(bootstrap_servers, unique_topic, messages[:200], "1", "zstd")
    ck_produce(bootstrap_servers, unique_topic, messages[200:], "1", "snappy")
    got = ck_consume(bootstrap_servers, unique_topic, 2, 400)
    assert by_partition(got) == by_partition(messages)


def test_auto_created_topic_via_metadata(bootstrap_servers: str, unique_topic: str) -> None:
    """librdkafka asks Metadata for an unknown topic; the broker auto-creates it (first answer
    LEADER_NOT_AVAILABLE) and the produce then succeeds on partition 0."""
    messages = make_messages(50, 1, seed=5)
    ck_produce(bootstrap_servers, unique_topic, messages, "1")
    got = kp_consume(bootstrap_servers, unique_topic, 1, 50)
    assert got == messages
