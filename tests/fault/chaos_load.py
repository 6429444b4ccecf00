"""Idempotent ``acks=all`` load for the chaos soak, in its own process (so the proxies can tell
its connections from the harness's): confluent-kafka (librdkafka), or our
``spark_kafkalite`` ``KafkaProducer`` with CLIENT ``kafkalite``, produces values
``<run>-<seq>`` round-robin over the partitions at a paced rate and prints one line per outcome
on stdout: ``A <partition> <offset> <value>`` (acknowledged) or ``F <value> <error>`` (failed).
SIGTERM (or stdin closing) stops sending; the producer is flushed (up to 60 s) before exit.

    python tests/fault/chaos_load.py BOOTSTRAP TOPIC PARTITIONS RATE_PER_S RUN_ID [CLIENT]
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, Producer


def main(argv: list[str]) -> int:
    bootstrap, topic, partitions, rate, run = argv[0], argv[1], int(argv[2]), float(argv[3]), argv[4]
    client = argv[5] if len(argv) > 5 else "confluent"
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    out_lock = threading.Lock()

    def emit(line: str) -> None:
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    if client == "kafkalite":
        return _kafkalite_load(bootstrap, topic, partitions, rate, run, stop, emit)

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        value = msg.value().decode()  # type: ignore[attr-defined]
        if err is not None:
            emit(f"F {value} {err.name()}")
        else:
            emit(f"A {msg.partition()} {msg.offset()} {value}")  # type: ignore[attr-defined]

    fatal: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.fatal():
            fatal.append(str(err))
            emit(f"E FATAL {err}")
            stop.set()

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 300000,
            "retry.backoff.ms": 100,
            "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": 1000,
            "error_cb": on_error,
        }
    )
    seq = 0
    interval_s = 1.0 / rate
    next_t = time.monotonic()
    while not stop.is_set():
        value = f"{run}-{seq}"
        try:
            producer.produce(topic, value.encode(), partition=seq % partitions, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.1)
            continue
        seq += 1
        next_t += interval_s
        delay = next_t - time.monotonic()
        producer.poll(max(0.0, delay))
        if delay < -1.0:  # fell behind (a stall): do not burst to catch up
            next_t = time.monotonic()
    remaining = producer.flush(60)
    emit(f"E END sent={seq} unflushed={remaining}")
    return 1 if fatal else 0


def _kafkalite_load(
    bootstrap: str,
    topic: str,
    partitions: int,
    rate: float,
    run: str,
    stop: threading.Event,
    emit: Callable[[str], None],
) -> int:
    """The same paced load through our own idempotent producer."""
    from spark_kafkalite.client.producer.kafka_producer import KafkaProducer

    producer = KafkaProducer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "delivery.timeout.ms": 300000,
            "retry.backoff.ms": 100,
        }
    )

    def callback_for(value: str) -> Callable[[Any, BaseException | None], None]:
        def done(metadata: Any, exc: BaseException | None) -> None:
            if exc is not None:
                emit(f"F {value} {type(exc).__name__}")
            else:
                emit(f"A {metadata.partition} {metadata.offset} {value}")

        return done

    seq = 0
    interval_s = 1.0 / rate
    next_t = time.monotonic()
    while not stop.is_set():
        value = f"{run}-{seq}"
        try:
            producer.send(topic, value.encode(), partition=seq % partitions, callback=callback_for(value))
        except Exception as exc:  # noqa: BLE001 - reported; a fatal producer error ends the load
            emit(f"E FATAL {exc!r}")
            return 1
        seq += 1
        next_t += interval_s
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        elif delay < -1.0:
            next_t = time.monotonic()
    try:
        producer.flush(60)
    finally:
        producer.close(5)
    emit(f"E END sent={seq} unflushed=0")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
