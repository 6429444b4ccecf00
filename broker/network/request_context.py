"""Per-request context handed from the socket server to the API layer (Kafka's ``RequestContext``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from spark_kafkalite.protocol.acl import ANONYMOUS_PRINCIPAL
from spark_kafkalite.protocol.framing import RequestHeaderInfo

__all__ = ["RequestContext", "RequestTimeline", "CloseConnection"]


class RequestTimeline:
    """The instants of one request that its parts of Kafka's ``RequestChannel.Request`` times
    need beyond its arrival (``time.monotonic()`` seconds).

    Attributes:
        parked_s: when the request first parked in a purgatory (0.0: it never parked); Kafka's
            ``apiLocalCompleteTimeNanos``, so the remote time runs from here.
        on_sent: set by the API layer once the response is ready; the socket server calls
            :meth:`sent` when it wrote the response.
    """

    __slots__ = ("parked_s", "on_sent")

    def __init__(self) -> None:
        self.parked_s = 0.0
        self.on_sent: Callable[[float, float], None] | None = None

    def sent(self, written_s: float) -> None:
        """The response was handed to the socket at ``written_s`` and is now written (the write
        buffer drained); calls ``on_sent(written_s, now)`` once."""
        on_sent = self.on_sent
        if on_sent is not None:
            self.on_sent = None
            on_sent(written_s, time.monotonic())


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who sent a request and how.

    Attributes:
        header: the parsed request header (api key, version, correlation id, client id).
        connection_id: Kafka-style id ``local_addr:port-remote_addr:port-n``.
        client_host: remote address of the client.
        listener_name: the listener the request arrived on (e.g. ``PLAINTEXT``); Metadata
            answers with the brokers' endpoints of that listener.
        received_time_s: ``time.monotonic()`` when the frame was fully read.
        principal: who the connection authenticated as (Kafka's ``KafkaPrincipal`` string):
            ``User:ANONYMOUS`` (PLAINTEXT, TLS without a client certificate), ``User:<name>``
            (SASL) or ``User:<certificate subject DN>`` (TLS client authentication).
        release_slot: frees the request's ``queued.max.requests`` slot; a handler calls it when
            the request parks in a purgatory (Kafka's request queue holds only requests waiting
            for a handler thread, never delayed operations). Idempotent.
        timeline: the request's park and send instants (see :class:`RequestTimeline`).
    """

    header: RequestHeaderInfo
    connection_id: str
    client_host: str
    listener_name: str
    received_time_s: float
    principal: str = ANONYMOUS_PRINCIPAL
    release_slot: Callable[[], None] = lambda: None
    timeline: RequestTimeline = field(default_factory=RequestTimeline)

    def park(self) -> None:
        """The request parks in a purgatory: note when (first time only) and free its
        ``queued.max.requests`` slot."""
        timeline = self.timeline
        if not timeline.parked_s:
            timeline.parked_s = time.monotonic()
        self.release_slot()

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


class CloseConnection(Exception):
    """Raised by the API layer to make the socket server close the connection without a
    response (Kafka closes on unparsable requests, unsupported versions and failed acks=0
    produces)."""
