"""Produce throughput: our ``KafkaProducer`` vs confluent-kafka vs kafka-python, same topic.

For each value size (default 100 bytes and 1 KiB) every producer sends N keyed records (12-byte
keys) to one 4-partition topic of the same broker with the same ``linger.ms`` / ``batch.size``,
then flushes. Two settings are measured for ours and for confluent-kafka: ``acks=1`` without
idempotence, and the idempotent default (``enable.idempotence=true``, ``acks=all``);
kafka-python runs with ``acks=1``. Each producer is warmed up first (connections, metadata,
producer id, broker code paths); the timed part runs from the first ``send``/``produce`` to the
end of ``flush``. Delivery is checked through the topic's watermarks, so no per-record callback
is timed for any client. Every client runs ``--rounds`` times (default 3), the clients
alternating within a round; the table shows the median round and the note every round (one
100k-record run takes confluent-kafka ~0.15 s, so a single timing swings by +-30 %).

This measures the clients AND our broker's produce path (the peers share the broker).

    python bench/produce.py [--records 100000] [--value-sizes 100,1024] [--rounds 3] [--quick]
                            [--bootstrap-server 127.0.0.1:9092]

``--quick`` (20k records, 2k warm-up) keeps the whole run well under a minute.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from _common import (
    base_parser,
    bootstrap,
    console,
    create_topic,
    make_keys,
    median_of_rounds,
    print_table,
    topic_name,
    topic_record_count,
)


@dataclass(frozen=True, slots=True)
class Run:
    """What one timed producer run needs."""

    bootstrap_servers: str
    topic: str
    keys: list[bytes]
    warmup_keys: list[bytes]
    value: bytes
    linger_ms: int
    batch_size: int
    timeout_s: float
    security: Mapping[str, object] = field(default_factory=dict)  # security.protocol, ssl.*, sasl.*


ProduceFn = Callable[[Run], float]


def _ours(idempotent: bool) -> ProduceFn:
    def produce(run: Run) -> float:
        """Warm up, then time sending with our producer; returns elapsed seconds."""
        from spark_kafkalite.client import KafkaProducer

        settings: dict[str, object] = {
            "bootstrap.servers": run.bootstrap_servers,
            "linger.ms": run.linger_ms,
            "batch.size": run.batch_size,
            "client.id": "bench-ours",
        }
        settings.update({"acks": "all"} if idempotent else {"acks": "1", "enable.idempotence": False})
        settings.update(run.security)
        producer = KafkaProducer(settings)
        try:
            assert producer.idempotent == idempotent
            for key in run.warmup_keys:
                producer.send(run.topic, value=run.value, key=key)
            producer.flush(run.timeout_s)
            send, topic, value = producer.send, run.topic, run.value
            start = time.perf_counter()
            last = None
            for key in run.keys:
                last = send(topic, value=value, key=key)
            producer.flush(run.timeout_s)
            elapsed = time.perf_counter() - start
            if last is not None:
                last.result(timeout=0)  # raises the delivery error, if any
            return elapsed
        finally:
            producer.close(run.timeout_s)

    return produce


def _confluent(idempotent: bool) -> ProduceFn:
    def produce(run: Run) -> float:
        """Warm up, then time producing with confluent-kafka; returns elapsed seconds."""
        from confluent_kafka import Producer

        settings: dict[str, object] = {
            "bootstrap.servers": run.bootstrap_servers,
            "linger.ms": run.linger_ms,
            "batch.size": run.batch_size,
            "client.id": "bench-confluent",
        }
        settings.update({"enable.idempotence": True} if idempotent else {"acks": "1"})
        settings.update(run.security)
        producer = Producer(settings)

        def send(batch: list[bytes]) -> None:
            produce_one, topic, value = producer.produce, run.topic, run.value
            for key in batch:
                while True:
                    try:
                        produce_one(topic, value=value, key=key)
                        break
                    except BufferError:  # local queue full: serve delivery reports, retry
                        producer.poll(0.01)
            remaining = producer.flush(run.timeout_s)
            if remaining:
                raise TimeoutError(f"confluent-kafka: {remaining} records undelivered after {run.timeout_s}s")

        send(run.warmup_keys)
        start = time.perf_counter()
        send(run.keys)
        return time.perf_counter() - start

    return produce


def produce_kafka_python(run: Run) -> float:
    """Warm up, then time sending with kafka-python (acks=1); returns elapsed seconds."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=run.bootstrap_servers,
        acks=1,
        enable_idempotence=False,
        linger_ms=run.linger_ms,
        batch_size=run.batch_size,
        client_id="bench-kafka-python",
    )
    try:
        for key in run.warmup_keys:
            producer.send(run.topic, value=run.value, key=key)
        producer.flush(run.timeout_s)
        send, topic, value = producer.send, run.topic, run.value
        start = time.perf_counter()
        last = None
        for key in run.keys:
            last = send(topic, value=value, key=key)
        producer.flush(run.timeout_s)
        elapsed = time.perf_counter() - start
        if last is not None:
            last.get(timeout=0)
        return elapsed
    finally:
        producer.close(run.timeout_s)


