"""A TCP proxy for fault tests that understands Kafka framing just enough to lose responses.

``ResponseDroppingProxy`` listens on 127.0.0.1 (port chosen at construction, before the broker
starts, so the broker can advertise it) and forwards each client connection to the broker.
When ``drop_produce_responses`` is > 0, the next response to a Produce request is not delivered:
both sockets are closed after the broker has handled the request, exactly the "request reached
the broker, the response was lost" case that idempotence must survive.
"""

from __future__ import annotations

import socket
import struct
import threading

__all__ = ["ResponseDroppingProxy", "free_port"]

_PRODUCE = 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except OSError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    body = _read_exact(sock, size)
    return None if body is None else head + body


class ResponseDroppingProxy:
    """See module docstring. ``target`` is set (``set_target``) once the broker is up."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = int(self._listener.getsockname()[1])
        self.target: tuple[str, int] | None = None
        self.drop_produce_responses = 0
        self.dropped = 0
        self.produce_requests = 0
        self._lock = threading.Lock()
        self._closed = False
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def set_target(self, host: str, port: int) -> None:
        self.target = (host, port)

    def close(self) -> None:
        self._closed = True
        for s in [self._listener, *self._socks]:
            try:
                s.close()
            except OSError:
                pass

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.target is None:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            self._socks += [client, upstream]
            produce_ids: set[int] = set()
            threading.Thread(target=self._c2s, args=(client, upstream, produce_ids), daemon=True).start()
            threading.Thread(target=self._s2c, args=(client, upstream, produce_ids), daemon=True).start()

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def _c2s(self, client: socket.socket, upstream: socket.socket, produce_ids: set[int]) -> None:
        while True:
            frame = _read_frame(client)
            if frame is None:
                self._shut(client, upstream)
                return
            api_key, _, correlation_id = struct.unpack_from(">hhi", frame, 4)
            if api_key == _PRODUCE:
                with self._lock:
                    self.produce_requests += 1
                produce_ids.add(correlation_id)
            try:
                upstream.sendall(frame)
            except OSError:
                self._shut(client, upstream)
                return

    def _s2c(self, client: socket.socket, upstream: socket.socket, produce_ids: set[int]) -> None:
        while True:
            frame = _read_frame(upstream)
            if frame is None:
                self._shut(client, upstream)
                return
            (correlation_id,) = struct.unpack_from(">i", frame, 4)
            if correlation_id in produce_ids:
                produce_ids.discard(correlation_id)
                with self._lock:
                    drop = self.drop_produce_responses > 0
                    if drop:
                        self.drop_produce_responses -= 1
                        self.dropped += 1
                if drop:
                    self._shut(client, upstream)
                    return
            try:
                client.sendall(frame)
            except OSError:
                self._shut(client, upstream)
                return
