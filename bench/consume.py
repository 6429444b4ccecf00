"""Consume throughput: our ``KafkaConsumer`` vs confluent-kafka vs kafka-python, same topic.

For each value size (default 100 bytes and 1 KiB) a topic (4 partitions, N keyed records) is
filled once with confluent-kafka. Each client then reads it all from the beginning with manual assignment (no
consumer group): ours with ``assign`` + ``seek_to_beginning`` + a ``poll`` loop, confluent-kafka
with ``assign(OFFSET_BEGINNING)`` + ``consume(num_messages)``, kafka-python with ``assign`` +
``seek_to_beginning`` + ``poll``. Every loop touches each record's value (sums its length) so
that all three materialise it. Each client first does an untimed warm-up read with a separate
consumer; the timed part runs from ``assign`` until the N-th record is in hand.

    python bench/consume.py [--records 100000] [--value-sizes 100,1024] [--quick]
                            [--bootstrap-server 127.0.0.1:9092]

``--quick`` (20k records, 2k warm-up) keeps the whole run well under a minute.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Mapping

from _common import (
    BrokerCpu,
    Result,
    base_parser,
    bootstrap,
    console,
    create_topic,
    make_keys,
    print_table,
    topic_name,
)

ReadFn = Callable[[str, str, int, int, int, float], tuple[int, int, float]]


def read_ours(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    records: int,
    max_poll_records: int,
    timeout_s: float,
    security: Mapping[str, object] | None = None,
) -> tuple[int, int, float]:
    """Read ``records`` records with our consumer (``security``: extra settings such as
    ``security.protocol``); returns (records, value bytes, seconds)."""
    from spark_kafkalite.client import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "auto.offset.reset": "earliest",
            "max.poll.records": max_poll_records,
            "client.id": "bench-ours",
            **(security or {}),
        }
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        start = time.perf_counter()
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        count = nbytes = 0
        deadline = time.monotonic() + timeout_s
        while count < records and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                count += len(batch)
                for record in batch:
                    nbytes += len(record.value or b"")
        return count, nbytes, time.perf_counter() - start
    finally:
        consumer.close()


def read_confluent(
    bootstrap_servers: str,
    topic: str,
    partitions: int,
    records: int,
    max_poll_records: int,
    timeout_s: float,
    security: Mapping[str, object] | None = None,
) -> tuple[int, int, float]:
    """Read ``records`` records with confluent-kafka (``security``: extra settings such as
    ``security.protocol``); returns (records, value bytes, seconds)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "bench-confluent",  # required by the client; no group is joined (assign)
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "bench-confluent",
            **(security or {}),
        }
    )
    try:
        start = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        count = nbytes = 0
        deadline = time.monotonic() + timeout_s
        while count < records and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=max_poll_records, timeout=1.0):
                if msg.error():
                    raise KafkaException(msg.error())
                count += 1
                nbytes += len(msg.value() or b"")
        return count, nbytes, time.perf_counter() - start
    finally:
        consumer.close()


def read_kafka_python(
    bootstrap_servers: str, topic: str, partitions: int, records: int, max_poll_records: int, timeout_s: float
) -> tuple[int, int, float]:
    """Read ``records`` records with kafka-python; returns (records, value bytes, seconds)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=max_poll_records,
        client_id="bench-kafka-python",
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        start = time.perf_counter()
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        count = nbytes = 0
        deadline = time.monotonic() + timeout_s
        while count < records and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                count += len(batch)
                for record in batch:
                    nbytes += len(record.value or b"")
        return count, nbytes, time.perf_counter() - start
    finally:
        consumer.close()


def fill_topic(bootstrap_servers: str, topic: str, records: int, value_size: int, timeout_s: float) -> None:
    """Produce ``records`` keyed records of ``value_size``-byte values with confluent-kafka."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap_servers, "acks": "1", "linger.ms": 5, "batch.size": 65536}
    )
    value = os.urandom(value_size)
    for key in make_keys(records):
        while True:
            try:
                producer.produce(topic, value=value, key=key)
                break
            except BufferError:
                producer.poll(0.05)
    remaining = producer.flush(timeout_s)
    if remaining:
        raise TimeoutError(f"{remaining} records not delivered after {timeout_s}s")


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], default_records=100_000)
    parser.add_argument(
        "--max-poll-records",
        type=int,
        default=500,
        help="max.poll.records (ours, kafka-python) / num_messages (confluent)",
    )
    parser.add_argument("--warmup-records", type=int, default=5_000)
    parser.add_argument("--value-sizes", default="100,1024", help="comma-separated value sizes in bytes")
    parser.add_argument("--quick", action="store_true", help="20k records, 2k warm-up (under a minute)")
    args = parser.parse_args()
    if args.quick:
        args.records, args.warmup_records = 20_000, 2_000
    sizes = [int(s) for s in args.value_sizes.split(",") if s.strip()]

    with bootstrap(args.bootstrap_server) as (bootstrap_servers, broker_cpu):
        for size in sizes:
            run_size(args, bootstrap_servers, broker_cpu, size)


def run_size(args: argparse.Namespace, bootstrap_servers: str, broker_cpu: BrokerCpu, size: int) -> None:
    """Fill one topic with ``size``-byte values, time every consumer on it, print the table."""
    topic = topic_name(f"bench-consume-{size}")
    create_topic(bootstrap_servers, topic, args.partitions)
    console.print(f"filling {topic} with {args.records:,} records of {size} bytes (confluent-kafka) ...")
    fill_topic(bootstrap_servers, topic, args.records, size, args.timeout_s)
    runs: list[tuple[str, ReadFn]] = [
        ("ours: spark_kafkalite KafkaConsumer", read_ours),
        ("peer: confluent_kafka Consumer", read_confluent),
        ("peer: kafka-python KafkaConsumer", read_kafka_python),
    ]
    results: list[Result] = []
    for name, fn in runs:
        console.print(f"{size}-byte values: running {name} ...")
        warmup = min(args.warmup_records, args.records)
        fn(bootstrap_servers, topic, args.partitions, warmup, args.max_poll_records, args.timeout_s)
        cpu_before = broker_cpu.read()
        count, nbytes, elapsed = fn(
            bootstrap_servers, topic, args.partitions, args.records, args.max_poll_records, args.timeout_s
        )
        note = ""
        if count < args.records:
            note = f"TIMED OUT: {count:,} of {args.records:,} read"
        elif nbytes != count * size:
            note = f"WRONG BYTES: {nbytes:,} value bytes for {count:,} records"
        cpu_after = broker_cpu.read()
        cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
        results.append(Result(name, count, elapsed, nbytes, note, cpu))
    print_table(
        f"consume: {args.records:,} records, {size}-byte values, {args.partitions} "
        f"partitions, assign from the beginning, batches of {args.max_poll_records}",
        results,
        mb_label="value MB/s",
    )


if __name__ == "__main__":
    main()
