"""The meters' cost inside the broker's request handler, in one process: an in-process broker's
``KafkaApis`` (the handler the socket server calls) serves the same Produce request (4 partitions,
one batch of ``--batch-records`` 100-byte records each, acks=1, appended to the log every time) and
the same consumer Fetch request (4 partitions from offset 0, up to 256 KB each) in blocks of
``--requests`` requests, alternating blocks with the meters on and with them made no-ops (the
error counting, the request record and the per-topic meters replaced by no-op functions between
blocks). Reported: the event-loop thread's CPU (``time.thread_time``) per request, median of the
blocks, and the ratio. No sockets, no client: what is left is the handler path itself, so the ratio
is the meters' share of the broker's CPU on the record path (the socket and event-loop work of a
real connection, which the meters do not touch, would make it smaller).

    python bench/metrics_handler_cost.py [--blocks 12] [--requests 300] [--batch-records 80]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import aa_noise, console, create_topic, emit_table, machine_summary
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import TopicName
from kio.static.primitive import i8, i16, i32, i64
from rich.table import Table

import broker.apis.kafka_apis as kafka_apis
from broker.config import KafkaConfig
from broker.metrics import meters
from broker.network.request_context import RequestContext
from broker.server import KafkaServer
from spark_kafkalite.protocol.framing import decode_request_header, encode_request
from spark_kafkalite.protocol.record_batch_writer import encode_batch

PARTITIONS = 4
TOPIC = "bench-meters"


def _nothing(*_args: Any, **_kwargs: Any) -> None:
    return None


_EMPTY: dict[int, int] = {}
_ON = {
    "record": kafka_apis.KafkaApis._record,
    "error_counts": kafka_apis.error_counts,
    "record_produce": meters.BrokerTopicStats.record_produce,
    "record_bytes_out": meters.BrokerTopicStats.record_bytes_out,
}


def _meters(on: bool) -> None:
    """Turn the request-path meters on (the real functions) or into no-ops."""
    kafka_apis.KafkaApis._record = _ON["record"] if on else _nothing  # type: ignore[method-assign]
    kafka_apis.error_counts = _ON["error_counts"] if on else (lambda _response: _EMPTY)  # type: ignore[assignment]
    meters.BrokerTopicStats.record_produce = _ON["record_produce"] if on else _nothing  # type: ignore[method-assign]
    meters.BrokerTopicStats.record_bytes_out = _ON["record_bytes_out"] if on else _nothing  # type: ignore[method-assign]


def _frame(request: Any) -> tuple[bytes, RequestContext, int]:
    frame = encode_request(request, 1, "bench")[4:]
    header, offset = decode_request_header(frame)
    return frame, RequestContext(header, "bench-0", "127.0.0.1", "PLAINTEXT", time.monotonic()), offset


def _produce_frame(batch_records: int) -> tuple[bytes, RequestContext, int]:
    now_ms = int(time.time() * 1000)
    records = [(b"key-%07d" % i, os.urandom(100), now_ms, ()) for i in range(batch_records)]
    batch = encode_batch(records)
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            TopicProduceData(
                name=TopicName(TOPIC),
                partition_data=tuple(
                    PartitionProduceData(index=i32(p), records=batch) for p in range(PARTITIONS)
                ),
            ),
        ),
    )
    return _frame(request)


def _fetch_frame() -> tuple[bytes, RequestContext, int]:
    request = FetchRequest(
        cluster_id=None,
        max_wait=datetime.timedelta(0),
        min_bytes=i32(0),
        max_bytes=i32(52428800),
        isolation_level=i8(0),
        topics=(
            FetchTopic(
                topic=TopicName(TOPIC),
                partitions=tuple(
                    FetchPartition(partition=i32(p), fetch_offset=i64(0), partition_max_bytes=i32(262144))
                    for p in range(PARTITIONS)
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    return _frame(request)


async def _block(apis: Callable[..., Any], frame: tuple[bytes, RequestContext, int], count: int) -> float:
    """Loop-thread CPU µs per request over ``count`` requests."""
    data, rctx, offset = frame
    sent, clock = rctx.timeline.sent, time.monotonic
    started = time.thread_time()
    for _ in range(count):
        if await apis(rctx, data, offset) is None:
            raise RuntimeError("no response")
        sent(clock())  # as the socket server does once the response is written
    return (time.thread_time() - started) / count * 1e6


async def _measure(args: argparse.Namespace, log_dir: Path) -> dict[str, dict[bool, list[float]]]:
    config = KafkaConfig(
        {
            "node.id": "1",
            "process.roles": "broker,controller",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
            # each block runs without yielding to the loop: no stall reports
            "kafkalite.event.loop.stall.threshold.ms": "600000",
        }
    )
    server = KafkaServer(config)
    await server.startup()
    try:
        host, port = server.bound["PLAINTEXT"]
        await asyncio.to_thread(create_topic, f"{host}:{port}", TOPIC, PARTITIONS)
        assert server.socket_server is not None
        apis = server.socket_server.handler
        produce, fetch = _produce_frame(args.batch_records), _fetch_frame()
        results: dict[str, dict[bool, list[float]]] = {
            "Produce": {True: [], False: []},
            "Fetch": {True: [], False: []},
        }
        for block in range(args.blocks):
            for on in (True, False) if block % 2 == 0 else (False, True):
                _meters(on)
                try:
                    results["Produce"][on].append(await _block(apis, produce, args.requests))
                    results["Fetch"][on].append(await _block(apis, fetch, args.requests))
                finally:
                    _meters(True)
        return results
    finally:
        await server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=12)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--batch-records", type=int, default=80)
    parser.add_argument("--quick", action="store_true", help="6 blocks of 150 requests")
    args = parser.parse_args()
    if args.quick:
        args.blocks, args.requests = 6, 150
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="kafkalite-bench-meters-") as tmp:
        results = asyncio.run(_measure(args, Path(tmp)))
    title = (
        f"meters in the request handler: {args.blocks} blocks of {args.requests} requests each way, "
        f"{PARTITIONS} partitions x {args.batch_records} records of 100 bytes per Produce, Fetch of "
        f"{PARTITIONS} x 256 KB from offset 0; loop-thread CPU per request, median of the blocks; "
        f"A/A noise: the median |ratio - 1| of each block to the next block of the same state (the "
        f"difference unchanged code shows here: an on / off ratio within it is not an effect); "
        f"load average {load:.1f} at start"
    )
    columns = [
        "request",
        "meters on µs",
        "meters off µs",
        "on / off",
        "per block on / off",
        "A/A noise ±%",
        "A/A: next block / block, same state",
    ]
    rows = []
    for name, by_state in results.items():
        on, off = statistics.median(by_state[True]), statistics.median(by_state[False])
        pairs = ", ".join(f"{a / b:.3f}" for a, b in zip(by_state[True], by_state[False], strict=True))
        noise, ratios = aa_noise(by_state[True], by_state[False])
        rows.append(
            [
                name,
                f"{on:.1f}",
                f"{off:.1f}",
                f"{on / off:.3f}",
                pairs,
                f"{noise:.1f}",
                ", ".join(f"{r:.3f}" for r in ratios),
            ]
        )
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(machine_summary())
    emit_table(title, columns, rows)


if __name__ == "__main__":
    main()
