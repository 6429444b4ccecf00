"""Per-node connection for the ``NetworkClient``: a non-blocking socket with its send queue and
frame reassembly (Java ``KafkaChannel``), the in-flight queue (``InFlightRequests``), requests
waiting to be sent, and reconnect-backoff state (``ClusterConnectionStates``).

For SSL and SASL_SSL the connected socket is wrapped by the standard library's ``ssl`` and the
TLS handshake is driven step by step without blocking (Java ``SslTransportLayer``): each
:meth:`Connection.tls_handshake_step` runs when the selector reports the socket ready; reads and
writes afterwards treat ``SSLWantReadError`` / ``SSLWantWriteError`` as "would block" and a
read drains every record OpenSSL has buffered before returning.

Socket methods raise ``OSError`` (or ``ConnectionError`` when the peer closed); the
``NetworkClient`` turns those into a failed connection. The TLS handshake raises
``SslAuthenticationError`` when the broker's certificate is refused (or ours is) and
``ConnectionError`` when the broker closes the connection during the handshake.
"""

from __future__ import annotations

import enum
import errno
import selectors
import socket
import ssl
import struct
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.errors import SslAuthenticationError
from spark_kafkalite.client.request_future import RequestFuture

if TYPE_CHECKING:
    from spark_kafkalite.client.security.sasl_authenticator import SaslClientAuthenticator

__all__ = ["ConnectionState", "Connection", "InFlightRequest", "PendingRequest", "SETUP_STATES"]

_SIZE = struct.Struct(">i")
_RECV_CHUNK = 4 * 1024 * 1024
_REUSE_MIN_BYTES = 64 * 1024
"""Response frames at least this large are received into the connection's previous large
buffer when no view of it is alive any more (a fresh multi-MiB bytearray is zero-filled and
page-faulted each time: measurable per fetch response of a columnar reader)."""


def _unexported(buf: bytearray) -> bool:
    """True when no buffer view (memoryview, decoded zero-copy slice) of ``buf`` is alive: a
    bytearray with live exports refuses to resize."""
    try:
        buf.append(0)
    except BufferError:
        return False
    del buf[-1]
    return True


_CONNECT_IN_PROGRESS = {0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN}
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class ConnectionState(enum.Enum):
    """Set-up order: CONNECTING (TCP) -> TLS_HANDSHAKE (SSL, SASL_SSL) -> CHECKING_API_VERSIONS
    -> AUTHENTICATING (SASL_*) -> READY."""

    DISCONNECTED = 0
    CONNECTING = 1
    CHECKING_API_VERSIONS = 2
    READY = 3
    TLS_HANDSHAKE = 4
    AUTHENTICATING = 5


SETUP_STATES = (ConnectionState.CONNECTING, ConnectionState.TLS_HANDSHAKE, ConnectionState.AUTHENTICATING)
"""States bounded by ``socket.connection.setup.timeout.ms``."""


@dataclass(slots=True)
class InFlightRequest:
    """A request written (or being written) to the socket, awaiting its response."""

    correlation_id: int
    api_key: int
    api_version: int
    future: RequestFuture | None  # None for the internal ApiVersions and SASL requests
    deadline_ms: float
    internal: bool


@dataclass(slots=True)
class PendingRequest:
    """A request queued until the connection is ready and under the in-flight limit."""

    request: Any  # RequestBuilder or kio entity
    future: RequestFuture
    deadline_ms: float
    expect_response: bool


