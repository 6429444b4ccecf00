"""Produce requests that wait for their replicas while the connection reads on.

Kafka's ``SocketServer`` mutes a channel from a complete request until its response is sent, so
on the broker one request per connection is in flight. An ``acks=all`` Produce then holds its
connection for a whole replication round trip (its followers' fetch of the appended batch and
their next fetch, which moves the high watermark), and a producer's pipeline
(``max.in.flight.requests.per.connection``, up to 5 with idempotence in librdkafka and the Java
client) waits behind it request by request. librdkafka sends one partition's batch per
ProduceRequest (librdkafka issue #1700), so a producer spread over thousands of partitions
carries few records per request and each of them costs a full round trip.

Here, once a Produce request has appended and parked in the produce purgatory
(``RequestContext.release_slot`` is its signal), the connection reads its next frame. The
protocol's ordering guarantee holds ("requests will be processed in the order they are sent and
responses will return in that order", Kafka's protocol guide):

- appends happen one request at a time, in arrival order: the next frame is read only after the
  previous Produce appended (or was answered);
- responses are written in request order, by :class:`InFlightProduces`;
- only a Produce is read past a parked Produce: a request of any other API waits until every
  Produce before it has been answered, exactly as under Kafka's muting;
- at most :data:`MAX_IN_FLIGHT_PRODUCES` parked Produce requests per connection.

The parked requests' frames stay counted in ``queued.max.request.bytes`` until they are answered.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from broker.network.request_context import CloseConnection
from spark_kafkalite.protocol.framing import FrameChunks

__all__ = ["InFlightProduces", "MAX_IN_FLIGHT_PRODUCES"]

logger = logging.getLogger(__name__)

MAX_IN_FLIGHT_PRODUCES = 5
"""Parked Produce requests per connection before the connection stops reading: the largest
``max.in.flight.requests.per.connection`` an idempotent producer may use (Kafka's
``ProducerConfig``: at most 5 with ``enable.idempotence``)."""

Response = bytes | FrameChunks | None


class InFlightProduces:
    """The parked Produce requests of one connection, answered in request order.

    :meth:`handle` runs a Produce request's handler (returning its response frame, a list of
    chunks, or None for ``acks=0``) and keeps it here if it parks. When the oldest finishes, its response and those of any
    finished requests after it are written at once (Produce responses are small: no
    backpressure wait is needed per response; the connection's processor drains the transport
    before reading its next frame).

    A handler that fails (``CloseConnection``, a connection error, or a bug) closes the
    connection, as the processor does for a request answered in line; the requests behind it
    are cancelled (their appends stand; the producer retries them, and idempotence keeps them
    once).

    Args:
        writer: the connection's stream writer.
        connection_id: names the connection in log lines.
    """

    def __init__(self, writer: asyncio.StreamWriter, connection_id: str) -> None:
        self._writer = writer
        self._connection_id = connection_id
        self._queue: deque[asyncio.Future[Response]] = deque()
        #: a queued request's ``RequestTimeline.sent`` (called once its response is written)
        self._on_written: dict[asyncio.Future[Response], Callable[[float], None]] = {}

    def __len__(self) -> int:
        return len(self._queue)

    async def handle(
        self,
        start: Callable[[Callable[[], None]], Awaitable[Response]],
        release_slot: Callable[[], None],
        release_frame: Callable[[], None],
        on_written: Callable[[float], None],
    ) -> Response:
        """Run one Produce request until it is answered or parks waiting for its replicas.

        Args:
            start: ``start(parked)`` -> the request's handler, given ``parked`` as its
                ``RequestContext.release_slot`` (the produce purgatory calls it on parking).
            release_slot: frees the request's ``queued.max.requests`` slot (on parking or
                when it finished, whichever comes first).
            release_frame: returns the frame's bytes to ``queued.max.request.bytes`` once
                the handler finished.
            on_written: ``on_written(written_s)`` once this object wrote a queued request's
                response (the caller does it for a response it gets back).

        Returns:
            the response to write now when the request finished without parking and no
            earlier Produce waits; otherwise None (this object writes it later, in order).

        Raises:
            whatever the handler raised, when it finished without parking and no earlier
            Produce waits (``CloseConnection`` among them).
        """
        settled: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def parked() -> None:
            if not settled.done():
                release_slot()
                settled.set_result(None)

        task: asyncio.Future[Response] = asyncio.ensure_future(start(parked))
        task.add_done_callback(functools.partial(_finished, release_frame, settled))
        try:
            await settled
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            release_slot()
        if task.done() and not self._queue:
            return task.result()
        self._queue.append(task)
        self._on_written[task] = on_written
        task.add_done_callback(self._answer_finished)
        return None

    async def wait_below(self, count: int) -> None:
        """Return once fewer than ``count`` requests wait (``count=1``: all answered)."""
        while len(self._queue) >= count:
            await asyncio.wait((self._queue[0],))

    def cancel(self) -> None:
        """Cancel every waiting request (the connection is closing)."""
        queue, self._queue = self._queue, deque()
        self._on_written.clear()
        for task in queue:
            task.cancel()

    def _answer_finished(self, _task: asyncio.Future[Response]) -> None:
        writer = self._writer
        queue = self._queue
        while queue and queue[0].done():
            task = queue.popleft()
            on_written = self._on_written.pop(task, None)
            exc = None if task.cancelled() else task.exception()
            if task.cancelled() or exc is not None:
                if exc is not None and not isinstance(exc, (CloseConnection, ConnectionError)):
                    logger.error(
                        "unexpected error on connection %s; closing it",
                        self._connection_id,
                        exc_info=exc,
                    )
                else:
                    logger.debug("closing connection %s: %r", self._connection_id, exc)
                self.cancel()
                writer.close()
                return
            response = task.result()
            if response is None or writer.is_closing():
                continue
            written_s = time.monotonic()
            if isinstance(response, list):
                writer.writelines(response)
            else:
                writer.write(response)
            if on_written is not None:
                on_written(written_s)


def _finished(
    release_frame: Callable[[], None], settled: asyncio.Future[None], _task: asyncio.Future[Any]
) -> None:
    release_frame()
    if not settled.done():
        settled.set_result(None)
