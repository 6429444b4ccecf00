"""Resource limits of a real broker process over real sockets (issue #14 item 2): Kafka's
``max.connections``, ``max.connections.per.ip``, ``queued.max.requests``,
``queued.max.request.bytes``, kafkalite's slow-frame timeout, and compression bombs rejected
with bounded broker memory. Small config values keep every wait short."""

from __future__ import annotations

import asyncio
import datetime
import json
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.produce.v9 import request as produce_v9

from broker.network.endpoint import Endpoint
from broker.network.request_context import RequestContext
from broker.network.socket_server import SocketServer
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.framing import decode_response, encode_request
from spark_kafkalite.protocol.record_batch_writer import encode_batch

pytestmark = pytest.mark.timeout(90)

MS = datetime.timedelta(milliseconds=1)
API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 3) + b"raw"


class Conn:
    """One raw TCP connection to the broker."""

    def __init__(self, bootstrap: str, timeout_s: float = 5.0) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self, timeout_s: float = 5.0) -> bytes:
        self.sock.settimeout(timeout_s)
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        return self._recv_exactly(size)

    def api_versions(self, timeout_s: float = 5.0) -> None:
        """Send ApiVersions v0 and check the answer's correlation id."""
        self.send_frame(API_VERSIONS_V0)
        assert self.recv_frame(timeout_s)[:4] == struct.pack(">i", 7)

    def answered_within(self, timeout_s: float) -> bool:
        self.sock.settimeout(timeout_s)
        try:
            return bool(self.sock.recv(1, socket.MSG_PEEK))
        except TimeoutError:
            return False

    def closed_by_peer(self, timeout_s: float) -> bool:
        self.sock.settimeout(timeout_s)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def _recv_exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


class Broker:
    """A one-broker LocalCluster with ``overrides``; waits until LocalCluster's readiness probe
    connection is gone, so the tests can count connections."""

    def __init__(self, tmp_path: Path, **overrides: str) -> None:
        self.cluster = LocalCluster(data_dir=tmp_path / "c", config_overrides=overrides)

    def __enter__(self) -> LocalCluster:
        self.cluster.start()
        time.sleep(0.5)
        return self.cluster

    def __exit__(self, *exc: object) -> None:
        self.cluster.stop()


@pytest.fixture
def conns() -> Iterator[list[Conn]]:
    opened: list[Conn] = []
    yield opened
    for conn in opened:
        conn.close()


