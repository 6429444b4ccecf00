"""Event-loop responsiveness of one broker under CPU-heavy work (issue #25).

A probe opens a fresh connection every 0.1 s and times one ApiVersions round trip (what every
client, follower and controller heartbeat waits for); the table gives the worst and median probe
per scenario, beside the idle broker's figures measured in the same run, and the broker's own
figures (its watchdog's stall episodes over ``kafkalite.event.loop.stall.threshold.ms``):

- ``compression bombs``: 4 connections each send zstd and gzip batches of zeros inflating past
  ``kafkalite.message.max.uncompressed.bytes`` (64 MiB);
- ``CreateTopics 4,000 partitions`` (1,000 with ``--quick``): one CreateTopics request
  (confluent-kafka's AdminClient);
- ``log compaction``: the cleaner compacts a log of ``--compact-mb`` MB of keyed records;
- ``100 MB fetch``: a consumer fetches a 100 MB partition in one Fetch
  (``fetch.max.bytes`` = ``max.partition.fetch.bytes`` = 100 MB);
- ``max-size frames``: 4 produce frames of ``socket.request.max.bytes`` at once.

The goal: no probe waits more than 0.5 s on a quiet machine. Run::

    python bench/loop_latency.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.table import Table  # noqa: E402

from bench._common import console, emit_table, machine_summary  # noqa: E402
from bench.loop_probe import LatencyProbe, bomb_produce_frame, max_size_produce_frame, recv_frame  # noqa: E402
from spark_kafkalite.local_cluster import LocalCluster  # noqa: E402

_MB = 1 << 20


def _admin(bootstrap: str):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    futures = admin.create_topics(
        [NewTopic(topic, partitions, 1, config=configs or {})], operation_timeout=120
    )
    futures[topic].result(timeout=180)


def _send(address: tuple[str, int], frame: bytes) -> None:
    with socket.create_connection(address, timeout=120) as sock:
        sock.sendall(frame)
        recv_frame(sock)


def _in_threads(targets: list[Callable[[], None]]) -> None:
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)


def _bombs(address: tuple[str, int], bootstrap: str, quick: bool) -> str:
    topic = "bombs-" + uuid.uuid4().hex[:6]
    _create(bootstrap, topic, 1)
    frames = [bomb_produce_frame(topic, 64 * _MB + 4096, codec) for codec in ("zstd", "gzip")]
    per_connection = 2 if quick else 4
    _in_threads(
        [lambda i=i: [_send(address, frames[(i + k) % 2]) for k in range(per_connection)] for i in range(4)]
    )
    return f"{4 * per_connection} bombs, {len(frames[0]) >> 10} KB zstd / {len(frames[1]) >> 10} KB gzip"


def _create_topics(address: tuple[str, int], bootstrap: str, quick: bool) -> str:
    partitions = 1000 if quick else 4000
    started = time.monotonic()
    _create(bootstrap, "many-" + uuid.uuid4().hex[:6], partitions)
    return f"{partitions} partitions created in {time.monotonic() - started:.1f} s"


def _fill(bootstrap: str, topic: str, total_bytes: int, keys: int | None) -> int:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 20,
            "batch.size": 1000000,
            "compression.type": "none",
        }
    )
    value = os.urandom(1000)
    count = total_bytes // len(value)
    for i in range(count):
        key = b"k%06d" % (i % keys) if keys else None
        while True:
            try:
                producer.produce(topic, value=value, key=key, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300):
        raise TimeoutError("records not delivered")
    return count


def _compaction(output: Callable[[], str], bootstrap: str, compact_mb: int) -> Callable[[], str]:
    """Fill a topic (``cleanup.policy=delete`` while filling), return the step that switches it
    to ``compact`` and waits until the cleaner has cleaned it."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    topic = "compact-" + uuid.uuid4().hex[:6]
    _create(bootstrap, topic, 1, {"segment.bytes": str(16 * _MB), "min.cleanable.dirty.ratio": "0.01"})
    count = _fill(bootstrap, topic, compact_mb * _MB, keys=1000)

    def compact() -> str:
        started = time.monotonic()
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        admin = _admin(bootstrap)
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        while time.monotonic() - started < 300:
            match = re.search(rf"{topic}-0: cleaned (\d+) segment", output())
            if match:
                return (
                    f"{count} records ({compact_mb} MB), {match.group(1)} segments cleaned "
                    f"in {time.monotonic() - started:.1f} s"
                )
            time.sleep(0.2)
        return "cleaning did not finish within 300 s"

    return compact


