"""TCP proxies for network partitions between broker processes and between clients and brokers.

One :class:`LinkProxy` listens in front of each broker listener (its PLAINTEXT listener: clients
and replica fetchers; its CONTROLLER listener: the Raft links of the controller quorum). Brokers
advertise the proxy ports (``advertised.listeners``, ``controller.quorum.voters``) and bind the
real ones, so every byte between two brokers, and between a client and a broker, passes a proxy.

Every accepted connection is attributed to the process at its other end (``/proc/net/tcp`` gives
the socket inode of the peer port, ``/proc/<pid>/fd`` the process that holds it): a broker (its
node id), the load-generating client (``CLIENT``), or anything else (the harness's own metadata
and verification connections, never faulted). :class:`Links` holds the faults, symmetric per
pair of endpoints and per kind of link (``KAFKA`` or ``RAFT``):

- ``DROP``: open connections are reset and new ones closed at once (a refused/reset link);
- ``BLACKHOLE``: connections stay open but no byte is forwarded in either direction (packets
  lost: the peers see silence until their own timeouts); when the fault heals the bytes held so
  far are delivered late, as TCP would retransmit them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable

__all__ = ["BLACKHOLE", "CLIENT", "DROP", "KAFKA", "OBSERVER", "RAFT", "LinkProxy", "Links"]

KAFKA = "kafka"
RAFT = "raft"
DROP = "drop"
BLACKHOLE = "blackhole"
CLIENT = "client"
OBSERVER = "observer"

Endpoint = int | str  # a broker node id, CLIENT or OBSERVER


class Links:
    """The faulted links: (kind, {a, b}) -> mode. Thread-safe; proxies consult it per chunk."""

    def __init__(self) -> None:
        self._faults: dict[tuple[str, frozenset[Endpoint]], str] = {}
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def block(self, kind: str, a: Endpoint, b: Endpoint, mode: str) -> None:
        with self._lock:
            self._faults[(kind, frozenset((a, b)))] = mode
        for listener in list(self._listeners):
            listener()

    def heal_all(self) -> None:
        with self._lock:
            self._faults.clear()

    def mode(self, kind: str, a: Endpoint, b: Endpoint) -> str | None:
        if a == OBSERVER or b == OBSERVER:
            return None
        with self._lock:
            return self._faults.get((kind, frozenset((a, b))))

    def describe(self) -> list[str]:
        with self._lock:
            return sorted(
                f"{kind}:{'-'.join(map(str, sorted(pair, key=str)))}={m}"
                for (kind, pair), m in self._faults.items()
            )

    def on_block(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)


class _Pipe:
    """One proxied connection: ``src`` (attributed peer) -> the proxy's destination broker."""

    def __init__(
        self, proxy: LinkProxy, client: socket.socket, upstream: socket.socket, src: Endpoint
    ) -> None:
        self.proxy, self.client, self.upstream, self.src = proxy, client, upstream, src
        self.closed = False

    def mode(self) -> str | None:
        return self.proxy.links.mode(self.proxy.kind, self.src, self.proxy.dst)

    def close(self) -> None:
        self.closed = True
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self.proxy._forget(self)

    def pump(self, reader: socket.socket, writer: socket.socket) -> None:
        try:
            while not self.closed:
                try:
                    data = reader.recv(65536)
                except OSError:
                    break
                if not data:
                    break
                while (mode := self.mode()) == BLACKHOLE and not self.closed:
                    time.sleep(0.02)
                if mode == DROP or self.closed:
                    break
                try:
                    writer.sendall(data)
                except OSError:
                    break
        finally:
            self.close()


class LinkProxy:
    """Forwards 127.0.0.1:``port`` to the destination broker ``dst`` (``kind`` link), applying
    the faults of ``links`` to each connection according to its attributed source.

    Args:
        dst: node id of the broker behind this proxy.
        kind: KAFKA (PLAINTEXT listener) or RAFT (CONTROLLER listener).
        links: the shared fault table.
        owners: returns {pid: endpoint} of the processes to attribute (brokers, the client).
    """

    def __init__(self, dst: int, kind: str, links: Links, owners: Callable[[], dict[int, Endpoint]]) -> None:
        self.dst, self.kind, self.links, self._owners = dst, kind, links, owners
        self.target: tuple[str, int] | None = None
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._pipes: set[_Pipe] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.connections_by_source: dict[Endpoint, int] = {}
        links.on_block(self._apply_drops)
        threading.Thread(target=self._accept_loop, name=f"proxy-{kind}-{dst}", daemon=True).start()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            pipes = list(self._pipes)
        for pipe in pipes:
            pipe.close()

    def _forget(self, pipe: _Pipe) -> None:
        with self._lock:
            self._pipes.discard(pipe)

    def _apply_drops(self) -> None:
        with self._lock:
            pipes = list(self._pipes)
        for pipe in pipes:
            if pipe.mode() == DROP:
                pipe.close()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, (_host, peer_port) = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client, peer_port), daemon=True).start()

    def _serve(self, client: socket.socket, peer_port: int) -> None:
        src = owner_of_connection(peer_port, self.port, self._owners())
        self.connections_by_source[src] = self.connections_by_source.get(src, 0) + 1
        mode = self.links.mode(self.kind, src, self.dst)
        if mode == DROP or self.target is None:
            with contextlib.suppress(OSError):
                client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
            upstream.settimeout(None)
        except OSError:
            with contextlib.suppress(OSError):
                client.close()
            return
        pipe = _Pipe(self, client, upstream, src)
        with self._lock:
            self._pipes.add(pipe)
        threading.Thread(target=pipe.pump, args=(client, upstream), daemon=True).start()
        pipe.pump(upstream, client)


def _socket_inode(peer_port: int, proxy_port: int) -> str | None:
    """Inode of the peer's socket 127.0.0.1:peer_port -> 127.0.0.1:proxy_port (/proc/net/tcp)."""
    local = f"0100007F:{peer_port:04X}"
    remote = f"0100007F:{proxy_port:04X}"
    with contextlib.suppress(OSError), open("/proc/net/tcp", encoding="ascii") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 9 and parts[1] == local and parts[2] == remote:
                return parts[9]
    return None


def owner_of_connection(peer_port: int, proxy_port: int, owners: dict[int, Endpoint]) -> Endpoint:
    """The endpoint (of ``owners``: pid -> endpoint) whose process holds the connecting socket;
    OBSERVER for any other process."""
    inode = _socket_inode(peer_port, proxy_port)
    if inode is None:
        return OBSERVER
    target = f"socket:[{inode}]"
    for pid, endpoint in owners.items():
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError):
                if os.readlink(f"{fd_dir}/{fd}") == target:
                    return endpoint
    return OBSERVER
