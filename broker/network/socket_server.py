"""Kafka's ``SocketServer`` on one asyncio event loop.

Structure (as in Kafka): an *acceptor* per listener (here: :class:`SocketServer`) accepts
connections (waiting while ``max.connections`` is reached, see
:mod:`broker.network.connection_quotas`) and hands each one to the *processor*
(:class:`~broker.network.processor.Processor`, one coroutine per connection) that reads size-prefixed frames, parses the request header and passes
the frame to the request handler (``KafkaApis``). One request per connection is handled at a
time, in arrival order, and responses go out in request order: the next frame is read only after
the previous response was written (Kafka mutes the channel until the response is sent). The one
exception: once a Produce request has appended and parked waiting for its replicas, a following
Produce is read and appended while it waits; their responses still go out in request order
(:mod:`broker.network.in_flight_produces`).

Resource limits (Kafka's keys):

- ``max.connections`` / ``max.connections.per.ip`` (+ ``.overrides``): Kafka's ``ConnectionQuotas``.
- ``queued.max.request.bytes``: each frame's bytes are taken from a :class:`MemoryPool` as soon as
  its size is read; while the pool is exhausted the connection is not read (the request waits).
- ``queued.max.requests``: at most this many requests are being handled at once, broker-wide;
  a further complete frame waits (its connection is not read) until one finishes. As in Kafka
  (whose request queue holds requests until a handler thread takes them, never delayed
  operations), a request that parks in a purgatory (long-poll fetch, acks=-1 produce) frees its
  slot (``RequestContext.release_slot``): 1,000 consumers long-polling one broker do not hold
  the other clients' requests back.
- ``connections.max.idle.ms``: a connection with no request for this long is closed; the same
  bound applies to writing one response to a client that does not read it.
- ``kafkalite.socket.request.receive.timeout.ms`` (Kafka has no server-side equivalent): a frame
  whose first byte has arrived must be complete within this time (not counting time spent
  waiting for pool memory), else the connection is closed: a slow-loris sender cannot hold a
  buffer or a connection slot forever. Like the idle limit it is enforced by one periodic sweep
  over the connections (every quarter of the shorter limit, at most 10 s), as Kafka's
  ``Selector`` checks idle connections on its poll, so receiving a frame arms no timer.

Bad input closes the connection, as Kafka's ``NetworkReceive`` / ``SocketServer`` do: a negative
size or one above ``socket.request.max.bytes`` (closed without reading the body), a truncated
frame (EOF inside it), or an unparsable header.

Security (Kafka's ``ChannelBuilders``; settings in :mod:`broker.network.channel_builders`): SSL and
SASL_SSL listeners complete a TLS handshake (bounded by the receive timeout) before any Kafka
bytes; a failed handshake (plaintext client, untrusted certificate) closes that connection only.
SASL listeners run :class:`~broker.security.sasl_server_authenticator.SaslServerAuthenticator`
until the client is authenticated; until then frames above ``sasl.server.max.receive.size`` close
the connection. Each connection's principal (``User:ANONYMOUS``, ``User:<SASL user>`` or
``User:<client certificate DN>``) is on every :class:`RequestContext`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from collections.abc import Mapping

from broker.network.channel_builders import ListenerSecurity
from broker.network.connection_quotas import ConnectionQuotas, TooManyConnectionsError
from broker.network.endpoint import Endpoint
from broker.network.memory_pool import MemoryPool
from broker.network.processor import ErrorResponder, Processor, RequestHandler
from broker.security.sasl_server import CredentialLookup

__all__ = ["SocketServer"]

logger = logging.getLogger(__name__)

_INT_MAX = 2**31 - 1


class SocketServer:
    """Accepts connections on ``endpoints`` and serves Kafka requests through ``handler``.

    Args:
        endpoints: listeners to bind (port 0 = a free port).
        handler: the request handler (see :data:`RequestHandler`).
        max_request_bytes: ``socket.request.max.bytes``.
        connections_max_idle_ms: close connections idle this long (-1 = never).
        backlog: ``socket.listen.backlog.size``.
        max_connections: ``max.connections``.
        max_connections_per_ip: ``max.connections.per.ip``.
        max_connections_per_ip_overrides: address -> limit.
        queued_max_requests: ``queued.max.requests``.
        queued_max_request_bytes: ``queued.max.request.bytes`` (-1 = unbounded).
        request_receive_timeout_ms: ``kafkalite.socket.request.receive.timeout.ms`` (-1 = none).
        inter_broker_listener: the listener protected from ``max.connections`` (KIP-402).
        security: listener name -> its TLS/SASL settings (missing = PLAINTEXT).
        credentials: SCRAM credential lookup for SASL listeners.
        error_responder: answers a request of another API sent during SaslAuthenticate with its
            ILLEGAL_SASL_STATE error response before the connection is closed (None: closed
            without a response).
    """

    def __init__(
        self,
        endpoints: list[Endpoint],
        handler: RequestHandler,
        *,
        max_request_bytes: int = 104857600,
        connections_max_idle_ms: int = 600000,
        backlog: int = 50,
        max_connections: int = _INT_MAX,
        max_connections_per_ip: int = _INT_MAX,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
        queued_max_requests: int = 500,
        queued_max_request_bytes: int = -1,
        request_receive_timeout_ms: int = 60000,
        inter_broker_listener: str | None = None,
        security: Mapping[str, ListenerSecurity] | None = None,
        credentials: CredentialLookup | None = None,
        error_responder: ErrorResponder | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.connections_max_idle_ms = connections_max_idle_ms
        self.request_receive_timeout_ms = request_receive_timeout_ms
        self.backlog = backlog
        self.quotas = ConnectionQuotas(
            max_connections,
            max_connections_per_ip,
            max_connections_per_ip_overrides,
            protected_listener=inter_broker_listener,
            listener_count=len(endpoints),
        )
        self.processor = Processor(
            handler,
            MemoryPool(queued_max_request_bytes),
            queued_max_requests=queued_max_requests,
            max_request_bytes=max_request_bytes,
            connections_max_idle_ms=connections_max_idle_ms,
            request_receive_timeout_ms=request_receive_timeout_ms,
            security=dict(security or {}),
            credentials=credentials or (lambda _user, _mechanism: None),
            error_responder=error_responder,
        )
        self.bound: dict[str, tuple[str, int]] = {}
        self._listen_sockets: list[tuple[socket.socket, str]] = []
        self._acceptors: list[asyncio.Task[None]] = []
        self._idle_task: asyncio.Task[None] | None = None

    @property
    def handler(self) -> RequestHandler:
        """The request handler; assigning one applies to connections accepted afterwards."""
        return self.processor.handler

    @handler.setter
    def handler(self, handler: RequestHandler) -> None:
        self.processor.handler = handler

    # -- lifecycle -----------------------------------------------------------------------------
    async def startup(self, start_serving: bool = True) -> dict[str, tuple[str, int]]:
        """Bind every listener; returns listener name -> (bound host, bound port). With
        ``start_serving=False`` connections are accepted only after :meth:`start_serving`
        (until then they wait in the listen backlog).

        Raises:
            OSError: a listener could not be bound (e.g. the port is in use).
        """
        for endpoint in self.endpoints:
            sock = _bind(endpoint.host, endpoint.port, self.backlog)
            self._listen_sockets.append((sock, endpoint.listener_name))
            bound_host, bound_port = sock.getsockname()[:2]
            self.bound[endpoint.listener_name] = (endpoint.host or bound_host, bound_port)
            logger.info("listening on %s (bound %s:%d)", endpoint, bound_host, bound_port)
        if start_serving:
            await self.start_serving()
        if self.connections_max_idle_ms >= 0 or self.request_receive_timeout_ms >= 0:
            self._idle_task = asyncio.create_task(
                self._close_idle_connections(), name="idle-connection-reaper"
            )
        return dict(self.bound)

    async def start_serving(self) -> None:
        """Start accepting connections on every bound listener."""
        if self._acceptors:
            return
        for sock, listener_name in self._listen_sockets:
            self._acceptors.append(
                asyncio.create_task(self._accept_loop(sock, listener_name), name=f"acceptor-{listener_name}")
            )

    async def shutdown(self) -> None:
        """Stop accepting, close every connection and wait for the processors to finish."""
        self.processor.stopping = True
        for task in self._acceptors:
            task.cancel()
        if self._acceptors:
            await asyncio.gather(*self._acceptors, return_exceptions=True)
        self._acceptors.clear()
        for sock, _name in self._listen_sockets:
            sock.close()
        self._listen_sockets.clear()
        if self._idle_task is not None:
            self._idle_task.cancel()
        tasks = []
        for conn in list(self.processor.connections):
            conn.writer.close()
            if conn.task is not None:
                conn.task.cancel()
                tasks.append(conn.task)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- gauges (read by the metrics endpoint's thread) -------------------------------------------
    def connection_counts(self) -> dict[str, int]:
        """Listener name -> open connections (Kafka's ``socket-server-metrics``
        ``connection-count`` per listener)."""
        counts = dict.fromkeys(self.bound, 0)
        for conn in list(self.processor.connections):
            counts[conn.listener_name] = counts.get(conn.listener_name, 0) + 1
        return counts

    def request_queue_size(self) -> int:
        """Requests read and waiting for a ``queued.max.requests`` slot."""
        return self.processor.request_queue_size()

    # -- the acceptor (Kafka's Acceptor) ---------------------------------------------------------------------------
    async def _accept_loop(self, lsock: socket.socket, listener_name: str) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.quotas
        processor = self.processor
        while not processor.stopping:
            await quotas.wait_for_slot(listener_name)  # Kafka's waitForConnectionSlot
            try:
                sock, address = await loop.sock_accept(lsock)
            except OSError as exc:  # e.g. EMFILE: back off instead of spinning
                logger.warning("accept on %s failed: %s", listener_name, exc)
                await asyncio.sleep(0.1)
                continue
            client_host = str(address[0])
            try:
                quotas.register(client_host)
            except TooManyConnectionsError as exc:
                logger.info("rejected connection on %s: %s", listener_name, exc)
                sock.close()
                continue
            if quotas.is_protected(listener_name) and quotas.over_broker_limit():
                self._close_lowest_priority_connection()
            task = asyncio.create_task(processor.serve(sock, listener_name, client_host))
            task.add_done_callback(functools.partial(_release_slot, quotas, client_host))

    def _close_lowest_priority_connection(self) -> None:
        """Kafka's ``closeExcessConnections``: close the least recently active connection of an
        unprotected listener."""
        candidates = [c for c in self.processor.connections if not self.quotas.is_protected(c.listener_name)]
        if candidates:
            victim = min(candidates, key=lambda c: c.last_active_s)
            logger.info("max.connections reached: closing %s", victim.connection_id)
            victim.writer.close()
            if victim.task is not None:
                victim.task.cancel()

    async def _close_idle_connections(self) -> None:
        """The periodic sweep: closes connections idle for ``connections.max.idle.ms`` and those
        whose frame is still incomplete at its receive deadline (see the module docstring)."""
        limits_s = [
            ms / 1000.0 for ms in (self.connections_max_idle_ms, self.request_receive_timeout_ms) if ms >= 0
        ]
        period = min(max(min(limits_s) / 4, 0.05), 10.0)
        idle_s = self.connections_max_idle_ms / 1000.0 if self.connections_max_idle_ms >= 0 else None
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            for conn in list(self.processor.connections):
                deadline = conn.receive_deadline_s
                if deadline is not None and now > deadline:
                    logger.warning(
                        "closing connection %s: %s",
                        conn.connection_id,
                        self.processor.timeout_message(conn.receiving_bytes),
                    )
                elif idle_s is not None and not conn.busy and now - conn.last_active_s > idle_s:
                    logger.debug("closing idle connection %s", conn.connection_id)
                else:
                    continue
                conn.writer.close()
                if conn.task is not None:
                    conn.task.cancel()


def _release_slot(quotas: ConnectionQuotas, client_host: str, _task: asyncio.Task[None]) -> None:
    quotas.release(client_host)


def _bind(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking listening socket for ``host:port`` ("" = every interface, IPv4 and IPv6
    when the OS supports a dual-stack socket).

    Raises:
        OSError: the address cannot be resolved or bound.
    """
    if not host:
        if socket.has_dualstack_ipv6():
            sock = socket.create_server(
                ("", port), family=socket.AF_INET6, backlog=backlog, dualstack_ipv6=True
            )
        else:
            sock = socket.create_server(("", port), backlog=backlog)
    else:
        family, _type, _proto, _name, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        sock = socket.create_server(address, family=family, backlog=backlog)
    sock.setblocking(False)
    return sock
