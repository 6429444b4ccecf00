"""KIP-227 fetch sessions, broker side (Kafka's ``FetchSession.scala``: ``FetchManager``,
``FetchSessionCache``, ``FetchContext``s, ``CachedPartition``).

``FetchSessionCache.new_context(version, request)`` classifies a FetchRequest by its
``session_id`` / ``session_epoch``:

* (0, -1), or (ID, -1): **sessionless** full fetch; a named session is closed. Response session 0.
* (0, 0), or (ID, 0): **full** fetch; a named session is closed and a new one is created after the
  read if the cache has room (or can evict, below). Response session = the new id or 0.
* (ID, N > 0): **incremental** fetch in session ID. Unknown ID -> ``FETCH_SESSION_ID_NOT_FOUND``;
  N != the session's epoch -> ``INVALID_FETCH_SESSION_EPOCH``; a session created with topic ids
  used from a version < 13 (or the reverse) -> ``FETCH_SESSION_TOPIC_ID_ERROR``. Otherwise the
  request's partitions are added / updated, ``forgotten_topics_data`` removed, the epoch advances,
  and the session's *marked* partitions are read with their cached fetch parameters. The response holds
  only partitions with records, a changed high watermark / last stable offset / log start offset,
  an error (which also resets the cached high watermark to -1, so the partition is resent once the
  error clears), a preferred read replica or a diverging epoch. A session left with no partitions
  is closed and the request becomes sessionless (response session 0).

Errors answer with the error code at top level, session id 0 and no partitions.

Marked partitions (cost follows the work): Kafka's ``IncrementalFetchContext`` reads every
partition of the session on each request; here a session reads only the partitions that may have
something to say. A partition is marked when the request names it (added or updated), when the
broker reports a change to it (:meth:`FetchSessionCache.partition_changed`: an append, a high
watermark or log start move, a leadership change or a deletion, the events that also wake parked
fetches), and it stays marked after a read that returned records, an error or a diverging epoch,
or that the fetch handler reports as still pending (data beyond the fetch offset that did not fit,
a follower outside the ISR). Any other partition read is unmarked: its response would repeat the
cached one. So an idle incremental fetch reads and watches no partition, whatever the session
size; a parked incremental fetch is woken by a change to any partition of its session.

Cache (``max.incremental.fetch.session.cache.slots``, default 1000; 0 disables sessions): a new
session may evict (``tryEvict``) the least recently used session if it has been unused for more
than ``eviction_ms`` (120 s, ``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS``); otherwise the smallest
"evictable" session by ``(privileged, size, id)`` if the new one is not smaller. A session is
evictable by anyone once older than ``eviction_ms``; consumer (unprivileged) sessions are
evictable by follower (privileged) sessions at any age. Session ids are random in [1, 2^31-1).
Kafka 3.8+ splits the cache in shards by id; one shard here (one event loop, no locks).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from broker.replication.fetch_context import (
    FetchContext,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
)
from broker.replication.fetch_session import (
    CachedPartition,
    FetchRequestParams,
    FetchSession,
    resolve_waiter,
)
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from broker.replication.delayed_fetch import FetchPurgatory

__all__ = [
    "FetchSessionCache",
    "fetch_session_cache_for",
    "MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS",
    "CACHE_SLOTS_KEY",
]

log = logging.getLogger(__name__)

MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
CACHE_SLOTS_KEY = "max.incremental.fetch.session.cache.slots"
_TOPIC_ID_VERSION = 13


def _now_ms() -> float:
    return time.monotonic() * 1000.0


# ------------------------------------------------------------------ cache


class FetchSessionCache:
    """Fetch sessions of one broker (Kafka ``FetchSessionCache`` + ``FetchManager``).

    Args:
        max_entries: ``max.incremental.fetch.session.cache.slots`` (0 disables sessions).
        eviction_ms: minimum idle time (ms) after which a session is stale, and age after which
            any session becomes evictable.
        clock_ms: monotonic clock in ms (tests inject one).
        rng: source of session ids.

    Single event loop; not thread-safe.
    """

    def __init__(
        self,
        max_entries: int = 1000,
        eviction_ms: float = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
        clock_ms: Callable[[], float] = _now_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.max_entries = int(max_entries)
        self.eviction_ms = float(eviction_ms)
        self._clock_ms = clock_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        #: partition -> ids of the sessions holding it (for :meth:`partition_changed`).
        self._holders: dict[TopicPartitionKey, set[int]] = {}
        self._stamp = 0
        #: partitions read by incremental fetches since creation (a count, for tests of cost).
        self.partitions_read = 0
        self._evictable_by_all: set[int] = set()
        self._evictable_by_privileged: set[int] = set()
        self.num_partitions = 0
        self.evictions = 0
        self.sessions_created = 0

    # -------------------------------------------------------------- inspection

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def sessions(self) -> list[FetchSession]:
        return list(self._sessions.values())

    # -------------------------------------------------------------- contexts

    def new_context(self, version: int, request: FetchRequestParams) -> FetchContext:
        """The context for a FetchRequest (see module docstring). Applies an incremental
        request's changes to its session and advances the session epoch."""
        session_id = int(request.session_id)
        epoch = int(request.session_epoch)
        privileged = request.replica_id >= 0
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID and self.remove(session_id) is not None:
                log.debug("closed fetch session %s (full fetch with epoch %s)", session_id, epoch)
            if epoch == FINAL_EPOCH or self.max_entries <= 0:
                return SessionlessFetchContext(request)
            return FullFetchContext(request, self, privileged, version >= _TOPIC_ID_VERSION)
        session = self._sessions.get(session_id)
        if session is None:
            log.debug("fetch session %s not found", session_id)
            return SessionErrorContext(request, ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            log.debug("fetch session %s: expected epoch %s, got %s", session_id, session.epoch, epoch)
            return SessionErrorContext(request, ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != (version >= _TOPIC_ID_VERSION):
            return SessionErrorContext(request, ErrorCode.fetch_session_topic_id_error)
        self._stamp += 1
        added, updated, removed = session.update(request.topics, request.forgotten_topics_data, self._stamp)
        self._hold(session.id, added)
        self._release(session.id, removed)
        if not session.partitions:
            log.debug(
                "closing fetch session %s: no partitions left after removing %d", session_id, len(removed)
            )
            self.remove(session_id)
            return SessionlessFetchContext(request)
        self.touch(session, self._clock_ms())
        session.epoch = next_epoch(session.epoch)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "incremental fetch in session %s, next epoch %s: %d added, %d updated, %d removed",
                session_id,
                session.epoch,
                len(added),
                updated,
                len(removed),
            )
        context = IncrementalFetchContext(request, session, epoch)
        self.partitions_read += len(context._stamps)
        return context

    # -------------------------------------------------------------- changes

    def partition_changed(self, key: TopicPartitionKey, wake_followers: bool = True) -> None:
        """Mark ``key`` in every session holding it and wake their parked fetches (called by
        ``FetchPurgatory.notify``: appends, high watermark and log start moves, leadership
        changes, deletions). ``wake_followers`` False (a high-watermark move alone): a
        follower (privileged) session is marked, so its next response carries the new HW, but
        its parked fetch keeps waiting for records (Kafka's ``DelayedFetch`` for a follower)."""
        holders = self._holders.get(key)
        if not holders:
            return
        self._stamp += 1
        for session_id in holders:
            session = self._sessions.get(session_id)
            if session is not None:
                session.marked[key] = self._stamp
                if session.waiter is not None and (wake_followers or not session.privileged):
                    resolve_waiter(session.waiter, True)

    def wake_all(self) -> None:
        """Wake every parked incremental fetch (shutdown)."""
        for session in self._sessions.values():
            if session.waiter is not None:
                resolve_waiter(session.waiter, True)

    def _hold(self, session_id: int, keys: Iterable[TopicPartitionKey]) -> None:
        for key in keys:
            self._holders.setdefault(key, set()).add(session_id)

    def _release(self, session_id: int, keys: Iterable[TopicPartitionKey]) -> None:
        for key in keys:
            holders = self._holders.get(key)
            if holders is not None:
                holders.discard(session_id)
                if not holders:
                    del self._holders[key]

    # -------------------------------------------------------------- cache management

    def maybe_create_session(
        self,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], dict[TopicPartitionKey, CachedPartition]],
    ) -> int:
        """Create a session if there is room or an entry can be evicted; its id, or 0."""
        if self.max_entries <= 0:
            return INVALID_SESSION_ID
        now = self._clock_ms()
        if len(self._sessions) < self.max_entries or self.try_evict(privileged, (privileged, size, 0), now):
            session = FetchSession(
                self._new_session_id(), privileged, create_partitions(), uses_topic_ids, now
            )
            self._sessions[session.id] = session
            self._hold(session.id, session.partitions)
            self.touch(session, now)
            self.sessions_created += 1
            log.debug("created %r", session)
            return session.id
        log.debug("no fetch session created for privileged=%s, size=%s", privileged, size)
        return INVALID_SESSION_ID

    def try_evict(self, privileged: bool, key: tuple[bool, int, int], now: float) -> bool:
        """Evict a stale session, or the least valuable evictable one if ``key`` (of the new
        session) is worth more. Returns True if one was evicted."""
        if not self._sessions:
            return False
        oldest = min(self._sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - oldest.last_used_ms > self.eviction_ms:
            log.debug("evicting stale %r", oldest)
            self._evict(oldest)
            return True
        pool = self._evictable_by_privileged if privileged else self._evictable_by_all
        if not pool:
            return False
        victim = min((self._sessions[i] for i in pool), key=FetchSession.evictable_key)
        if key < victim.evictable_key():
            return False
        log.debug("evicting %r for a new session %s", victim, key)
        self._evict(victim)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.remove(session.id)
        self.evictions += 1

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._release(session_id, session.partitions)
            if session.waiter is not None:
                resolve_waiter(session.waiter, False)
            self._evictable_by_all.discard(session_id)
            self._evictable_by_privileged.discard(session_id)
            self.num_partitions -= max(0, session.cached_size)
        return session

    def touch(self, session: FetchSession, now: float) -> None:
        """Record a use of ``session`` and refresh its evictability (Kafka ``touch``)."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self.num_partitions -= session.cached_size
        self._evictable_by_all.discard(session.id)
        self._evictable_by_privileged.discard(session.id)
        session.cached_size = session.size
        old_enough = now - session.creation_ms > self.eviction_ms
        if not session.privileged or old_enough:
            self._evictable_by_privileged.add(session.id)
        if old_enough:
            self._evictable_by_all.add(session.id)
        self.num_partitions += session.cached_size

    def _new_session_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, 2**31 - 2)
            if session_id not in self._sessions:
                return session_id


class _BrokerConfig(Protocol):
    @property
    def values(self) -> dict[str, Any]: ...


class FetchSessionCacheHolder(Protocol):
    """What :func:`fetch_session_cache_for` needs of the broker context."""

    fetch_session_cache: FetchSessionCache | None

    @property
    def config(self) -> _BrokerConfig: ...
    @property
    def fetch_purgatory(self) -> FetchPurgatory: ...


def fetch_session_cache_for(ctx: FetchSessionCacheHolder) -> FetchSessionCache:
    """The broker's cache, created on first use from ``ctx.config`` and kept on ``ctx`` as
    ``fetch_session_cache``; the fetch purgatory reports partition changes to it."""
    cache = ctx.fetch_session_cache
    if cache is None:
        cache = FetchSessionCache(int(ctx.config.values.get(CACHE_SLOTS_KEY, 1000)))
        ctx.fetch_session_cache = cache
        ctx.fetch_purgatory.add_change_listener(cache)
    return cache
