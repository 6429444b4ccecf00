"""Produce throughput: our ``KafkaProducer`` vs ``confluent_kafka.Producer`` on the same topic.

Both producers send N keyed records (12-byte keys, 100-byte values) with acks=1 and the same
``linger.ms`` / ``batch.size`` to one 4-partition topic of the same broker, then flush. Each
producer is warmed up first (connections, metadata, broker code paths), and the timed part runs
from the first ``send``/``produce`` to the end of ``flush``. Delivery is checked through the
topic's watermarks, so no per-record callback is timed for either client.

This measures our client AND our broker's produce path (the peer shares the broker).

    python bench/produce.py [--records 200000] [--bootstrap-server 127.0.0.1:9092]
"""

from __future__ import annotations

import time

from _common import (
    VALUE_SIZE_BYTES,
    Result,
    base_parser,
    bootstrap,
    console,
    create_topic,
    make_keys,
    make_value,
    print_table,
    topic_name,
    topic_record_count,
)


def produce_ours(
    bootstrap_servers: str,
    topic: str,
    keys: list[bytes],
    warmup_keys: list[bytes],
    value: bytes,
    linger_ms: int,
    batch_size: int,
    timeout_s: float,
) -> float:
    """Warm up, then time sending ``keys`` with our producer; returns elapsed seconds."""
    from spark_kafkalite.client import KafkaProducer

    producer = KafkaProducer(
        {
            "bootstrap.servers": bootstrap_servers,
            "acks": "1",
            "linger.ms": linger_ms,
            "batch.size": batch_size,
            "client.id": "bench-ours",
        }
    )
    try:
        for key in warmup_keys:
            producer.send(topic, value=value, key=key)
        producer.flush(timeout_s)
        send = producer.send
        start = time.perf_counter()
        last = None
        for key in keys:
            last = send(topic, value=value, key=key)
        producer.flush(timeout_s)
        elapsed = time.perf_counter() - start
        if last is not None:
            last.result(timeout=0)  # raises the delivery error, if any
        return elapsed
    finally:
        producer.close(timeout_s)


def produce_confluent(
    bootstrap_servers: str,
    topic: str,
    keys: list[bytes],
    warmup_keys: list[bytes],
    value: bytes,
    linger_ms: int,
    batch_size: int,
    timeout_s: float,
) -> float:
    """Warm up, then time producing ``keys`` with confluent-kafka; returns elapsed seconds."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap_servers,
            "acks": "1",
            "linger.ms": linger_ms,
            "batch.size": batch_size,
            "client.id": "bench-confluent",
        }
    )

    def run(batch: list[bytes]) -> None:
        produce = producer.produce
        for key in batch:
            while True:
                try:
                    produce(topic, value=value, key=key)
                    break
                except BufferError:  # local queue full: serve delivery reports, retry
                    producer.poll(0.01)
        remaining = producer.flush(timeout_s)
        if remaining:
            raise TimeoutError(f"confluent-kafka: {remaining} records undelivered after {timeout_s}s")

    run(warmup_keys)
    start = time.perf_counter()
    run(keys)
    return time.perf_counter() - start


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=65536, help="batch.size in bytes")
    parser.add_argument("--warmup-records", type=int, default=10_000)
    args = parser.parse_args()

    keys = make_keys(args.records)
    warmup_keys = make_keys(args.warmup_records)
    value = make_value()
    payload_bytes = sum(len(k) for k in keys) + VALUE_SIZE_BYTES * len(keys)

    with bootstrap(args.bootstrap_server) as (bootstrap_servers, broker_cpu):
        topic = topic_name("bench-produce")
        create_topic(bootstrap_servers, topic, args.partitions)
        results: list[Result] = []
        runs = [
            ("ours: spark_kafkalite KafkaProducer", produce_ours),
            ("peer: confluent_kafka Producer", produce_confluent),
        ]
        for name, fn in runs:
            before = topic_record_count(bootstrap_servers, topic, args.partitions)
            console.print(f"running {name} ...")
            cpu_before = broker_cpu.read()
            elapsed = fn(
                bootstrap_servers,
                topic,
                keys,
                warmup_keys,
                value,
                args.linger_ms,
                args.batch_size,
                args.timeout_s,
            )
            written = topic_record_count(bootstrap_servers, topic, args.partitions) - before
            expected = args.records + args.warmup_records
            note = "" if written == expected else f"WRONG COUNT: {written} of {expected} written"
            cpu_after = broker_cpu.read()
            cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
            results.append(Result(name, args.records, elapsed, payload_bytes, note, cpu))

    print_table(
        f"produce: {args.records:,} keyed records, {VALUE_SIZE_BYTES}-byte values, "
        f"{args.partitions} partitions, acks=1, linger.ms={args.linger_ms}, batch.size={args.batch_size}",
        results,
        mb_label="key+value MB/s",
    )


if __name__ == "__main__":
    main()
