"""``MetadataUpdater``: sends MetadataRequests when ``Metadata`` is due (Java
``NetworkClient.DefaultMetadataUpdater``). Driven from ``NetworkClient.poll``; at most one
metadata request is in flight, to the least loaded node."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.errors import is_authentication_error
from spark_kafkalite.client.request_future import RequestFuture

if TYPE_CHECKING:
    from spark_kafkalite.client.metadata import Metadata
    from spark_kafkalite.client.network_client import NetworkClient

__all__ = ["MetadataUpdater"]

log = logging.getLogger(__name__)


class MetadataUpdater:
    """Keeps a client's ``Metadata`` fresh from its ``NetworkClient.poll`` (Java
    ``NetworkClient.DefaultMetadataUpdater``): one MetadataRequest at a time to the least loaded
    node when the metadata is due (requested, or older than ``metadata.max.age.ms``)."""

    def __init__(self, client: NetworkClient, metadata: Metadata) -> None:
        self._client = client
        self._metadata = metadata
        self._in_flight: RequestFuture | None = None

    def maybe_update(self, now_ms: float) -> float:
        """Send a MetadataRequest if one is due; returns ms until the next check is needed."""
        metadata = self._metadata
        if self._in_flight is not None:
            return math.inf
        wait = metadata.time_to_next_update(now_ms)
        if wait > 0:
            return wait
        node_id = self._client.least_loaded_node()
        if node_id is None:
            return float(self._client.reconnect_backoff_ms)
        metadata.mark_update_attempt(now_ms)
        future = self._client.send(node_id, metadata.build_request())
        self._in_flight = future
        future.add_callback(self._on_response)
        return math.inf

    def _on_response(self, future: RequestFuture) -> None:
        self._in_flight = None
        if future.succeeded():
            self._metadata.update(future.value, now_ms())
        else:
            log.debug("metadata request failed: %s", future.exception)
            exc = future.exception
            self._metadata.failed_update(now_ms(), exc if is_authentication_error(exc) else None)
