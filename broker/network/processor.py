"""The per-connection half of Kafka's ``SocketServer``: the ``Processor`` that reads request
frames, hands them to the request handler and writes the responses, and each connection's state
(Kafka's ``KafkaChannel``).

Kafka runs a few processor threads, each multiplexing many connections through a ``Selector``;
here one :class:`Processor` serves every connection, each as its own coroutine
(:meth:`Processor.serve`, started by :class:`~broker.network.socket_server.SocketServer`'s
acceptors). The rules it applies (one request at a time per connection, responses in request
order, the memory pool, ``queued.max.requests``, bad input closing the connection, TLS and SASL)
are those of :mod:`broker.network.socket_server`'s module docstring.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from broker.network.channel_builders import ListenerSecurity
from broker.network.in_flight_produces import MAX_IN_FLIGHT_PRODUCES, InFlightProduces
from broker.network.memory_pool import MemoryPool
from broker.network.request_context import CloseConnection, RequestContext, RequestTimeline
from broker.security.principal import ssl_principal
from broker.security.sasl_server import CredentialLookup
from broker.security.sasl_server_authenticator import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    SaslServerAuthenticator,
)
from spark_kafkalite.protocol.acl import ANONYMOUS_PRINCIPAL
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError
from spark_kafkalite.protocol.framing import FrameChunks, RequestHeaderInfo, decode_request_header

__all__ = ["Processor", "Connection", "RequestHandler", "ErrorResponder", "FrameTimeoutError"]

logger = logging.getLogger(__name__)

RequestHandler = Callable[[RequestContext, bytes | bytearray, int], Awaitable[bytes | FrameChunks | None]]
"""``handler(context, frame, body_offset) -> response frame | None`` (None = no response); a
frame may come as chunks (written in order, see ``encode_fetch_response``).
It may raise :class:`CloseConnection`."""

ErrorResponder = Callable[[RequestContext, bytes | bytearray, int, ErrorCode], bytes | FrameChunks | None]
"""``error_responder(context, frame, body_offset, code)`` -> the request's API error response with
``code``, or None (``KafkaApis.error_response_frame``)."""

_STREAM_LIMIT = 64 * 1024  # StreamReader high-water mark: reading pauses at 2x this (bytes)
_LARGE_FRAME_BYTES = 1 << 20
"""Frames above this are read piecewise into their final buffer, and response chunks above it
written a slice at a time (see :func:`_read_large`, :func:`_write_large`)."""


class FrameTimeoutError(Exception):
    """A request frame did not arrive completely within the receive timeout (slow-loris)."""


@dataclass(eq=False)
class Connection:
    """One client connection's state (Kafka's ``KafkaChannel``): its id
    (``local-peer-n``), writer, listener, client address and principal, the SASL authenticator
    until authentication completes, and what the idle / receive-timeout sweep reads
    (``last_active_s``, ``busy``, ``receive_deadline_s``)."""

    connection_id: str
    writer: asyncio.StreamWriter
    listener_name: str
    client_host: str
    principal: str = ANONYMOUS_PRINCIPAL
    authenticator: SaslServerAuthenticator | None = None  # until SASL authentication completes
    max_receive_bytes: int | None = None  # sasl.server.max.receive.size until authenticated
    last_active_s: float = field(default_factory=time.monotonic)
    busy: bool = False  # a frame is being received, handled or answered
    slots: asyncio.Semaphore | None = None  # queued.max.requests, while this request holds a slot
    receive_deadline_s: float | None = None  # time.monotonic() by which the frame being read must be complete
    receiving_bytes: int = 0  # size of that frame
    task: asyncio.Task[None] | None = None

    def release_slot(self) -> None:
        """Free the current request's ``queued.max.requests`` slot (at most once per request)."""
        slots, self.slots = self.slots, None
        if slots is not None:
            slots.release()


