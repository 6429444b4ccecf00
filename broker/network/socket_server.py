"""Kafka's ``SocketServer`` on one asyncio event loop.

Structure (as in Kafka): an *acceptor* per listener (``asyncio.start_server``) hands each new
connection to a *processor* coroutine that reads size-prefixed frames, parses the request header
and passes the frame to the request handler (``KafkaApis``). Exactly one request per connection
is in flight: the next frame is read only after the previous response was written (Kafka mutes
the channel until the response is sent), so responses go out in request order.

Bad input closes the connection, as Kafka's ``NetworkReceive`` / ``SocketServer`` do: a negative
size or one above ``socket.request.max.bytes`` (closed without reading the body), a truncated
frame (EOF inside it), or an unparsable header.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from broker.config import Endpoint
from broker.network.request_context import CloseConnection, RequestContext
from spark_kafkalite.protocol.errors import KafkaError
from spark_kafkalite.protocol.framing import decode_request_header

__all__ = ["SocketServer", "RequestHandler"]

logger = logging.getLogger(__name__)

RequestHandler = Callable[[RequestContext, bytes, int], Awaitable[bytes | None]]
"""``handler(context, frame, body_offset) -> response frame | None`` (None = no response).
It may raise :class:`CloseConnection`."""

_STREAM_LIMIT = 1 << 20  # StreamReader buffer high-water mark (bytes)


@dataclass(eq=False)
class _Connection:
    connection_id: str
    writer: asyncio.StreamWriter
    last_active_s: float = field(default_factory=time.monotonic)
    busy: bool = False
    task: asyncio.Task[None] | None = None


class SocketServer:
    """Accepts connections on ``endpoints`` and serves Kafka requests through ``handler``.

    Args:
        endpoints: listeners to bind (port 0 = a free port).
        handler: the request handler (see :data:`RequestHandler`).
        max_request_bytes: ``socket.request.max.bytes``.
        connections_max_idle_ms: close connections idle this long (-1 = never).
        backlog: ``socket.listen.backlog.size``.
    """

    def __init__(
        self,
        endpoints: list[Endpoint],
        handler: RequestHandler,
        *,
        max_request_bytes: int = 104857600,
        connections_max_idle_ms: int = 600000,
        backlog: int = 50,
    ) -> None:
        self.endpoints = endpoints
        self.handler = handler
        self.max_request_bytes = max_request_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.backlog = backlog
        self.bound: dict[str, tuple[str, int]] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._connections: set[_Connection] = set()
        self._ids = itertools.count()
        self._idle_task: asyncio.Task[None] | None = None
        self._stopping = False

    # -- lifecycle -----------------------------------------------------------------------------
    async def startup(self, start_serving: bool = True) -> dict[str, tuple[str, int]]:
        """Bind every listener; returns listener name -> (bound host, bound port). With
        ``start_serving=False`` connections are accepted only after :meth:`start_serving`.

        Raises:
            OSError: a listener could not be bound (e.g. the port is in use).
        """
        for endpoint in self.endpoints:
            host = endpoint.host or None  # None = all interfaces

            def on_connect(
                reader: asyncio.StreamReader,
                writer: asyncio.StreamWriter,
                _name: str = endpoint.listener_name,
            ) -> Awaitable[None]:
                return self._serve(reader, writer, _name)

            server = await asyncio.start_server(
                on_connect,
                host=host,
                port=endpoint.port,
                backlog=self.backlog,
                limit=_STREAM_LIMIT,
                reuse_address=True,
                start_serving=start_serving,
            )
            self._servers.append(server)
            sock = server.sockets[0]
            bound_host, bound_port = sock.getsockname()[:2]
            self.bound[endpoint.listener_name] = (endpoint.host or bound_host, bound_port)
            logger.info("listening on %s (bound %s:%d)", endpoint, bound_host, bound_port)
        if self.connections_max_idle_ms >= 0:
            self._idle_task = asyncio.create_task(
                self._close_idle_connections(), name="idle-connection-reaper"
            )
        return dict(self.bound)

    async def start_serving(self) -> None:
        """Start accepting connections on every bound listener."""
        for server in self._servers:
            await server.start_serving()

    async def shutdown(self) -> None:
        """Stop accepting, close every connection and wait for the processors to finish."""
        self._stopping = True
        for server in self._servers:
            server.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
        tasks = []
        for conn in list(self._connections):
            conn.writer.close()
            if conn.task is not None:
                conn.task.cancel()
                tasks.append(conn.task)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)
        self._servers.clear()

    # -- the processor --------------------------------------------------------------------------
    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str
    ) -> None:
        sock = writer.get_extra_info("socket")
        local = writer.get_extra_info("sockname") or ("?", 0)
        peer = writer.get_extra_info("peername") or ("?", 0)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = _Connection(f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{next(self._ids)}", writer)
        conn.task = asyncio.current_task()
        self._connections.add(conn)
        try:
            await self._process(reader, conn, listener_name, str(peer[0]))
        except (asyncio.IncompleteReadError, ConnectionError, CloseConnection) as exc:
            logger.debug("closing connection %s: %r", conn.connection_id, exc)
        except asyncio.CancelledError:
            pass
        except Exception:  # defensive: a processor must never take the broker down
            logger.exception("unexpected error on connection %s; closing it", conn.connection_id)
        finally:
            self._connections.discard(conn)
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _process(
        self, reader: asyncio.StreamReader, conn: _Connection, listener_name: str, client_host: str
    ) -> None:
        max_bytes = self.max_request_bytes
        handler = self.handler
        writer = conn.writer
        while not self._stopping:
            size_bytes = await reader.readexactly(4)
            size = int.from_bytes(size_bytes, "big", signed=True)
            if size < 0 or size > max_bytes:
                # Kafka's InvalidReceiveException: close before reading the body.
                logger.warning(
                    "closing connection %s: request size %d is outside [0, socket.request.max.bytes=%d]",
                    conn.connection_id,
                    size,
                    max_bytes,
                )
                return
            frame = await reader.readexactly(size)  # a frame stalled past the idle limit is reaped
            now = time.monotonic()
            conn.last_active_s = now
            conn.busy = True  # never reap a connection while its request is being served
            try:
                header, body_offset = decode_request_header(frame)
            except KafkaError as exc:
                logger.warning("closing connection %s: bad request header: %s", conn.connection_id, exc)
                return
            context = RequestContext(header, conn.connection_id, client_host, listener_name, now)
            response = await handler(context, frame, body_offset)
            if response is not None:
                writer.write(response)
                await writer.drain()
            conn.busy = False
            conn.last_active_s = time.monotonic()

    async def _close_idle_connections(self) -> None:
        idle_s = self.connections_max_idle_ms / 1000.0
        period = min(max(idle_s / 4, 0.05), 10.0)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for conn in list(self._connections):
                if not conn.busy and now - conn.last_active_s > idle_s:
                    logger.debug("closing idle connection %s", conn.connection_id)
                    conn.writer.close()
                    if conn.task is not None:
                        conn.task.cancel()
