"""The broker's event loop stays responsive under CPU-heavy requests (issue #25).

Compression bombs (gzip and zstd batches of zeros that inflate to
``kafkalite.message.max.uncompressed.bytes``) and produce frames of ``socket.request.max.bytes``
go to a real broker process while a probe times ApiVersions on fresh connections; the broker's
own watchdog (``kafkalite.event.loop.stall.threshold.ms``) must report no stall; so must a
24 MiB fetch, whose records arrive intact. Then: the
watchdog of an in-process broker reports a deliberate stall with the stack that caused it, and
a produce request validated on a worker thread keeps its place in the partition's append order.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v11 import request as fetch_v11

from bench.loop_probe import (
    LatencyProbe,
    bomb_produce_frame,
    max_size_produce_frame,
    produce_frame,
    recv_frame,
)
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.framing import decode_response, encode_request
from spark_kafkalite.protocol.record_batch import COMPRESSION_GZIP, decode_batches
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from tests.integration.inprocess_broker import InProcessBroker

pytestmark = pytest.mark.timeout(120)

MESSAGE_TOO_LARGE = 10
BOMB_INFLATED_BYTES = 128 << 20


def _address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def _create_topic(bootstrap: str, **configs: str) -> str:
    topic = "loop-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(timeout=15)
    return topic


def _produce(address: tuple[str, int], frame: bytes) -> tuple[int, int]:
    """(error code, base offset) of partition 0 in the answer to a produce ``frame``."""
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(frame)
        _cid, response = decode_response(0, 9, recv_frame(sock))
    partition = response.responses[0].partition_responses[0]
    return int(partition.error_code), int(partition.base_offset)


def test_bombs_and_max_size_frames_leave_the_loop_responsive(tmp_path: Path) -> None:
    overrides = {
        "kafkalite.message.max.uncompressed.bytes": str(BOMB_INFLATED_BYTES),
        "kafkalite.event.loop.stall.threshold.ms": "500",
    }
    with LocalCluster(data_dir=tmp_path / "c", config_overrides=overrides) as cluster:
        address = _address(cluster.bootstrap_servers)
        topic = _create_topic(cluster.bootstrap_servers)
        # a little over the bound: each bomb inflates until the broker gives up on it
        bombs = [bomb_produce_frame(topic, BOMB_INFLATED_BYTES + 4096, codec) for codec in ("gzip", "zstd")]
        big = max_size_produce_frame(topic, 100 << 20)  # socket.request.max.bytes
        codes: list[int] = []

        def send(frames: list[bytes]) -> None:
            for frame in frames:
                codes.append(_produce(address, frame)[0])

        loads = [[bombs[0], bombs[1]], [bombs[1], bombs[0]], [big]]
        with LatencyProbe(address, interval_s=0.05, timeout_s=5.0) as probe:
            time.sleep(0.3)
            probe.phase = "load"
            threads = [threading.Thread(target=send, args=(frames,)) for frames in loads]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(90)
            probe.phase = "after"
            time.sleep(0.2)
        summary = {"worst_s": probe.worst_s, "probes": probe.probes, "failures": probe.failures}
        assert codes == [MESSAGE_TOO_LARGE] * 5, codes
        assert probe.probes["load"] >= 5 and not probe.failures, summary
        assert probe.worst_s["load"] < 1.0, summary
        output = cluster.output(1)
        assert "event loop stalled" not in output, output[output.find("event loop stalled") :][:3000]


def test_watchdog_reports_a_deliberate_stall_with_its_stack(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = InProcessBroker(tmp_path, {"kafkalite.event.loop.stall.threshold.ms": "100"}).start()
    try:
        stats = broker.server.loop_monitor.stats
        time.sleep(0.3)
        assert stats.samples > 0 and stats.stall_episodes == 0

        def hold_the_event_loop() -> None:
            time.sleep(0.6)

        with caplog.at_level(logging.WARNING, logger="broker.event_loop_monitor"):
            broker.call(hold_the_event_loop)
            time.sleep(0.3)  # the loop ticks again: the episode ends
        assert stats.stall_episodes == 1
        assert "hold_the_event_loop" in stats.last_stall_stack
        assert stats.max_lag_ms >= 500 and stats.count_over(500) == 1
        assert 500 <= stats.last_stall_ms < 5000
        stalled = [r.getMessage() for r in caplog.records if "event loop stalled" in r.getMessage()]
        assert len(stalled) == 1 and "hold_the_event_loop" in stalled[0]
    finally:
        broker.stop()


def test_a_batch_checked_on_a_worker_keeps_its_place_in_the_append_order(tmp_path: Path) -> None:
    """A gzip batch inflating to 60 MiB is checked on a worker thread for a while; a small
    batch to the same partition sent just after it on another connection is appended after it."""
    broker = InProcessBroker(tmp_path).start()
    try:
        address = _address(broker.bootstrap_servers)
        topic = _create_topic(broker.bootstrap_servers)
        now = int(time.time() * 1000)
        heavy = produce_frame(
            topic, encode_batch([(None, bytes(60 << 20), now, [])], compression_type=COMPRESSION_GZIP)
        )
        small = produce_frame(topic, encode_batch([(None, b"small", now, [])]))
        results: dict[str, tuple[int, int]] = {}
        first = threading.Thread(target=lambda: results.setdefault("heavy", _produce(address, heavy)))
        first.start()
        deadline = time.monotonic() + 10
        while not broker.call(broker.ctx.replica_manager.append_order.pending_partitions):
            assert time.monotonic() < deadline, "the heavy batch never waited for a worker"
            time.sleep(0.002)
        results["small"] = _produce(address, small)
        first.join(30)
        assert results == {"heavy": (0, 0), "small": (0, 1)}
        assert broker.call(broker.ctx.replica_manager.append_order.pending_partitions) == 0
    finally:
        broker.stop()


def _fetch_all(address: tuple[str, int], topic: str, max_bytes: int) -> Any:
    """Partition 0 of ``topic`` from offset 0 in one sessionless Fetch v11 of ``max_bytes``."""
    request = fetch_v11.FetchRequest(
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=10),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fetch_v11.FetchTopic(
                topic=topic,
                partitions=(
                    fetch_v11.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=max_bytes,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(encode_request(request, 7, "loop-test"))
        _cid, response = decode_response(1, 11, recv_frame(sock))
    return response.responses[0].partitions[0]


def test_a_large_fetch_is_read_off_the_loop_and_arrives_whole(tmp_path: Path) -> None:
    """One Fetch of 24 MiB of one partition while a probe times ApiVersions: the broker leaves
    the data in the segment file and reads it on a worker; every record arrives intact and in
    order, and the watchdog reports no stall."""
    batch_mib, batches = 4, 6
    total_bytes = (batch_mib * batches + 1) << 20
    broker = InProcessBroker(
        tmp_path,
        {
            "message.max.bytes": str((batch_mib + 1) << 20),
            "fetch.max.bytes": str(total_bytes),
            "kafkalite.event.loop.stall.threshold.ms": "500",
        },
    ).start()
    try:
        address = _address(broker.bootstrap_servers)
        topic = _create_topic(broker.bootstrap_servers)
        now = int(time.time() * 1000)
        sent = hashlib.sha256()
        for _ in range(batches):
            values = [os.urandom(1 << 20) for _ in range(batch_mib)]
            for value in values:
                sent.update(value)
            frame = produce_frame(topic, encode_batch([(None, v, now, []) for v in values]))
            assert _produce(address, frame)[0] == 0
        stats = broker.server.loop_monitor.stats
        with LatencyProbe(address, interval_s=0.05, timeout_s=5.0) as probe:
            probe.phase = "fetch"
            partition = _fetch_all(address, topic, total_bytes)
            time.sleep(0.1)
        summary = {"worst_s": probe.worst_s, "probes": probe.probes, "failures": probe.failures}
        assert partition.error_code == 0 and partition.high_watermark == batch_mib * batches
        received = hashlib.sha256()
        offsets: list[int] = []
        for batch in decode_batches(bytes(partition.records)):
            offsets.extend(batch.offsets)
            for value in batch.values:
                received.update(value)
        assert offsets == list(range(batch_mib * batches))
        assert received.digest() == sent.digest()
        assert probe.probes["fetch"] >= 1 and not probe.failures, summary
        assert stats.stall_episodes == 0, stats.last_stall_stack
    finally:
        broker.stop()