def produce_frame(topic: str, records: bytes, correlation_id: int = 11) -> bytes:
    request = produce_v9.ProduceRequest(
        acks=1,
        timeout=1000 * MS,
        topic_data=(
            produce_v9.TopicProduceData(
                name=topic, partition_data=(produce_v9.PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    return encode_request(request, correlation_id, "limits-test")[4:]


def produce_error(frame: bytes) -> int:
    _cid, response = decode_response(0, 9, frame)
    return int(response.responses[0].partition_responses[0].error_code)


def create_topic(bootstrap: str) -> str:
    topic = "limits-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
    return topic


def vm_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


# -- connections ---------------------------------------------------------------------------------
def test_max_connections_makes_new_connections_wait(tmp_path: Path, conns: list[Conn]) -> None:
    with Broker(tmp_path, **{"max.connections": "2"}) as cluster:
        for _ in range(2):
            conns.append(Conn(cluster.bootstrap_servers))
            conns[-1].api_versions()
        waiting = Conn(cluster.bootstrap_servers)  # the kernel completes the handshake (backlog)
        conns.append(waiting)
        waiting.send_frame(API_VERSIONS_V0)
        assert not waiting.answered_within(1.0)  # not accepted while 2 are open
        conns[0].close()
        assert waiting.recv_frame(5.0)[:4] == struct.pack(">i", 7)  # accepted once one closed


def test_max_connections_per_ip_closes_extra_connections(tmp_path: Path, conns: list[Conn]) -> None:
    with Broker(tmp_path, **{"max.connections.per.ip": "2"}) as cluster:
        for _ in range(2):
            conns.append(Conn(cluster.bootstrap_servers))
            conns[-1].api_versions()
        extra = Conn(cluster.bootstrap_servers)
        conns.append(extra)
        assert extra.closed_by_peer(5.0)  # Kafka's TooManyConnectionsException: closed at once
        conns[0].close()
        time.sleep(0.2)
        again = Conn(cluster.bootstrap_servers)
        conns.append(again)
        again.api_versions()


# -- timeouts ------------------------------------------------------------------------------------
def test_slow_frame_is_closed_but_an_idle_connection_is_not(tmp_path: Path, conns: list[Conn]) -> None:
    overrides = {"kafkalite.socket.request.receive.timeout.ms": "500", "connections.max.idle.ms": "60000"}
    with Broker(tmp_path, **overrides) as cluster:
        idle, half_size, half_body, slow_ok = (Conn(cluster.bootstrap_servers) for _ in range(4))
        conns.extend([idle, half_size, half_body, slow_ok])
        half_size.sock.sendall(b"\x00\x00")  # 2 of the 4 size bytes, then nothing
        half_body.sock.sendall(struct.pack(">i", 100) + b"x" * 10)  # 10 of 100 body bytes
        frame = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0
        for byte in frame:  # byte by byte, done well within 500 ms
            slow_ok.sock.sendall(bytes([byte]))
            time.sleep(0.01)
        assert slow_ok.recv_frame()[:4] == struct.pack(">i", 7)
        started = time.monotonic()
        assert half_size.closed_by_peer(5.0)
        assert half_body.closed_by_peer(5.0)
        assert time.monotonic() - started < 10.0  # far below connections.max.idle.ms (60 s)
        assert not idle.closed_by_peer(1.5)  # silence between frames is connections.max.idle.ms
        idle.api_versions()


# -- request queue and memory pool ---------------------------------------------------------------
def test_queued_max_request_bytes_makes_a_request_wait(tmp_path: Path, conns: list[Conn]) -> None:
    overrides = {"queued.max.request.bytes": "1000", "kafkalite.socket.request.receive.timeout.ms": "30000"}
    with Broker(tmp_path, **overrides) as cluster:
        big, small = Conn(cluster.bootstrap_servers), Conn(cluster.bootstrap_servers)
        conns.extend([big, small])
        payload = produce_frame("no-such-topic", encode_batch([(None, b"v" * 200_000, 1, [])]))
        wire = struct.pack(">i", len(payload)) + payload
        big.sock.sendall(wire[:100_000])  # its 200 KB are taken from the pool: the pool is empty
        time.sleep(0.3)
        small.send_frame(API_VERSIONS_V0)
        assert not small.answered_within(1.0)  # waits for memory instead of failing
        big.sock.sendall(wire[100_000:])
        assert produce_error(big.recv_frame()) == 3  # UNKNOWN_TOPIC_OR_PARTITION: it was served
        assert small.recv_frame()[:4] == struct.pack(">i", 7)  # memory released: served


def test_parked_requests_free_their_queued_max_requests_slot(tmp_path: Path, conns: list[Conn]) -> None:
    """Three long-poll fetches park with ``queued.max.requests=1``: parked requests leave the
    request queue (as delayed operations leave Kafka's), so another request is served while all
    three still wait, and each is answered when its wait expires."""
    with Broker(tmp_path, **{"queued.max.requests": "1"}) as cluster:
        topic = create_topic(cluster.bootstrap_servers)
        parked = [Conn(cluster.bootstrap_servers) for _ in range(3)]
        other = Conn(cluster.bootstrap_servers)
        conns.extend([*parked, other])
        fetch = fetch_v12.FetchRequest(
            max_wait=3000 * MS,
            min_bytes=1,
            session_id=0,
            session_epoch=-1,
            topics=(
                fetch_v12.FetchTopic(
                    topic=topic,
                    partitions=(
                        fetch_v12.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        for n, conn in enumerate(parked):
            conn.sock.sendall(encode_request(fetch, 5 + n, "limits-test"))  # long-polls an empty topic
        time.sleep(0.3)
        other.api_versions(timeout_s=10.0)
        assert not any(conn.answered_within(0.01) for conn in parked)  # all three still parked
        for n, conn in enumerate(parked):
            assert conn.recv_frame(10.0)[:4] == struct.pack(">i", 5 + n)


def test_queued_max_requests_bounds_requests_being_handled() -> None:
    """The socket server lets at most ``queued_max_requests`` requests into the handler at
    once; the others wait unread until a slot frees, and a handler that releases its slot
    (``RequestContext.release_slot``, as a request parking in a purgatory does) lets the next
    one in. Counts, not timings."""

    async def run(release: bool) -> tuple[int, int]:
        inside = peak = 0
        go = asyncio.Event()

        async def handler(rctx: RequestContext, _frame: bytes | bytearray, _offset: int) -> bytes:
            nonlocal inside, peak
            inside += 1
            peak = max(peak, inside)
            if release:
                rctx.release_slot()
            await go.wait()
            inside -= 1
            return struct.pack(">ii", 4, rctx.correlation_id)

        server = SocketServer([Endpoint("PLAINTEXT", "127.0.0.1", 0)], handler, queued_max_requests=2)
        host, port = (await server.startup())["PLAINTEXT"]
        clients = [await asyncio.open_connection(host, port) for _ in range(5)]
        for n, (_reader, writer) in enumerate(clients):
            writer.write(
                struct.pack(">i", len(API_VERSIONS_V0))
                + API_VERSIONS_V0[:4]
                + struct.pack(">i", n)
                + API_VERSIONS_V0[8:]
            )
        for _ in range(100):  # until every request that may enter has entered
            await asyncio.sleep(0.01)
            if inside == (5 if release else 2):
                break
        await asyncio.sleep(0.2)
        entered = inside
        go.set()
        for n, (reader, writer) in enumerate(clients):
            assert struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), 10)) == (4, n)
            writer.close()
        await server.shutdown()
        return entered, peak

    assert asyncio.run(run(release=False)) == (2, 2)
    assert asyncio.run(run(release=True)) == (5, 5)


# -- compression bombs ---------------------------------------------------------------------------
# (snappy expands at most ~21x, so a batch within message.max.bytes cannot reach the 64 MB limit)
@pytest.mark.parametrize(
    ("codec", "inflated_mb"),
    [(4, 256), (1, 100), (3, 200)],
    ids=["zstd-256MB", "gzip-100MB", "lz4-200MB"],
)
def test_compression_bomb_is_rejected_with_bounded_memory(
    tmp_path: Path, codec: int, inflated_mb: int
) -> None:
    with Broker(tmp_path) as cluster:
        topic = create_topic(cluster.bootstrap_servers)
        pid = cluster.pid(1)
        assert pid is not None
        batch = encode_batch(
            [(None, bytes(inflated_mb << 20), int(time.time() * 1000), [])], compression_type=codec
        )
        assert len(batch) <= 1048588  # within message.max.bytes: only the inflated size is wrong
        conn = Conn(cluster.bootstrap_servers)
        try:
            conn.api_versions()
            before_kb = vm_kb(pid, "VmHWM")
            conn.send_frame(produce_frame(topic, batch))
            assert produce_error(conn.recv_frame(30.0)) == 10  # MESSAGE_TOO_LARGE
            grown_mb = (vm_kb(pid, "VmHWM") - before_kb) / 1024
            assert grown_mb < 40, f"peak RSS grew by {grown_mb:.0f} MB for a {len(batch)}-byte bomb"
            conn.api_versions()  # the connection and the broker carry on
        finally:
            conn.close()


def test_inter_broker_listener_is_protected_from_max_connections(tmp_path: Path, conns: list[Conn]) -> None:
    """KIP-402: with two listeners, the inter-broker one accepts beyond ``max.connections`` and
    the least recently active connection of the other listener is closed to make room."""
    config = tmp_path / "b.properties"
    config.write_text(
        "node.id=1\n"
        "listeners=PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT\n"
        "inter.broker.listener.name=REPLICATION\n"
        "max.connections=2\n"
        f"log.dirs={tmp_path / 'logs'}\n",
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "broker", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        endpoints_file = tmp_path / "logs" / ".broker-endpoints.json"
        deadline = time.monotonic() + 30
        while not endpoints_file.exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        listeners = json.loads(endpoints_file.read_text())["listeners"]
        oldest, newer = Conn(listeners["PLAINTEXT"]), Conn(listeners["PLAINTEXT"])
        conns.extend([oldest, newer])
        oldest.api_versions()
        time.sleep(0.05)
        newer.api_versions()
        replication = Conn(listeners["REPLICATION"])
        conns.append(replication)
        replication.api_versions()  # accepted although 2 connections are open
        assert oldest.closed_by_peer(5.0)  # the least recently active one made room
        newer.api_versions()
    finally:
        process.terminate()
        process.wait(20)