class Processor:
    """Serves accepted connections (Kafka's ``Processor``), one coroutine per connection.

    Args:
        handler: the request handler (see :data:`RequestHandler`); replaceable (read when a
            connection starts).
        memory_pool: ``queued.max.request.bytes``: each frame's bytes are taken from it.
        queued_max_requests: ``queued.max.requests`` (broker-wide requests being handled).
        max_request_bytes: ``socket.request.max.bytes``.
        connections_max_idle_ms: the bound on writing one response (-1 = none).
        request_receive_timeout_ms: ``kafkalite.socket.request.receive.timeout.ms`` (-1 = none).
        security: listener name -> its TLS/SASL settings (missing = PLAINTEXT).
        credentials: SCRAM credential lookup for SASL listeners.
        error_responder: see :class:`~broker.network.socket_server.SocketServer`.

    Attributes:
        connections: the open connections (the socket server's sweep closes idle ones).
        stopping: set by the socket server's shutdown: no further frame is read.
    """

    def __init__(
        self,
        handler: RequestHandler,
        memory_pool: MemoryPool,
        *,
        queued_max_requests: int,
        max_request_bytes: int,
        connections_max_idle_ms: int,
        request_receive_timeout_ms: int,
        security: Mapping[str, ListenerSecurity],
        credentials: CredentialLookup,
        error_responder: ErrorResponder | None,
    ) -> None:
        self.handler = handler
        self.memory_pool = memory_pool
        self._request_slots = asyncio.Semaphore(queued_max_requests)
        self.max_request_bytes = max_request_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.request_receive_timeout_ms = request_receive_timeout_ms
        self.security = security
        self.credentials = credentials
        self.error_responder = error_responder
        self.connections: set[Connection] = set()
        self._ids = itertools.count()
        self.stopping = False

    def request_queue_size(self) -> int:
        """Requests waiting for a ``queued.max.requests`` slot (Kafka's RequestChannel
        RequestQueueSize: requests read but not yet taken by a handler)."""
        waiters = self._request_slots._waiters
        return len(waiters) if waiters else 0

    async def serve(self, sock: socket.socket, listener_name: str, client_host: str) -> None:
        """Serve one accepted connection until it closes: TLS handshake on TLS listeners, SASL
        authentication on SASL listeners, then requests one at a time (see the module
        docstring). Never raises: any error closes this connection only."""
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        security = self.security.get(listener_name)
        opened = await self._open(sock, listener_name, client_host, security)
        if opened is None:
            return
        reader, writer = opened
        local = writer.get_extra_info("sockname") or ("?", 0)
        peer = writer.get_extra_info("peername") or ("?", 0)
        conn = Connection(
            f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}-{next(self._ids)}", writer, listener_name, client_host
        )
        if security is not None and security.uses_sasl:
            conn.authenticator = SaslServerAuthenticator(
                security.sasl_mechanisms, security.plain_users, self.credentials
            )
            conn.max_receive_bytes = security.sasl_max_receive_size
        elif security is not None and security.ssl_context is not None:
            conn.principal = ssl_principal(writer.get_extra_info("ssl_object"))
        conn.task = asyncio.current_task()
        self.connections.add(conn)
        try:
            await self._process(reader, conn)
        except (asyncio.IncompleteReadError, ConnectionError, CloseConnection) as exc:
            logger.debug("closing connection %s: %r", conn.connection_id, exc)
        except FrameTimeoutError as exc:
            logger.warning("closing connection %s: %s", conn.connection_id, exc)
        except asyncio.CancelledError:
            pass
        except Exception:  # defensive: a processor must never take the broker down
            logger.exception("unexpected error on connection %s; closing it", conn.connection_id)
        finally:
            self.connections.discard(conn)
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 1.0)
            except (OSError, TimeoutError, asyncio.CancelledError):
                pass  # the peer reset or stalled the close: the transport is closed either way

    async def _open(
        self, sock: socket.socket, listener_name: str, client_host: str, security: ListenerSecurity | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        """Stream reader and writer over ``sock``, after the TLS handshake on TLS listeners
        (bounded by the receive timeout). None (socket closed) when the handshake fails."""
        context = security.ssl_context if security is not None else None
        try:
            if context is None:
                return await asyncio.open_connection(sock=sock, limit=_STREAM_LIMIT)
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=_STREAM_LIMIT, loop=loop)
            protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
            timeout_s = (
                self.request_receive_timeout_ms / 1000.0 if self.request_receive_timeout_ms > 0 else None
            )
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, sock, ssl=context, ssl_handshake_timeout=timeout_s
            )
            return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
        except (OSError, ssl.SSLError, TimeoutError) as exc:  # SSLError is an OSError; named for readers
            logger.info("TLS handshake with %s on %s failed: %s", client_host, listener_name, exc)
            sock.close()
            return None

    async def _read_frame(self, reader: asyncio.StreamReader, conn: Connection) -> bytes | bytearray | None:
        """Read one frame; its ``len(frame)`` bytes are allocated from the memory pool (the caller
        releases them). Returns None when the peer closed between frames or the size is invalid.

        Raises:
            FrameTimeoutError: the size prefix stalled midway (``kafkalite.socket.request.receive.timeout.ms``;
                a stalled body is closed by the periodic sweep, which cancels this read).
            asyncio.IncompleteReadError: EOF inside the frame.
        """
        head = await reader.read(4)  # no deadline between frames (connections.max.idle.ms)
        if not head:
            return None
        conn.busy = True
        loop = asyncio.get_running_loop()
        timeout_s = self.request_receive_timeout_ms / 1000.0
        deadline = loop.time() + timeout_s if timeout_s >= 0 else None
        if len(head) < 4:  # (rare: a timer only when the size itself arrived split)
            try:
                async with asyncio.timeout_at(deadline):
                    head += await reader.readexactly(4 - len(head))
            except TimeoutError:
                raise FrameTimeoutError(self.timeout_message(4)) from None
        size = int.from_bytes(head, "big", signed=True)
        if size < 0 or size > self.max_request_bytes:
            # Kafka's InvalidReceiveException: close before reading the body.
            logger.warning(
                "closing connection %s: request size %d is outside [0, socket.request.max.bytes=%d]",
                conn.connection_id,
                size,
                self.max_request_bytes,
            )
            return None
        if conn.max_receive_bytes is not None and size > conn.max_receive_bytes:
            logger.warning(
                "closing connection %s: %d-byte frame before authentication (sasl.server.max.receive.size=%d)",
                conn.connection_id,
                size,
                conn.max_receive_bytes,
            )
            return None
        waited_from = loop.time()
        await self.memory_pool.allocate(size)  # queued.max.request.bytes: wait, do not fail
        if deadline is not None:  # checked by the sweep (_close_idle_connections), on its clock
            conn.receive_deadline_s = time.monotonic() + deadline - waited_from
            conn.receiving_bytes = size
        try:
            if size <= _LARGE_FRAME_BYTES:
                return await reader.readexactly(size)
            return await _read_large(reader, size)
        except BaseException:  # including the sweep's cancellation of a stalled frame
            self.memory_pool.release(size)
            raise
        finally:
            conn.receive_deadline_s = None

    def timeout_message(self, expected: int) -> str:
        """Why a frame of ``expected`` bytes was cut off (for the log)."""
        return (
            f"request frame ({expected} bytes) incomplete after "
            f"kafkalite.socket.request.receive.timeout.ms={self.request_receive_timeout_ms}"
        )

    async def _process(self, reader: asyncio.StreamReader, conn: Connection) -> None:
        handler = self.handler
        writer = conn.writer
        idle_s = self.connections_max_idle_ms / 1000.0 if self.connections_max_idle_ms >= 0 else None
        in_flight = InFlightProduces(writer, conn.connection_id)
        try:
            while not self.stopping:
                if in_flight:  # reading on past parked Produce requests (see in_flight_produces)
                    await in_flight.wait_below(MAX_IN_FLIGHT_PRODUCES)
                    if writer.transport.get_write_buffer_size():
                        async with asyncio.timeout(idle_s):  # a client that never reads is dropped
                            await writer.drain()
                frame = await self._read_frame(reader, conn)
                if frame is None or writer.is_closing():
                    return
                timeline = RequestTimeline()
                response = await self._handle(handler, conn, frame, in_flight, timeline)
                if response is not None:
                    written_s = time.monotonic()
                    chunks = (
                        response if isinstance(response, list) else (response,)
                    )  # FrameChunks: by reference
                    del response
                    if any(len(chunk) > _LARGE_FRAME_BYTES for chunk in chunks):
                        async with asyncio.timeout(idle_s):  # a client that never reads is dropped
                            await _write_large(writer, chunks)
                    else:
                        for chunk in chunks:
                            writer.write(chunk)
                    del chunks
                    if writer.transport.get_write_buffer_size():  # all sent at once: nothing to wait for
                        async with asyncio.timeout(idle_s):  # a client that never reads is dropped
                            await writer.drain()
                    timeline.sent(written_s)
                conn.busy = False
                conn.last_active_s = time.monotonic()
        finally:
            in_flight.cancel()

    async def _handle(
        self,
        handler: RequestHandler,
        conn: Connection,
        frame: bytes | bytearray,
        in_flight: InFlightProduces,
        timeline: RequestTimeline,
    ) -> bytes | FrameChunks | None:
        """Handle one frame; its response to write now, or None (no response, or a Produce
        request left to ``in_flight`` to answer in order). ``timeline``: the request's, whose
        ``sent`` the writer of its response calls."""
        size = len(frame)
        received_s = time.monotonic()
        header: RequestHeaderInfo | None = None
        try:
            if conn.authenticator is None:
                try:
                    header, body_offset = decode_request_header(frame)
                except KafkaError as exc:
                    logger.warning("closing connection %s: bad request header: %s", conn.connection_id, exc)
                    raise CloseConnection(str(exc)) from None
                if in_flight and header.api_key != ApiKey.PRODUCE:
                    await in_flight.wait_below(1)  # answered after every Produce before it
            await self._request_slots.acquire()  # queued.max.requests
        except BaseException:
            self.memory_pool.release(size)
            raise
        conn.slots = self._request_slots
        now = time.monotonic()
        conn.last_active_s = now
        if header is not None and header.api_key == ApiKey.PRODUCE:
            produce_header, produce_frame, offset = header, frame, body_offset

            def start(parked: Callable[[], None]) -> Awaitable[bytes | FrameChunks | None]:
                context = RequestContext(
                    produce_header,
                    conn.connection_id,
                    conn.client_host,
                    conn.listener_name,
                    received_s,
                    conn.principal,
                    parked,
                    timeline,
                )
                return handler(context, produce_frame, offset)

            return await in_flight.handle(
                start, conn.release_slot, functools.partial(self.memory_pool.release, size), timeline.sent
            )
        try:
            try:
                if header is None:
                    return await self._authenticate(conn, frame, timeline)
                context = RequestContext(
                    header,
                    conn.connection_id,
                    conn.client_host,
                    conn.listener_name,
                    received_s,
                    conn.principal,
                    conn.release_slot,
                    timeline,
                )
                return await handler(context, frame, body_offset)
            finally:
                conn.release_slot()
                del frame
                self.memory_pool.release(size)
        except SaslAuthenticationFailed as exc:  # answered after the slot and buffer are free
            await self._fail_authentication(conn, exc)

    async def _authenticate(
        self, conn: Connection, frame: bytes | bytearray, timeline: RequestTimeline
    ) -> bytes | FrameChunks | None:
        """One frame of a connection still authenticating (see the module docstring).

        Raises:
            CloseConnection: a request not allowed before authentication.
            SaslAuthenticationFailed: see :meth:`_fail_authentication`.
        """
        authenticator = conn.authenticator
        if authenticator is None:  # _process sends only a still-authenticating connection's frames here
            raise RuntimeError(f"connection {conn.connection_id} is not authenticating")
        try:
            reply = authenticator.receive(frame)
        except IllegalSaslState as exc:
            logger.info("closing connection %s: %s", conn.connection_id, exc)
            if exc.request is not None and (responder := self.error_responder) is not None:
                await self._answer_illegal_sasl_state(responder, conn, frame, *exc.request)
            raise CloseConnection(str(exc)) from None
        # (SaslAuthenticationFailed propagates: _process answers it once the request slot is free)
        if authenticator.complete:
            conn.principal = authenticator.principal or ANONYMOUS_PRINCIPAL
            conn.authenticator = None
            conn.max_receive_bytes = None
            logger.debug("connection %s authenticated as %s", conn.connection_id, conn.principal)
        if reply.delegate is None:
            return reply.response
        header, body_offset = reply.delegate
        context = RequestContext(
            header,
            conn.connection_id,
            conn.client_host,
            conn.listener_name,
            time.monotonic(),
            conn.principal,
            conn.release_slot,
            timeline,
        )
        return await self.handler(context, frame, body_offset)

    async def _answer_illegal_sasl_state(
        self,
        responder: ErrorResponder,
        conn: Connection,
        frame: bytes | bytearray,
        header: RequestHeaderInfo,
        body_offset: int,
    ) -> None:
        """Write the request's ILLEGAL_SASL_STATE error response (Kafka's
        ``SaslServerAuthenticator.handleSaslToken``), if its API has one; the caller closes."""
        context = RequestContext(
            header, conn.connection_id, conn.client_host, conn.listener_name, time.monotonic(), conn.principal
        )
        try:
            response = responder(context, frame, body_offset, ErrorCode.illegal_sasl_state)
        except CloseConnection:  # e.g. acks=0 produce: no response
            return
        if response is None:
            return
        for chunk in response if isinstance(response, list) else (response,):
            conn.writer.write(chunk)
        try:
            async with asyncio.timeout(1.0):
                await conn.writer.drain()
        except (OSError, TimeoutError):  # the peer is gone or not reading: the connection closes next
            pass

    async def _fail_authentication(self, conn: Connection, exc: SaslAuthenticationFailed) -> NoReturn:
        """Kafka's failed-authentication path: wait ``connection.failed.authentication.delay.ms``
        (outside any request slot), write the error response if there is one, close.

        Raises:
            CloseConnection: always.
        """
        logger.info(
            "failed authentication with %s (connection %s): %s", conn.client_host, conn.connection_id, exc
        )
        await asyncio.sleep(self.security[conn.listener_name].failed_authentication_delay_ms / 1000.0)
        if exc.response is not None:
            conn.writer.write(exc.response)
            try:
                async with asyncio.timeout(1.0):
                    await conn.writer.drain()
            except (OSError, TimeoutError):  # the peer is gone or not reading: the connection closes next
                pass
        raise CloseConnection(str(exc))


