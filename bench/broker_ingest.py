"""Broker ingest: our broker vs librdkafka's in-process mock cluster, same librdkafka producer.

One confluent-kafka (librdkafka) producer configuration sends N keyed records (12-byte keys,
100-byte values by default) to a 4-partition topic of

- **ours**: a one-broker ``LocalCluster`` (our Python broker, its own process), and
- **peer**: librdkafka's mock cluster (``test.mock.num.brokers=1``), a Kafka broker that librdkafka
  runs in threads of the producer's own process and reaches over a 127.0.0.1 socket; it keeps
  records in memory. Its auto-created topics have 4 partitions (the mock cluster's default), which
  is checked before timing.

Each is measured with ``acks=1`` and with the idempotent producer (``enable.idempotence=true``,
hence ``acks=all``), ``--rounds`` times (default 3) with the two brokers alternating; the table
shows the median round and the note every round. The producer is warmed up first (connections, metadata, producer id); the
timed part runs from the first ``produce`` to the end of ``flush``. Delivery errors are counted
through ``delivery.report.only.error`` (so no per-record Python callback runs in either case) and
any error, or a record still queued after ``flush``, fails the run; for our broker the topic's
watermarks must also show every record. The broker CPU column is our broker process's user+system
CPU seconds (``/proc/<pid>/stat``); the mock cluster shares the producer's process, so its CPU
cannot be separated.

Since the producer is the same C client in both runs, the ratio measures the brokers
(issue #10 goal: ours >= 0.9x the mock cluster).

A third table measures the leader's recompression (issue #26): the same producer with
``compression.type=lz4`` and ``acks=1`` sends JSON-like values (about 100 bytes, each different,
lz4 about 2x) to three topics of our broker whose ``compression.type`` is ``producer`` (stored as
sent: the peer), ``zstd`` and ``gzip`` (every batch rebuilt by the leader), the three alternating
within each round; the broker CPU column shows the rebuild's cost.

    python bench/broker_ingest.py [--records 300000] [--value-size 100] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass

from _common import (
    BrokerCpu,
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

MOCK_PARTITIONS = 4  # librdkafka's mock cluster auto-creates topics with 4 partitions


@dataclass(frozen=True, slots=True)
class Settings:
    """The producer configuration shared by both brokers."""

    linger_ms: int
    batch_size: int
    idempotent: bool
    timeout_s: float
    compression: str = "none"

    def config(self) -> dict[str, object]:
        config: dict[str, object] = {
            "linger.ms": self.linger_ms,
            "batch.size": self.batch_size,
            "delivery.report.only.error": True,
            "compression.type": self.compression,
        }
        config.update({"enable.idempotence": True} if self.idempotent else {"acks": "1"})
        return config


#: ``compression.type`` of the topics of the recompression table, with what the leader does.
TOPIC_COMPRESSION = (("producer", "stored as sent"), ("zstd", "rebuilt"), ("gzip", "rebuilt"))


def json_like_values(n: int, seed: int = 26) -> list[bytes]:
    """``n`` different values of about 100 bytes that compress like event JSON (lz4 ~2x)."""
    rng = random.Random(seed)
    pages = ("/home", "/search", "/cart", "/checkout", "/product", "/account")
    return [
        b'{"user":"u%06d","page":"%s","ms":%d,"session":"%s","ok":%s}'
        % (
            rng.randrange(10**6),
            rng.choice(pages).encode(),
            1_700_000_000_000 + i * 7,
            rng.randbytes(12).hex().encode(),
            b"true" if rng.random() < 0.9 else b"false",
        )
        for i in range(n)
    ]


def _produce_timed(
    config: dict[str, object],
    topic: str,
    partitions: int,
    keys: list[bytes],
    warmup_keys: list[bytes],
    value: bytes | list[bytes],
    timeout_s: float,
) -> float:
    """Check the topic has ``partitions`` partitions, warm up, then time producing ``keys`` with
    one librdkafka producer, each with ``value`` (or the value of its index in a list); returns
    seconds."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_error_report(err: object, _msg: object) -> None:  # only failed records (only.error)
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    producer = Producer({**config, "on_delivery": on_error_report})
    tmd = producer.list_topics(topic, timeout=10).topics[topic]
    if tmd.error is not None or len(tmd.partitions) != partitions:
        raise RuntimeError(
            f"topic {topic}: {tmd.error}, {len(tmd.partitions)} partitions, wanted {partitions}"
        )

    def send(batch: list[bytes], values: Iterable[bytes]) -> None:
        produce, poll = producer.produce, producer.poll
        for key, value in zip(batch, values, strict=False):  # values may be endless (repeat)
            while True:
                try:
                    produce(topic, value=value, key=key)
                    break
                except BufferError:  # local queue full: let librdkafka drain it, then retry
                    poll(0.005)
        remaining = producer.flush(timeout_s)
        if remaining:
            raise TimeoutError(f"{remaining} records undelivered after {timeout_s}s")
        if errors:
            raise RuntimeError(f"delivery failed: {errors}")

    values = itertools.repeat(value) if isinstance(value, bytes) else value
    send(warmup_keys, itertools.repeat(value) if isinstance(value, bytes) else itertools.cycle(value))
    start = time.perf_counter()
    send(keys, values)
    return time.perf_counter() - start


