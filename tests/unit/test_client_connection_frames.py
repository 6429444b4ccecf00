"""``Connection.read_frames``: large response frames reuse the previous frame's buffer only when
no view of it is alive (a decoded entity or a caller holding the frame keeps its bytes)."""

from __future__ import annotations

import socket
import struct

from spark_kafkalite.client.connection import Connection


def _connection_with_peer() -> tuple[Connection, socket.socket]:
    ours, peer = socket.socketpair()
    ours.setblocking(False)
    conn = Connection(1, "127.0.0.1", 0)
    conn.sock = ours
    return conn, peer


def _read_one(conn: Connection, peer: socket.socket, payload: bytes) -> memoryview:
    peer.sendall(struct.pack(">i", len(payload)) + payload)
    frames: list[memoryview] = []
    while not frames:
        frames = conn.read_frames()
    assert len(frames) == 1
    return frames[0]


def test_large_frames_reuse_a_free_buffer_and_never_one_still_referenced() -> None:
    conn, peer = _connection_with_peer()
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    try:
        size = 200 * 1024
        first = _read_one(conn, peer, b"a" * size)
        assert bytes(first) == b"a" * size
        held = first.obj
        second = _read_one(conn, peer, b"b" * (size - 10))  # the first frame is still referenced
        assert second.obj is not held
        assert bytes(first) == b"a" * size  # untouched
        assert bytes(second) == b"b" * (size - 10)
        spare = second.obj
        del first, second, held
        third = _read_one(conn, peer, b"c" * (size - 20))  # nothing references the spare now
        assert third.obj is spare
        assert len(third) == size - 20 and bytes(third) == b"c" * (size - 20)
        small = _read_one(conn, peer, b"d" * 100)  # small frames get their own buffer
        assert small.obj is not spare and bytes(small) == b"d" * 100
    finally:
        peer.close()
        assert conn.sock is not None
        conn.sock.close()
