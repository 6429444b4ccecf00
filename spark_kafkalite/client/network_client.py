"""``NetworkClient``: connections to brokers, request/response correlation, timeouts.

Mirrors Kafka's ``org.apache.kafka.clients.NetworkClient``: one non-blocking socket per node
driven by a ``selectors`` selector, correlation ids, an in-flight queue per connection bounded by
``max.in.flight.requests.per.connection`` (responses come back in request order), per-request
timeouts (``request.timeout.ms``; an expired request closes its connection), exponential
reconnect backoff (``reconnect.backoff.ms`` .. ``reconnect.backoff.max.ms``), and ApiVersions
negotiation on connect (v3 first, stepping down per KIP-511 when the broker answers
UNSUPPORTED_VERSION). Each request is sent at ``min(our max, broker max)`` version.

``security.protocol`` (Java ``ChannelBuilders``; ``client/security/``): TLS, ApiVersions and SASL
run in ``connection_setup.ConnectionSetup`` before the connection is READY for requests;
``socket.connection.setup.timeout.ms`` bounds the connect and that set-up. An authentication
refusal fails the node's requests with an error of ``client.errors.AUTHENTICATION_ERRORS``
rather than a retriable connection error, is logged once at WARNING, and reaches ``Metadata``
as a fatal error so callers waiting for metadata raise it.

It also embeds the metadata updater (Java's ``DefaultMetadataUpdater``): when the attached
``Metadata`` is due for a refresh, ``poll`` sends a MetadataRequest to the least loaded node.

Not thread-safe: one thread drives ``send``/``poll``; other threads may only call ``wakeup``.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import selectors
import socket
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.connection import (
    SETUP_STATES,
    Connection,
    ConnectionState,
    InFlightRequest,
    PendingRequest,
)
from spark_kafkalite.client.connection_setup import ConnectionSetup
from spark_kafkalite.client.errors import is_authentication_error
from spark_kafkalite.client.metadata_updater import MetadataUpdater
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import (
    RequestBuilder,
    choose_version,
)
from spark_kafkalite.client.security.security_config import ClientSecurity
from spark_kafkalite.protocol.api_keys import ApiKey
from spark_kafkalite.protocol.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from spark_kafkalite.protocol.fetch_response import decode_fetch_response
from spark_kafkalite.protocol.framing import decode_response, decode_response_header, encode_request

if TYPE_CHECKING:
    from spark_kafkalite.client.metadata import Metadata

__all__ = ["NetworkClient", "now_ms"]

log = logging.getLogger(__name__)


class NetworkClient:
    """Connections to the cluster's nodes (see module docstring).

    Args:
        config: parsed client config (``request.timeout.ms``, ``reconnect.backoff.ms``,
            ``reconnect.backoff.max.ms``, ``max.in.flight.requests.per.connection``,
            ``socket.connection.setup.timeout.ms``, ``client.id``, and the ``security.protocol``,
            ``ssl.*`` and ``sasl.*`` settings of ``ClientSecurity``).
        metadata: the cluster cache to resolve node addresses and keep fresh; may be None only
            for tests that address nodes via ``add_node``.

    Raises:
        InvalidConfigError: the security settings are incomplete or do not load.
    """

    def __init__(self, config: Mapping[str, Any], metadata: Metadata | None = None) -> None:
        self._client_id: str = str(config.get("client.id", "spark-kafkalite"))
        self._request_timeout_ms = int(config.get("request.timeout.ms", 30000))
        self._reconnect_backoff_ms = int(config.get("reconnect.backoff.ms", 50))
        self._reconnect_backoff_max_ms = int(config.get("reconnect.backoff.max.ms", 1000))
        self._connection_setup_timeout_ms = int(config.get("socket.connection.setup.timeout.ms", 10000))
        self._max_in_flight = max(1, int(config.get("max.in.flight.requests.per.connection", 5)))
        self._metadata = metadata
        self._selector = selectors.DefaultSelector()
        self._setup = ConnectionSetup(
            self._selector,
            ClientSecurity.from_config(config),
            self._client_id,
            self._request_timeout_ms,
            self._next_correlation_id,
            on_ready=self._set_ready,
            on_failure=self._fail_connection,
        )
        self._conns: dict[int, Connection] = {}
        self._extra_nodes: dict[int, tuple[str, int]] = {}
        self._correlation_ids = itertools.count(1)
        self._completions: deque[tuple[RequestFuture, Any, BaseException | None]] = deque()
        self._metadata_updater = MetadataUpdater(self, metadata) if metadata is not None else None
        self._closed = False
        self._wakeup_pending = False
        self._wakeup_r, self._wakeup_w = socket.socketpair()
        self._wakeup_r.setblocking(False)
        self._wakeup_w.setblocking(False)
        self._selector.register(self._wakeup_r, selectors.EVENT_READ, None)

    # ------------------------------------------------------------------ public API

    @property
    def request_timeout_ms(self) -> int:
        """``request.timeout.ms``: the default deadline of a request, in ms."""
        return self._request_timeout_ms

    @property
    def reconnect_backoff_ms(self) -> int:
        """``reconnect.backoff.ms``: the first reconnect backoff (it doubles up to
        ``reconnect.backoff.max.ms``)."""
        return self._reconnect_backoff_ms

    def add_node(self, node_id: int, host: str, port: int) -> None:
        """Register an address outside the metadata (tests, bootstrap by hand)."""
        self._extra_nodes[node_id] = (host, port)

    def send(
        self,
        node_id: int,
        request: RequestBuilder | Any,
        *,
        expect_response: bool = True,
        timeout_ms: float | None = None,
    ) -> RequestFuture:
        """Queue ``request`` (a ``RequestBuilder`` or a kio request entity of a fixed version)
        for ``node_id``, connecting first if needed. The future completes during ``poll`` with
        the response entity (``None`` when ``expect_response`` is False, once written), or fails
        with ``KafkaConnectionError`` (disconnect, node in reconnect backoff, unknown node),
        ``KafkaTimeoutError`` (no response within ``timeout_ms``, default ``request.timeout.ms``)
        or ``UnsupportedVersionError``."""
        future = RequestFuture()
        if self._closed:
            self._complete(future, None, KafkaConnectionError("network client is closed"))
            return future
        now = now_ms()
        conn = self._conns.get(node_id)
        if conn is None or conn.state is ConnectionState.DISCONNECTED:
            delay = self.connection_delay_ms(node_id, now)
            if delay > 0:
                error = conn.auth_error if conn is not None and conn.auth_error is not None else None
                self._complete(
                    future,
                    None,
                    error or KafkaConnectionError(f"node {node_id} is in reconnect backoff ({delay:.0f} ms)"),
                )
                return future
            conn = self._connect(node_id, now)
            if conn is None or conn.state is ConnectionState.DISCONNECTED:
                reason = conn.last_error if conn is not None else f"unknown node {node_id}"
                self._complete(
                    future, None, KafkaConnectionError(f"cannot connect to node {node_id}: {reason}")
                )
                return future
        timeout = self._request_timeout_ms if timeout_ms is None else timeout_ms
        conn.pending.append(PendingRequest(request, future, now + timeout, expect_response))
        if conn.state is ConnectionState.READY:
            self._flush_pending(conn, now)
        return future

    def poll(self, timeout_ms: float = 0) -> None:
        """Do network I/O for up to ``timeout_ms``: send queued requests, read responses,
        expire timed-out requests and connections, refresh metadata when due, then run the
        completed futures' callbacks."""
        if self._closed:
            self._run_completions()
            return
        now = now_ms()
        metadata_timeout = self._metadata_updater.maybe_update(now) if self._metadata_updater else math.inf
        timeout = min(float(timeout_ms), metadata_timeout, self._next_deadline(now) - now)
        if self._completions:
            timeout = 0
        events = self._selector.select(max(0.0, timeout) / 1000.0)
        self._wakeup_pending = False
        for key, mask in events:
            conn = key.data
            if conn is None:
                self._drain_wakeup()
                continue
            if conn.sock is None or key.fileobj is not conn.sock:
                continue
            try:
                if mask & selectors.EVENT_WRITE and conn.state is ConnectionState.CONNECTING:
                    conn.finish_connect()
                    self._setup.on_connected(conn)
                if conn.state is ConnectionState.TLS_HANDSHAKE:
                    self._setup.on_tls_progress(conn)
                    continue
                if mask & selectors.EVENT_WRITE:
                    conn.flush(self._selector)
                if mask & selectors.EVENT_READ and conn.sock is not None:
                    for frame in conn.read_frames():
                        self._handle_frame(conn, frame)
                        if conn.sock is None:
                            break
                    if conn.eof:
                        raise ConnectionError(f"node {conn.node_id} closed the connection")
            except KafkaError as exc:  # the TLS handshake refused a certificate
                self._fail_connection(conn, exc)
            except (OSError, ValueError) as exc:
                self._fail_connection(
                    conn, KafkaConnectionError(f"I/O with node {conn.node_id} failed: {exc}")
                )
        now = now_ms()
        self._expire(now)
        for conn in list(self._conns.values()):
            if conn.state is ConnectionState.READY and conn.pending:
                self._flush_pending(conn, now)
        self._run_completions()

    def wait_for(self, future: RequestFuture, timeout_ms: float | None = None) -> Any:
        """Drive ``poll`` until ``future`` completes; return its value or raise its exception.

        Raises:
            KafkaTimeoutError: not done within ``timeout_ms`` (the request stays queued).
        """
        deadline = math.inf if timeout_ms is None else now_ms() + timeout_ms
        while not future.is_done():
            remaining = deadline - now_ms()
            if remaining <= 0:
                raise KafkaTimeoutError(f"no response within {timeout_ms} ms")
            self.poll(min(remaining, 1000.0))
        return future.result()

    def send_and_wait(
        self, node_id: int, request: RequestBuilder | Any, timeout_ms: float | None = None
    ) -> Any:
        """``send`` then ``wait_for``; returns the response entity or raises."""
        future = self.send(node_id, request, timeout_ms=timeout_ms)
        return self.wait_for(future, None if timeout_ms is None else timeout_ms + 1000)

    def send_and_wait_until(
        self, node_id: int, request: RequestBuilder | Any, deadline_ms: float, retry_backoff_ms: float
    ) -> Any:
        """``send_and_wait`` to one broker, retried after ``retry_backoff_ms`` on connection
        errors and timeouts until ``deadline_ms`` (``now_ms()`` clock), as Java's admin client
        retries a call to a fixed node.

        Raises:
            KafkaTimeoutError: no answer by the deadline (naming the last connection error).
            KafkaError: the response could not be read.
        """
        last: BaseException | None = None
        while True:
            try:
                return self.send_and_wait(node_id, request, max(1.0, deadline_ms - now_ms()))
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last = exc
            if now_ms() >= deadline_ms:
                raise KafkaTimeoutError(f"broker {node_id} did not answer in time: {last}")
            self.poll(min(retry_backoff_ms, max(0.0, deadline_ms - now_ms())))

    def ready(self, node_id: int) -> bool:
        """True if a request to ``node_id`` can be written now; otherwise start connecting
        (unless in reconnect backoff) and return False (Java ``NetworkClient.ready``)."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.state is ConnectionState.READY:
            return len(conn.in_flight) + len(conn.pending) < self._max_in_flight
        if conn is None or conn.state is ConnectionState.DISCONNECTED:
            now = now_ms()
            if self.connection_delay_ms(node_id, now) <= 0:
                self._connect(node_id, now)
        return False

    def is_unavailable(self, node_id: int) -> bool:
        """True when ``node_id`` is disconnected and in reconnect backoff (Java ``isUnavailable``)."""
        conn = self._conns.get(node_id)
        return (
            conn is not None
            and conn.state is ConnectionState.DISCONNECTED
            and self.connection_delay_ms(node_id) > 0
        )

    def connection_delay_ms(self, node_id: int, now: float | None = None) -> float:
        """Milliseconds until a connection attempt to ``node_id`` is allowed (0 = now)."""
        conn = self._conns.get(node_id)
        if conn is None or conn.state is not ConnectionState.DISCONNECTED:
            return 0.0
        return max(0.0, conn.next_attempt_ms - (now_ms() if now is None else now))

    def in_flight_count(self, node_id: int | None = None) -> int:
        """Requests queued or awaiting a response, for one node or all."""
        conns = self._conns.values() if node_id is None else [c for c in [self._conns.get(node_id)] if c]
        return sum(len(c.in_flight) + len(c.pending) for c in conns)

    def api_version(self, node_id: int, api_key: int) -> tuple[int, int] | None:
        """The broker's (min, max) for ``api_key`` once negotiated, else None."""
        conn = self._conns.get(node_id)
        if conn is None or conn.api_versions is None:
            return None
        return conn.api_versions.get(int(api_key))

    def least_loaded_node(self) -> int | None:
        """The known node with the fewest outstanding requests, preferring ready connections,
        then connecting ones, then nodes not in reconnect backoff; None if all are backing off."""
        node_ids = self._known_node_ids()
        random.shuffle(node_ids)
        now = now_ms()
        best: int | None = None
        best_load = math.inf
        connecting: int | None = None
        idle: int | None = None
        for node_id in node_ids:
            conn = self._conns.get(node_id)
            if conn is not None and conn.state is ConnectionState.READY:
                load = len(conn.in_flight) + len(conn.pending)
                if load == 0:
                    return node_id
                if load < best_load:
                    best, best_load = node_id, load
            elif conn is not None and conn.state is not ConnectionState.DISCONNECTED:
                connecting = node_id
            elif self.connection_delay_ms(node_id, now) <= 0:
                idle = node_id
        if best is not None and best_load < self._max_in_flight:
            return best
        return connecting if connecting is not None else idle if idle is not None else best

    def wakeup(self) -> None:
        """Interrupt a blocking ``poll`` (safe from any thread; repeated calls before the poll
        wakes up cost nothing)."""
        if self._wakeup_pending:
            return
        self._wakeup_pending = True
        try:
            self._wakeup_w.send(b"\x00")
        except (BlockingIOError, OSError):  # the pipe is full (a wakeup is pending anyway) or closed
            pass

    def close(self) -> None:
        """Close every connection, failing outstanding requests with ``KafkaConnectionError``."""
        if self._closed:
            return
        for conn in list(self._conns.values()):
            if conn.state is not ConnectionState.DISCONNECTED:
                self._fail_connection(conn, KafkaConnectionError("network client closed"), backoff=False)
        self._closed = True
        self._run_completions()
        try:
            self._selector.unregister(self._wakeup_r)
        except (KeyError, ValueError):  # not registered, or the selector is already closed
            pass
        self._wakeup_r.close()
        self._wakeup_w.close()
        self._selector.close()

    # ------------------------------------------------------------------ connections

    def _known_node_ids(self) -> list[int]:
        ids: list[int] = list(self._metadata.node_ids()) if self._metadata is not None else []
        ids.extend(n for n in self._extra_nodes if n not in ids)
        return ids

    def _address(self, node_id: int) -> tuple[str, int] | None:
        if node_id in self._extra_nodes:
            return self._extra_nodes[node_id]
        return self._metadata.node_address(node_id) if self._metadata is not None else None

    def _connect(self, node_id: int, now: float) -> Connection | None:
        address = self._address(node_id)
        if address is None:
            return None
        conn = self._conns.get(node_id)
        if conn is None:
            conn = self._conns[node_id] = Connection(node_id, *address)
        conn.host, conn.port = address
        conn.state = ConnectionState.CONNECTING
        conn.connect_deadline_ms = now + self._connection_setup_timeout_ms
        try:
            conn.open(self._selector)
        except OSError as exc:
            log.debug("connect to node %s (%s:%s) failed: %s", node_id, conn.host, conn.port, exc)
            self._fail_connection(conn, KafkaConnectionError(f"connect to node {node_id} failed: {exc}"))
        return conn

    def _set_ready(self, conn: Connection) -> None:
        conn.state = ConnectionState.READY
        conn.failures = 0
        conn.auth_error = None
        self._flush_pending(conn, now_ms())

    def _fail_connection(self, conn: Connection, exc: KafkaError, backoff: bool = True) -> None:
        conn.close_socket(self._selector)
        was_connected = conn.state is not ConnectionState.DISCONNECTED
        conn.state = ConnectionState.DISCONNECTED
        conn.api_versions = None
        conn.last_error = str(exc)
        if is_authentication_error(exc):
            if conn.auth_error is None or str(conn.auth_error) != str(exc):
                log.warning(
                    "connection to node %s (%s:%s) failed authentication: %s",
                    conn.node_id,
                    conn.host,
                    conn.port,
                    exc,
                )
            conn.auth_error = exc
        if backoff:
            conn.failures += 1
            delay = min(self._reconnect_backoff_ms * 2 ** (conn.failures - 1), self._reconnect_backoff_max_ms)
            conn.next_attempt_ms = now_ms() + delay * random.uniform(0.8, 1.2)
        else:
            conn.next_attempt_ms = 0.0
        for request in conn.in_flight:
            if request.future is not None:
                self._complete(request.future, None, exc)
        for pending in conn.pending:
            self._complete(pending.future, None, exc)
        conn.in_flight.clear()
        conn.pending.clear()
        if was_connected and backoff:
            log.info("disconnected from node %s (%s:%s): %s", conn.node_id, conn.host, conn.port, exc)
            if self._metadata is not None:
                self._metadata.request_update()

    # ------------------------------------------------------------------ sending and receiving

    def _next_correlation_id(self) -> int:
        cid = next(self._correlation_ids)
        if cid >= 2**31 - 1:
            self._correlation_ids = itertools.count(1)
        return cid

    def _flush_pending(self, conn: Connection, now: float) -> None:
        while (
            conn.pending and len(conn.in_flight) < self._max_in_flight and conn.state is ConnectionState.READY
        ):
            pending = conn.pending.popleft()
            try:
                if isinstance(pending.request, RequestBuilder):
                    version = choose_version(conn.node_id, conn.api_versions, pending.request)
                    entity = pending.request.build(version)
                else:
                    entity = pending.request
                correlation_id = self._next_correlation_id()
                frame = encode_request(entity, correlation_id, self._client_id)
            except Exception as exc:  # building/encoding failed: fail only this request
                err = exc if isinstance(exc, KafkaError) else KafkaError(f"cannot encode request: {exc!r}")
                self._complete(pending.future, None, err)
                continue
            if pending.expect_response:
                conn.in_flight.append(
                    InFlightRequest(
                        correlation_id,
                        int(entity.__api_key__),
                        int(entity.__version__),
                        pending.future,
                        pending.deadline_ms,
                        False,
                    )
                )
            try:
                conn.write(frame, self._selector)
            except OSError as exc:
                self._fail_connection(
                    conn, KafkaConnectionError(f"send to node {conn.node_id} failed: {exc}")
                )
                if not pending.expect_response:
                    self._complete(pending.future, None, KafkaConnectionError(str(exc)))
                return
            if not pending.expect_response:
                self._complete(pending.future, None, None)

    def _handle_frame(self, conn: Connection, frame: memoryview) -> None:
        if not conn.in_flight:
            self._fail_connection(conn, KafkaConnectionError(f"unexpected response from node {conn.node_id}"))
            return
        request = conn.in_flight.popleft()
        correlation_id = decode_response_header(frame)
        if correlation_id != request.correlation_id:
            self._fail_connection(
                conn,
                KafkaConnectionError(
                    f"correlation id mismatch from node {conn.node_id}: got {correlation_id}, "
                    f"expected {request.correlation_id}"
                ),
            )
            return
        if request.internal:
            self._setup.handle_response(conn, request, frame)
            return
        if request.future is None:  # only internal requests have none
            raise RuntimeError(f"{request.api_key!r} request to node {conn.node_id} has no future")
        try:
            if request.api_key == ApiKey.FETCH:  # record sets as views of the frame, not copies
                _, entity = decode_fetch_response(request.api_version, frame)
            else:
                _, entity = decode_response(request.api_key, request.api_version, frame)
        except KafkaError as exc:
            self._complete(request.future, None, exc)
            return
        self._complete(request.future, entity, None)

    # ------------------------------------------------------------------ timeouts, completions

    def _next_deadline(self, now: float) -> float:
        return min((conn.next_deadline_ms() for conn in self._conns.values()), default=math.inf)

    def _expire(self, now: float) -> None:
        have_brokers = self._metadata is not None and bool(self._metadata.fetch().nodes)
        for conn in list(self._conns.values()):
            if conn.state is ConnectionState.DISCONNECTED:
                continue
            if conn.node_id < 0 and have_brokers and not conn.load and conn.node_id not in self._extra_nodes:
                # a bootstrap pseudo-node: the real brokers are known now
                self._fail_connection(
                    conn, KafkaConnectionError("bootstrap connection no longer needed"), backoff=False
                )
                continue
            if conn.state in SETUP_STATES and now >= conn.connect_deadline_ms:
                self._fail_connection(
                    conn,
                    KafkaConnectionError(
                        f"connection setup to node {conn.node_id} timed out ({conn.state.name.lower()})"
                    ),
                )
                continue
            expired = [r for r in conn.in_flight if now >= r.deadline_ms]
            for request in expired:  # Java closes the connection of a timed-out request
                if request.future is not None:
                    name = ApiKey(request.api_key).name
                    self._complete(
                        request.future, None, KafkaTimeoutError(f"{name} to node {conn.node_id} timed out")
                    )
            if expired:
                self._fail_connection(
                    conn, KafkaConnectionError(f"node {conn.node_id} disconnected after a request timed out")
                )
                continue
            for pending in conn.take_expired_pending(now):
                self._complete(
                    pending.future,
                    None,
                    KafkaTimeoutError(f"request to node {conn.node_id} timed out before it was sent"),
                )

    def _complete(self, future: RequestFuture, value: Any, exc: BaseException | None) -> None:
        self._completions.append((future, value, exc))

    def _run_completions(self) -> None:
        while self._completions:
            future, value, exc = self._completions.popleft()
            try:
                if exc is None:
                    future.success(value)
                else:
                    future.failure(exc)
            except Exception:  # a callback bug must not break the I/O loop
                log.exception("request callback failed")

    def _drain_wakeup(self) -> None:
        try:
            while self._wakeup_r.recv(1024):
                pass
        except (BlockingIOError, OSError):  # drained (no more bytes), or the pipe is closed
            pass