def run_ours(
    bootstrap_servers: str,
    broker_cpu: BrokerCpu,
    settings: Settings,
    partitions: int,
    keys: list[bytes],
    warmup_keys: list[bytes],
    value: bytes | list[bytes],
    topic_config: dict[str, str] | None = None,
) -> tuple[float, float | None, str]:
    """(elapsed s, broker CPU s, note) for our broker, into a new topic with ``topic_config``."""
    topic = topic_name("bench-ingest")
    create_topic(bootstrap_servers, topic, partitions, config=topic_config)
    config = {**settings.config(), "bootstrap.servers": bootstrap_servers, "client.id": "bench-ingest"}
    cpu_before = broker_cpu.read()
    elapsed = _produce_timed(config, topic, partitions, keys, warmup_keys, value, settings.timeout_s)
    cpu_after = broker_cpu.read()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    written = topic_record_count(bootstrap_servers, topic, partitions)
    expected = len(keys) + len(warmup_keys)
    note = "" if written == expected else f"WRONG COUNT: {written} of {expected} written"
    return elapsed, cpu, note


def run_mock(settings: Settings, keys: list[bytes], warmup_keys: list[bytes], value: bytes) -> float:
    """Elapsed seconds against a fresh librdkafka mock cluster (one broker)."""
    topic = topic_name("bench-ingest-mock")
    config = {
        **settings.config(),
        "test.mock.num.brokers": 1,
        "client.id": "bench-ingest-mock",
        "log_level": 3,
    }
    return _produce_timed(config, topic, MOCK_PARTITIONS, keys, warmup_keys, value, settings.timeout_s)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0], default_records=300_000)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=65536, help="batch.size in bytes")
    parser.add_argument("--warmup-records", type=int, default=20_000)
    parser.add_argument("--value-size", type=int, default=100, help="value size in bytes")
    parser.add_argument("--quick", action="store_true", help="100k records, 10k warm-up")
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed runs against each broker, alternating (median)"
    )
    args = parser.parse_args()
    if args.quick:
        args.records, args.warmup_records = 100_000, 10_000
    if args.partitions != MOCK_PARTITIONS:
        raise SystemExit(f"the mock cluster's topics have {MOCK_PARTITIONS} partitions; use --partitions 4")
    keys = make_keys(args.records)
    warmup_keys = [b"warm-%07d" % i for i in range(args.warmup_records)]  # 12 bytes, like the keys
    value = os.urandom(args.value_size)
    payload_bytes = sum(len(k) for k in keys) + args.value_size * len(keys)
    load = os.getloadavg()[0]

    with bootstrap(args.bootstrap_server) as (bootstrap_servers, broker_cpu):
        for idempotent in (False, True):
            label = "idempotent (acks=all)" if idempotent else "acks=1"
            settings = Settings(args.linger_ms, args.batch_size, idempotent, args.timeout_s)
            ours: list[tuple[float, float | None, str]] = []
            mock: list[tuple[float, float | None, str]] = []
            for round_no in range(args.rounds):  # the two brokers alternate within a round
                console.print(f"broker ingest, {label}, round {round_no + 1}/{args.rounds}: our broker ...")
                ours.append(
                    run_ours(
                        bootstrap_servers, broker_cpu, settings, args.partitions, keys, warmup_keys, value
                    )
                )
                console.print(
                    f"broker ingest, {label}, round {round_no + 1}/{args.rounds}: librdkafka mock ..."
                )
                mock.append((run_mock(settings, keys, warmup_keys, value), None, ""))
            results = [
                median_of_rounds(f"ours: our broker, {label}", args.records, ours, payload_bytes),
                median_of_rounds(
                    f"peer: librdkafka mock cluster, {label}", args.records, mock, payload_bytes
                ),
            ]
            print_table(
                f"broker ingest, librdkafka producer, {label}: {args.records:,} keyed records, "
                f"{args.value_size}-byte values, {args.partitions} partitions, linger.ms={args.linger_ms}, "
                f"batch.size={args.batch_size}, median of {args.rounds} rounds; load average {load:.1f} at start",
                results,
                mb_label="key+value MB/s",
            )
        run_recompression(args, bootstrap_servers, broker_cpu, keys, warmup_keys)


def run_recompression(
    args: argparse.Namespace,
    bootstrap_servers: str,
    broker_cpu: BrokerCpu,
    keys: list[bytes],
    warmup_keys: list[bytes],
) -> None:
    """The recompression table: lz4 batches into topics of each :data:`TOPIC_COMPRESSION`."""
    values = json_like_values(len(keys))
    payload_bytes = sum(len(k) for k in keys) + sum(len(v) for v in values)
    load = os.getloadavg()[0]
    settings = Settings(args.linger_ms, args.batch_size, False, args.timeout_s, compression="lz4")
    rounds: dict[str, list[tuple[float, float | None, str]]] = {name: [] for name, _ in TOPIC_COMPRESSION}
    for round_no in range(args.rounds):  # the three topic codecs alternate within a round
        for name, _ in TOPIC_COMPRESSION:
            console.print(
                f"broker ingest, lz4 into compression.type={name}, round {round_no + 1}/{args.rounds} ..."
            )
            rounds[name].append(
                run_ours(
                    bootstrap_servers,
                    broker_cpu,
                    settings,
                    args.partitions,
                    keys,
                    warmup_keys,
                    values,
                    topic_config={"compression.type": name},
                )  # fmt: skip
            )
    results = [
        median_of_rounds(
            f"ours: lz4 batches -> compression.type={name} ({what})",
            args.records,
            rounds[name],
            payload_bytes,
        )
        for name, what in TOPIC_COMPRESSION
    ]
    print_table(
        f"broker ingest, recompression: librdkafka producer with compression.type=lz4, acks=1, "
        f"{args.records:,} keyed records of ~100-byte JSON-like values, {args.partitions} partitions, "
        f"linger.ms={args.linger_ms}, batch.size={args.batch_size}, into topics with compression.type "
        f"producer / zstd / gzip, median of {args.rounds} rounds; load average {load:.1f} at start",
        results,
        mb_label="key+value MB/s",
    )


if __name__ == "__main__":
    main()