def _big_fetch(bootstrap: str, fetch_mb: int) -> Callable[[], str]:
    topic = "fetch-" + uuid.uuid4().hex[:6]
    _create(bootstrap, topic, 1)
    count = _fill(bootstrap, topic, fetch_mb * _MB, keys=None)

    def fetch() -> str:
        import confluent_kafka

        consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "loop-" + uuid.uuid4().hex[:6],
                "fetch.max.bytes": fetch_mb * _MB + _MB,
                "max.partition.fetch.bytes": fetch_mb * _MB + _MB,
                "receive.message.max.bytes": fetch_mb * _MB + 2 * _MB,
                "fetch.wait.max.ms": 10,
            }
        )
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        seen = 0
        started = time.monotonic()
        while seen < count and time.monotonic() - started < 120:
            seen += sum(1 for m in consumer.consume(100000, timeout=1.0) if m.error() is None)
        consumer.close()
        return f"{seen} of {count} records ({fetch_mb} MB) read in {time.monotonic() - started:.1f} s"

    return fetch


def _max_frames(address: tuple[str, int], bootstrap: str) -> str:
    topic = "frames-" + uuid.uuid4().hex[:6]
    _create(bootstrap, topic, 1)
    frame = max_size_produce_frame(topic, 100 * _MB)
    _in_threads([lambda: _send(address, frame) for _ in range(4)])
    return f"4 x {len(frame) >> 20} MB produce frames"


def _stalls(log: str) -> str:
    """Stall episodes the broker's watchdog logged in ``log``, with the innermost frame of our
    code in each one's stack."""
    sites = []
    for block in log.split("event loop stalled")[1:]:
        ours = [
            line.strip()
            for line in block.split("\n[", 1)[0].splitlines()
            if line.strip().startswith("File ") and ("/broker/" in line or "/spark_kafkalite/" in line)
        ]
        match = re.match(r'File "(.*)", line (\d+), in (.*)', ours[-1]) if ours else None
        sites.append(
            f"{Path(match.group(1)).name}:{match.group(2)} {match.group(3)}" if match else "outside our code"
        )
    return f"{len(sites)} ({'; '.join(sites)})" if sites else "0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller scenarios")
    parser.add_argument("--compact-mb", type=int, default=None, help="size of the log to compact")
    args = parser.parse_args()
    compact_mb = args.compact_mb or (100 if args.quick else 400)
    fetch_mb = 100
    overrides = {
        "fetch.max.bytes": str(fetch_mb * _MB + _MB),
        "message.max.bytes": str(2 * _MB),
        "log.cleaner.backoff.ms": "500",
        "log.initial.task.delay.ms": "0",
    }
    rows: list[list[str]] = []
    load_start = os.getloadavg()[0]
    with LocalCluster(config_overrides=overrides) as cluster:
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        address = (host, int(port))
        bootstrap = cluster.bootstrap_servers

        def measure(name: str, step: Callable[[], str]) -> None:
            seen = len(cluster.output(1))
            with LatencyProbe(address, interval_s=0.1, timeout_s=30.0, phase=name) as probe:
                started = time.monotonic()
                note = step()
                elapsed = time.monotonic() - started
            answered = probe.answered_s.get(name, [])
            rows.append(
                [
                    name,
                    f"{probe.worst_s.get(name, 0.0) * 1000:,.0f}",
                    f"{statistics.median(answered) * 1000:,.1f}" if answered else "-",
                    str(probe.probes.get(name, 0)),
                    str(probe.failures.get(name, 0)),
                    _stalls(cluster.output(1)[seen:]),
                    f"{elapsed:.1f}",
                    note,
                ]
            )
            console.print(rows[-1])

        measure("idle", lambda: time.sleep(3.0) or "no load")
        measure("compression bombs", lambda: _bombs(address, bootstrap, args.quick))
        measure(
            f"CreateTopics {1000 if args.quick else 4000:,} partitions",
            lambda: _create_topics(address, bootstrap, args.quick),
        )
        measure("max-size frames", lambda: _max_frames(address, bootstrap))
        fetch = _big_fetch(bootstrap, fetch_mb)
        measure(f"{fetch_mb} MB fetch", fetch)
        compact = _compaction(lambda: cluster.output(1), bootstrap, compact_mb)
        measure("log compaction", compact)
    columns = [
        "scenario",
        "worst probe ms",
        "median probe ms",
        "probes",
        "unanswered",
        "stalls (where)",
        "s",
        "work",
    ]
    title = f"ApiVersions probe on a fresh connection every 0.1 s (goal: worst <= 500 ms); {machine_summary()}; load {load_start:.1f} -> {os.getloadavg()[0]:.1f}"
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in ("scenario", "work") else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    emit_table(title, columns, rows)


if __name__ == "__main__":
    main()
