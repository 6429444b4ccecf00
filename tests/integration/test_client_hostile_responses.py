"""Our client against a broker that answers with hostile responses (issue #14 item 1): a huge
array count in a Metadata response once made kio's native decoder abort the whole process (Rust
OOM). The client must raise a clean KafkaError and keep working.

The peer is a tiny fake broker on 127.0.0.1 (a real socket): it answers ApiVersions properly and
every Metadata request with the hostile frame.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from broker.apis.api_versions import api_versions_response
from broker.apis.supported_apis import SUPPORTED_APIS
from spark_kafkalite.client import KafkaAdminClient
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError
from spark_kafkalite.protocol.framing import decode_request_header, encode_response

pytestmark = pytest.mark.timeout(60)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError
        buf += chunk
    return buf


def _hostile_metadata(correlation_id: int, version: int) -> bytes:
    """Correlation id, header tags when flexible, throttle_time, then a brokers count of
    0xFFFFFFFE (compact) or 0x7FFFFFFF (legacy), then nothing."""
    if version >= 9:
        payload = (
            struct.pack(">i", correlation_id) + b"\x00" + struct.pack(">i", 0) + bytes.fromhex("ffffffff0f")
        )
    else:
        payload = struct.pack(">i", correlation_id) + struct.pack(">ii", 0, 0x7FFFFFFF)
    return struct.pack(">i", len(payload)) + payload


@pytest.fixture
def hostile_broker() -> Iterator[tuple[str, list[int]]]:
    server = socket.create_server(("127.0.0.1", 0))
    ranges = [(int(s.api_key), *s.advertised_range) for s in SUPPORTED_APIS]
    metadata_requests: list[int] = []

    def serve(conn: socket.socket) -> None:
        with conn:
            try:
                while True:
                    size = struct.unpack(">i", _recv_exactly(conn, 4))[0]
                    header, _ = decode_request_header(_recv_exactly(conn, size))
                    if header.api_key == 18:
                        response = api_versions_response(header.api_version, ErrorCode.none, ranges)
                        conn.sendall(encode_response(response, header.correlation_id))
                    else:
                        metadata_requests.append(header.api_version)
                        conn.sendall(_hostile_metadata(header.correlation_id, header.api_version))
            except (ConnectionError, OSError):
                pass

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}", metadata_requests
    server.close()


def test_huge_count_in_metadata_response_raises_cleanly(hostile_broker: tuple[str, list[int]]) -> None:
    bootstrap, metadata_requests = hostile_broker
    admin = KafkaAdminClient(
        {"bootstrap.servers": bootstrap, "default.api.timeout.ms": 3000, "request.timeout.ms": 1000}
    )
    try:
        for _ in range(2):  # and again: the client is still usable after the first failure
            with pytest.raises(KafkaError):
                admin.list_topics(timeout_ms=3000)
    finally:
        admin.close()
    assert metadata_requests  # the hostile answer was really delivered
