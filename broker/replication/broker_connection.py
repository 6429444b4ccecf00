"""An asyncio connection from this broker to another one (Kafka's ``NetworkClient`` as used by
``BrokerBlockingSender`` in replica fetchers), speaking the Kafka protocol through
:mod:`spark_kafkalite.protocol.framing` (the broker never imports the client package).

One request in flight at a time (a fetcher sends one request per round); every request has a
timeout (``replica.socket.timeout.ms``); any error closes the connection and the next request
reconnects. With an :class:`~broker.network.channel_builders.InterBrokerSecurity` the connection
is TLS (certificate and host name checked) and/or SASL-authenticated before its first request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from broker.network.channel_builders import InterBrokerSecurity
from broker.security.sasl_client import sasl_client_authenticate
from spark_kafkalite.protocol.framing import SIZE_PREFIX, decode_response, encode_request

if TYPE_CHECKING:
    from kio.static.protocol import RequestPayload

__all__ = ["BrokerConnection", "BrokerConnectionError"]

logger = logging.getLogger(__name__)

_MAX_RESPONSE_BYTES = 1 << 30


class BrokerConnectionError(ConnectionError):
    """The remote broker could not be reached or the exchange failed (closed, timed out,
    malformed response)."""


class BrokerConnection:
    """A connection to ``host:port`` used by one task.

    Args:
        host / port: the remote broker's inter-broker listener.
        client_id: sent in request headers (e.g. ``broker-2-fetcher-0``).
        request_timeout_ms: per request (connect + send + receive).
        security: TLS/SASL of the inter-broker listener (None = PLAINTEXT).
    """

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        request_timeout_ms: int = 30000,
        security: InterBrokerSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.security = security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0

    @property
    def connected(self) -> bool:
        return self._writer is not None and not self._writer.is_closing()

    async def _connect(self) -> None:
        security = self.security
        context = security.ssl_context if security is not None else None
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, limit=1 << 20, ssl=context, server_hostname=self.host if context else None
        )
        if security is not None and security.sasl_mechanism is not None:
            await sasl_client_authenticate(
                self._round_trip, security.sasl_mechanism, security.username, security.password
            )

    async def send(self, request: RequestPayload, timeout_ms: int | None = None) -> Any:
        """Send a kio request entity and return the decoded response entity.

        Raises:
            BrokerConnectionError: connect/send/receive failed or timed out (the connection is
                closed).
        """
        return await self.send_encoded(
            lambda correlation_id: encode_request(request, correlation_id, self.client_id),
            lambda frame: decode_response(request.__api_key__, request.__version__, frame),
            type(request).__name__,
            timeout_ms,
        )

    async def send_encoded(
        self,
        encode: Callable[[int], bytes],
        decode: Callable[[bytes], tuple[int, Any]],
        what: str,
        timeout_ms: int | None = None,
    ) -> Any:
        """:meth:`send` with a hand-written codec: ``encode(correlation_id)`` gives the request
        frame (size prefix included), ``decode(frame)`` the (correlation id, response) of the
        response frame without its size prefix. ``what`` names the request in errors.

        Raises:
            BrokerConnectionError: as :meth:`send`.
        """
        timeout_s = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        try:
            # a timeout scope, not wait_for: no task per request, no extra loop turn per answer
            async with asyncio.timeout(timeout_s):
                return await self._exchange(encode, decode)
        except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError) as exc:
            await self.close()
            raise BrokerConnectionError(f"request {what} to {self.host}:{self.port} failed: {exc!r}") from exc
        except asyncio.CancelledError:
            await self.close()
            raise
        except Exception as exc:  # malformed response (KafkaError from decoding, ...)
            await self.close()
            raise BrokerConnectionError(
                f"bad response to {what} from {self.host}:{self.port}: {exc!r}"
            ) from exc

    async def _exchange(
        self, encode: Callable[[int], bytes], decode: Callable[[bytes], tuple[int, Any]]
    ) -> Any:
        if not self.connected:
            await self._connect()
        return await self._round_trip_frames(encode, decode)

    async def _round_trip(self, request: RequestPayload) -> Any:
        """One kio request and its response on the open connection (SASL authentication)."""
        return await self._round_trip_frames(
            lambda correlation_id: encode_request(request, correlation_id, self.client_id),
            lambda frame: decode_response(request.__api_key__, request.__version__, frame),
        )

    async def _round_trip_frames(
        self, encode: Callable[[int], bytes], decode: Callable[[bytes], tuple[int, Any]]
    ) -> Any:
        if self._reader is None or self._writer is None:  # closed meanwhile: reported as a failed request
            raise ConnectionError(f"not connected to {self.host}:{self.port}")
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        correlation_id = self._correlation_id
        self._writer.write(encode(correlation_id))
        await self._writer.drain()
        size = SIZE_PREFIX.unpack(await self._reader.readexactly(4))[0]
        if not 0 < size <= _MAX_RESPONSE_BYTES:
            raise EOFError(f"invalid response size {size}")
        frame = await self._reader.readexactly(size)
        got_id, response = decode(frame)
        if got_id != correlation_id:
            raise EOFError(f"correlation id {got_id} != {correlation_id}")
        return response

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:  # the peer reset the connection: it is closed either way
                pass