async def _read_large(reader: asyncio.StreamReader, size: int) -> bytearray:
    """Read a ``size``-byte frame a stream-buffer's worth at a time into one growing buffer.
    ``StreamReader.readexactly`` would copy the whole frame in one step at the end, and
    ``bytearray(size)`` would zero it in one step: either holds the event loop for hundreds of ms
    for a 100 MB frame. Growing by appends spreads the page faults over the reads (glibc
    grows large blocks with ``mremap``, without copying).

    Raises:
        asyncio.IncompleteReadError: EOF inside the frame.
    """
    frame = bytearray()
    while len(frame) < size:
        chunk = await reader.read(min(size - len(frame), _STREAM_LIMIT * 2))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", size)  # (no copy of what arrived)
        frame += chunk
    return frame


async def _write_large(writer: asyncio.StreamWriter, chunks: FrameChunks | tuple[bytes, ...]) -> None:
    """Write a response holding a large chunk (a 100 MB fetch, say) a slice at a time, waiting for
    the socket to take each: one ``write`` of the whole chunk would copy what the socket does not
    take at once into the transport's buffer in one step, holding the event loop."""
    for chunk in chunks:
        if len(chunk) <= _LARGE_FRAME_BYTES:
            writer.write(chunk)
            continue
        view = memoryview(chunk)
        for start in range(0, len(view), _LARGE_FRAME_BYTES):
            writer.write(view[start : start + _LARGE_FRAME_BYTES])
            await writer.drain()