RUNS: list[tuple[str, ProduceFn]] = [
    ("ours, acks=1", _ours(idempotent=False)),
    ("ours, idempotent (acks=all, default)", _ours(idempotent=True)),
    ("peer: confluent-kafka, acks=1", _confluent(idempotent=False)),
    ("peer: confluent-kafka, idempotent", _confluent(idempotent=True)),
    ("peer: kafka-python, acks=1", produce_kafka_python),
]


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], default_records=100_000)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=65536, help="batch.size in bytes")
    parser.add_argument("--warmup-records", type=int, default=5_000)
    parser.add_argument("--value-sizes", default="100,1024", help="comma-separated value sizes in bytes")
    parser.add_argument("--quick", action="store_true", help="20k records, 2k warm-up (under a minute)")
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed runs of each client, alternating (median)"
    )
    parser.add_argument("--only", default="", help="run only clients whose name contains this text")
    args = parser.parse_args()
    if args.quick:
        args.records, args.warmup_records = 20_000, 2_000
    sizes = [int(s) for s in args.value_sizes.split(",") if s.strip()]
    keys = make_keys(args.records)
    warmup_keys = make_keys(args.warmup_records)

    with bootstrap(args.bootstrap_server) as (bootstrap_servers, broker_cpu):
        for size in sizes:
            value = os.urandom(size)
            payload_bytes = sum(len(k) for k in keys) + size * len(keys)
            topic = topic_name(f"bench-produce-{size}")
            create_topic(bootstrap_servers, topic, args.partitions)
            rounds: dict[str, list[tuple[float, float | None, str]]] = {}
            for round_no in range(args.rounds):
                for name, fn in RUNS:  # clients alternate within a round
                    if args.only and args.only not in name:
                        continue
                    before = topic_record_count(bootstrap_servers, topic, args.partitions)
                    console.print(
                        f"{size}-byte values, round {round_no + 1}/{args.rounds}: running {name} ..."
                    )
                    cpu_before = broker_cpu.read()
                    run = Run(
                        bootstrap_servers,
                        topic,
                        keys,
                        warmup_keys,
                        value,
                        args.linger_ms,
                        args.batch_size,
                        args.timeout_s,
                    )
                    elapsed = fn(run)
                    written = topic_record_count(bootstrap_servers, topic, args.partitions) - before
                    expected = args.records + args.warmup_records
                    note = "" if written == expected else f"WRONG COUNT: {written} of {expected} written"
                    cpu_after = broker_cpu.read()
                    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
                    rounds.setdefault(name, []).append((elapsed, cpu, note))
            results = [
                median_of_rounds(name, args.records, timed, payload_bytes) for name, timed in rounds.items()
            ]
            print_table(
                f"produce: {args.records:,} keyed records, {size}-byte values, {args.partitions} partitions, "
                f"linger.ms={args.linger_ms}, batch.size={args.batch_size}, median of {args.rounds} rounds",
                results,
                mb_label="key+value MB/s",
            )


if __name__ == "__main__":
    main()