class Connection:
    """Socket, buffers, queues and backoff state of one node."""

    def __init__(self, node_id: int, host: str, port: int) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.sock: socket.socket | None = None
        self.state = ConnectionState.DISCONNECTED
        self.events = 0
        self.api_versions: dict[int, tuple[int, int]] | None = None
        self.in_flight: deque[InFlightRequest] = deque()
        self.pending: deque[PendingRequest] = deque()
        self.send_queue: deque[memoryview] = deque()
        self.size_buf = bytearray(4)
        self.size_pos = 0
        self.payload: bytearray | None = None
        self.payload_size = 0
        self.payload_pos = 0
        self.spare: bytearray | None = None  # the last large frame buffer, reused when free
        self.connect_deadline_ms = 0.0
        self.next_attempt_ms = 0.0
        self.failures = 0
        self.last_error = ""
        self.auth_error: Exception | None = None  # the last TLS/SASL refusal, until a set-up succeeds
        self.authenticator: SaslClientAuthenticator | None = None
        self.tls_want_write = False
        self.eof = False

    @property
    def load(self) -> int:
        """Requests in flight or waiting to be sent."""
        return len(self.in_flight) + len(self.pending)

    def next_deadline_ms(self) -> float:
        """The earliest connect / request deadline of this connection (inf when none)."""
        deadline = self.connect_deadline_ms if self.state in SETUP_STATES else float("inf")
        for request in self.in_flight:
            deadline = min(deadline, request.deadline_ms)
        for pending in self.pending:
            deadline = min(deadline, pending.deadline_ms)
        return deadline

    def take_expired_pending(self, now_ms: float) -> list[PendingRequest]:
        """Remove and return queued (unsent) requests whose deadline passed."""
        if not any(now_ms >= p.deadline_ms for p in self.pending):
            return []
        expired = [p for p in self.pending if now_ms >= p.deadline_ms]
        self.pending = deque(p for p in self.pending if now_ms < p.deadline_ms)
        return expired

    def reset_buffers(self) -> None:
        self.send_queue.clear()
        self.size_pos = 0
        self.payload = None
        self.payload_pos = 0
        self.spare = None
        self.events = 0
        self.authenticator = None
        self.tls_want_write = False
        self.eof = False

    # -------------------------------------------------------------- socket lifecycle

    def open(self, selector: selectors.BaseSelector) -> None:
        """Start a non-blocking connect and register with ``selector``. Raises ``OSError``."""
        self.reset_buffers()
        infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        family, socktype, proto, _canon, sockaddr = infos[0]
        sock = socket.socket(family, socktype, proto)
        self.sock = sock
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        err = sock.connect_ex(sockaddr)
        if err not in _CONNECT_IN_PROGRESS:
            raise OSError(err, f"connect to {self.host}:{self.port} failed: {errno.errorcode.get(err, err)}")
        self.events = selectors.EVENT_READ | selectors.EVENT_WRITE
        selector.register(sock, self.events, self)

    def finish_connect(self) -> None:
        """Check the outcome of the connect once the socket is writable. Raises ``OSError``."""
        if self.sock is None:
            raise RuntimeError(f"finish_connect on node {self.node_id}'s connection, which has no socket")
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err != 0:
            raise OSError(err, f"connect to {self.host}:{self.port} failed: {errno.errorcode.get(err, err)}")

    def start_tls(
        self, selector: selectors.BaseSelector, context: ssl.SSLContext, server_hostname: str
    ) -> None:
        """Wrap the connected socket for TLS (SNI and the hostname check use ``server_hostname``;
        Python sends no SNI for an IP literal, as librdkafka). The handshake is left to
        :meth:`tls_handshake_step`."""
        if self.sock is None:
            raise RuntimeError(f"start_tls on node {self.node_id}'s connection, which has no socket")
        selector.unregister(self.sock)
        plain, self.sock = self.sock, None
        self.sock = context.wrap_socket(plain, server_hostname=server_hostname, do_handshake_on_connect=False)
        self.state = ConnectionState.TLS_HANDSHAKE
        self.events = selectors.EVENT_READ | selectors.EVENT_WRITE
        selector.register(self.sock, self.events, self)

    def tls_handshake_step(self, selector: selectors.BaseSelector) -> bool:
        """Advance the TLS handshake; True once it is complete.

        Raises:
            SslAuthenticationError: certificate verification failed on either side, or the
                peer does not speak TLS.
            ConnectionError: the broker closed the connection during the handshake.
        """
        sock = self.sock
        if not isinstance(sock, ssl.SSLSocket):
            raise RuntimeError(f"TLS handshake on node {self.node_id}'s connection before start_tls")
        where = f"node {self.node_id} ({self.host}:{self.port})"
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self.tls_want_write = False
            self.set_interest(selector)
            return False
        except ssl.SSLWantWriteError:
            self.tls_want_write = True
            self.set_interest(selector)
            return False
        except ssl.SSLCertVerificationError as exc:
            raise SslAuthenticationError(
                f"TLS handshake with {where} failed: the broker's certificate was not accepted: "
                f"{exc.verify_message} (check ssl.ca.location / ssl.truststore.* and "
                f"ssl.endpoint.identification.algorithm)"
            ) from None
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionError) as exc:
            raise ConnectionError(
                f"TLS handshake with {where} failed: the broker closed the connection "
                f"({type(exc).__name__}; is this a TLS listener?)"
            ) from None
        except ssl.SSLError as exc:
            raise SslAuthenticationError(
                f"TLS handshake with {where} failed: {exc.reason or exc} "
                f"(a plaintext listener, or the broker refused the client certificate?)"
            ) from None
        self.tls_want_write = False
        return True

    def close_socket(self, selector: selectors.BaseSelector) -> None:
        if self.sock is not None:
            try:
                selector.unregister(self.sock)
            except (KeyError, ValueError):  # not registered, or the socket is already closed
                pass
            self.sock.close()
            self.sock = None
        self.reset_buffers()

    def set_interest(self, selector: selectors.BaseSelector) -> None:
        """Watch for writability only while connecting or while data waits to be written."""
        if self.sock is None:
            return
        events = selectors.EVENT_READ
        if self.state is ConnectionState.CONNECTING or self.send_queue or self.tls_want_write:
            events |= selectors.EVENT_WRITE
        if events != self.events:
            selector.modify(self.sock, events, self)
            self.events = events

    # -------------------------------------------------------------- I/O

    def write(self, frame: bytes, selector: selectors.BaseSelector) -> None:
        """Send ``frame`` now as far as the socket allows; queue the rest. Raises ``OSError``."""
        if self.sock is None:
            return
        if not self.send_queue and self.state is not ConnectionState.CONNECTING:
            try:
                sent = self.sock.send(frame)
            except _WOULD_BLOCK:  # TLS: retried later with the same bytes, as OpenSSL requires
                sent = 0
            if sent == len(frame):
                return
            self.send_queue.append(memoryview(frame)[sent:])
        else:
            self.send_queue.append(memoryview(frame))
        self.set_interest(selector)

    def flush(self, selector: selectors.BaseSelector) -> None:
        """Write queued data while the socket accepts it. Raises ``OSError``."""
        while self.send_queue and self.sock is not None:
            view = self.send_queue[0]
            try:
                sent = self.sock.send(view)
            except _WOULD_BLOCK:
                break
            if sent == len(view):
                self.send_queue.popleft()
            else:
                self.send_queue[0] = view[sent:]
                break
        self.set_interest(selector)

    def _frame_buffer(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes for the next frame: the spare large buffer when
        it fits (not more than twice the size) and nothing references it any more, else a new
        one (kept as the spare when large)."""
        if size < _REUSE_MIN_BYTES:
            return bytearray(size)
        spare = self.spare
        if spare is not None and size <= len(spare) <= 2 * size and _unexported(spare):
            return spare
        self.spare = bytearray(size)
        return self.spare

    def read_frames(self) -> list[memoryview]:
        """Read what the socket has; return complete response frames (without size prefix) as
        read-only views (kio's reader wants read-only buffers). Sets ``eof`` when the peer closed.
        Raises ``OSError`` / ``ValueError`` (bad size)."""
        frames: list[memoryview] = []
        sock = self.sock
        while sock is not None:
            try:
                if self.payload is None:
                    n = sock.recv_into(memoryview(self.size_buf)[self.size_pos :])
                else:
                    want = min(self.payload_size - self.payload_pos, _RECV_CHUNK)
                    n = sock.recv_into(memoryview(self.payload)[self.payload_pos : self.payload_pos + want])
            except _WOULD_BLOCK:
                break
            if n == 0:
                self.eof = True  # the caller handles ``frames`` first, then closes
                break
            if self.payload is None:
                self.size_pos += n
                if self.size_pos == 4:
                    size = _SIZE.unpack(self.size_buf)[0]
                    if size < 4:
                        raise ValueError(f"invalid response size {size} from node {self.node_id}")
                    self.payload = self._frame_buffer(size)
                    self.payload_size = size
                    self.payload_pos = 0
            else:
                self.payload_pos += n
                if self.payload_pos == self.payload_size:
                    view = memoryview(self.payload)
                    frames.append(
                        (view if len(view) == self.payload_size else view[: self.payload_size]).toreadonly()
                    )
                    self.payload = None
                    self.size_pos = 0
        return frames
