"""Clients kept per Python worker process across Spark tasks and micro-batches (issue #10 item 5).

Spark reuses its Python workers across tasks (``spark.python.worker.reuse``, the default), so a
client opened by one task can serve the next one instead of reconnecting and re-fetching
metadata every micro-batch. :class:`ClientPool` is the sink's version of Spark's
``CachedKafkaProducer`` / ``InternalKafkaProducerPool`` (and the reader's consumer cache,
Spark's ``KafkaDataConsumer`` pool, simplified): clients are keyed by their full
configuration (the same options get the same client), lent out exclusively (a worker runs one
task at a time, so this is what Spark's shared producer amounts to here), given back after a
task succeeded, and closed instead when the task failed (a producer that saw an error may hold
a broken connection or idempotent state; the next task starts clean). Clients idle longer than
``idle_timeout_s`` are closed on the next acquisition (Spark's
``spark.kafka.producer.cache.timeout``, 10 minutes), and, for a pool registered with
:meth:`ClientPool.close_at_exit` (the sink's), every idle client is closed when the worker exits.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from spark_kafkalite.datasource.client_protocols import Closeable

__all__ = ["ClientPool", "PoolKey"]

log = logging.getLogger(__name__)

PoolKey = tuple[tuple[str, str], ...]
C = TypeVar("C", bound=Closeable)


def _close_quietly(client: Closeable) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - closing must not mask the task's real error
        log.debug("error closing pooled client", exc_info=True)


class ClientPool(Generic[C]):
    """Idle clients (of type ``C``: a consumer, producer or admin protocol) per configuration.

    Args:
        factory: creates a client from a configuration dict (called outside the lock).
        idle_timeout_s: idle clients older than this are closed at the next :meth:`acquire`.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(
        self,
        factory: Callable[[dict[str, Any]], C],
        idle_timeout_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._idle: dict[PoolKey, list[tuple[float, C]]] = {}
        self.idle_timeout_s = idle_timeout_s
        self._clock = clock
        self.created = 0  # clients made by the factory (for tests and the bench)

    @staticmethod
    def key(config: Mapping[str, Any]) -> PoolKey:
        return tuple(sorted((str(k), str(v)) for k, v in config.items()))

    def _evict_expired(self, now: float) -> list[C]:
        expired: list[C] = []
        for key in list(self._idle):
            keep = [(t, c) for t, c in self._idle[key] if now - t <= self.idle_timeout_s]
            expired.extend(c for t, c in self._idle[key] if now - t > self.idle_timeout_s)
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        return expired

    def acquire(self, config: Mapping[str, Any]) -> C:
        """An idle client made from the same configuration, else a new one."""
        key = self.key(config)
        client = None
        with self._lock:
            expired = self._evict_expired(self._clock())
            idle = self._idle.get(key)
            if idle:
                client = idle.pop()[1]
        for old in expired:
            _close_quietly(old)
        if client is not None:
            return client
        client = self._factory(dict(config))
        self.created += 1
        return client

    def release(self, config: Mapping[str, Any], client: C) -> None:
        """Keep ``client`` for the next task with the same configuration."""
        with self._lock:
            self._idle.setdefault(self.key(config), []).append((self._clock(), client))

    def discard(self, client: C) -> None:
        """Close ``client`` instead of keeping it (its task failed)."""
        _close_quietly(client)

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._idle.values())

    def close_all(self) -> None:
        """Close every idle client (lent-out clients are closed by their lease)."""
        with self._lock:
            idle = [c for entries in self._idle.values() for _, c in entries]
            self._idle.clear()
        for client in idle:
            _close_quietly(client)

    def close_at_exit(self) -> ClientPool[C]:
        """Register :meth:`close_all` to run when the worker process exits; returns self."""
        atexit.register(self.close_all)
        return self
