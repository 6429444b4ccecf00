"""Per-request context handed from the socket server to the API layer (Kafka's ``RequestContext``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from spark_kafkalite.protocol.acl import ANONYMOUS_PRINCIPAL
from spark_kafkalite.protocol.framing import RequestHeaderInfo

__all__ = ["RequestContext", "CloseConnection"]


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
    """

    header: RequestHeaderInfo
    connection_id: str
    client_host: str
    listener_name: str
    received_time_s: float
    principal: str = ANONYMOUS_PRINCIPAL
    release_slot: Callable[[], None] = lambda: None

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
