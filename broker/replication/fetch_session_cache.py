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

import asyncio
import logging
import random
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from broker.replication.delayed_fetch import FetchPurgatory
    from spark_kafkalite.protocol.fetch_response_encode import FetchPartitionResult, FetchTopicResult

__all__ = [
    "CachedPartition",
    "FetchSession",
    "FetchSessionCache",
    "FetchContext",
    "SessionlessFetchContext",
    "FullFetchContext",
    "IncrementalFetchContext",
    "SessionErrorContext",
    "fetch_session_cache_for",
    "MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS",
    "CACHE_SLOTS_KEY",
    "FetchPartitionParams",
    "FetchTopicParams",
    "ForgottenTopicParams",
    "FetchRequestParams",
]

log = logging.getLogger(__name__)

MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
CACHE_SLOTS_KEY = "max.incremental.fetch.session.cache.slots"
_TOPIC_ID_VERSION = 13
FOLLOWER_WAKE_YIELD_TURNS = 10
"""A follower's parked incremental fetch, once woken by an append, lets the event loop run this
many more turns before it reads. Produce requests already read or buffered on the leader's
connections (up to ``MAX_IN_FLIGHT_PRODUCES`` per producer connection, see
``broker.network.in_flight_produces``) append meanwhile and reach the follower in one response
instead of one response each: librdkafka sends one partition per ProduceRequest (librdkafka issue
#1700), so without this a producer spread over thousands of partitions costs every follower a
fetch round trip per request. On an idle loop the turns cost microseconds."""


def _now_ms() -> float:
    return time.monotonic() * 1000.0


# ------------------------------------------------------------------ request shapes


class FetchPartitionParams(Protocol):
    """``FetchRequest.FetchPartition`` as the broker reads it: the v12 fields (kio's v12 entity,
    the replica fetchers' fast decode, a :class:`CachedPartition`). The fetch handler brings an
    older version to this shape with Kafka's defaults for the fields it lacks (-1)."""

    @property
    def partition(self) -> int: ...
    @property
    def current_leader_epoch(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def last_fetched_epoch(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...


class FetchTopicParams(Protocol):
    """``FetchRequest.FetchTopic`` (v12: by name)."""

    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> Sequence[FetchPartitionParams]: ...


class ForgottenTopicParams(Protocol):
    """``FetchRequest.ForgottenTopic``: partitions an incremental fetch drops from its session."""

    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class FetchRequestParams(Protocol):
    """``FetchRequest`` as sessions and the fetch handler read it (v12 fields; before v7 a
    request has no session: ``session_id`` 0, ``session_epoch`` -1, no forgotten topics;
    before v11 ``rack_id`` is "")."""

    @property
    def replica_id(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def isolation_level(self) -> int: ...
    @property
    def session_id(self) -> int: ...
    @property
    def session_epoch(self) -> int: ...
    @property
    def topics(self) -> Sequence[FetchTopicParams]: ...
    @property
    def forgotten_topics_data(self) -> Sequence[ForgottenTopicParams]: ...
    @property
    def rack_id(self) -> str: ...


class CachedPartition:
    """One partition of a session: the fetcher's last request parameters and the last response
    values sent for it (Kafka ``CachedPartition``). Its request fields have the names of a
    request ``FetchPartition``, so an incremental read lists the cached partitions themselves."""

    __slots__ = (
        "topic",
        "partition",
        "fetch_offset",
        "partition_max_bytes",
        "current_leader_epoch",
        "last_fetched_epoch",
        "log_start_offset",
        "high_watermark",
        "last_stable_offset",
        "local_log_start_offset",
    )

    def __init__(self, topic: str, partition: int, fp: FetchPartitionParams) -> None:
        self.topic = topic
        self.partition = partition
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.local_log_start_offset = -1
        self.update_request_params(fp)

    def update_request_params(self, fp: FetchPartitionParams) -> None:
        """Take a request's ``FetchPartition`` fields (an added or resent partition)."""
        self.fetch_offset = int(fp.fetch_offset)
        self.partition_max_bytes = int(fp.partition_max_bytes)
        self.current_leader_epoch = int(fp.current_leader_epoch)
        self.last_fetched_epoch = int(fp.last_fetched_epoch)
        self.log_start_offset = int(fp.log_start_offset)

    def maybe_update_response_data(self, pd: FetchPartitionResult, update: bool) -> bool:
        """Whether partition response ``pd`` must be sent in an incremental response; with
        ``update``, remember its values (Kafka ``maybeUpdateResponseData``)."""
        must = bool(pd.records)
        hw = int(pd.high_watermark)
        if hw != self.high_watermark:
            must = True
            if update:
                self.high_watermark = hw
        lso = int(pd.last_stable_offset)
        if lso != self.last_stable_offset:
            must = True
            if update:
                self.last_stable_offset = lso
        lso_start = int(pd.log_start_offset)
        if lso_start != self.local_log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = lso_start
        if int(pd.preferred_read_replica) >= 0:
            must = True
        if int(pd.error_code) != ErrorCode.none:
            must = True
            if update:
                self.high_watermark = -1  # resend once the error clears
        if int(pd.diverging_epoch.epoch) >= 0:
            must = True
        return must


@dataclass(frozen=True, slots=True)
class _FetchTopicView:
    topic: str
    partitions: tuple[CachedPartition, ...]


class _RequestView:
    """A FetchRequest whose ``topics`` are the session's partitions (a :class:`FetchRequestParams`;
    the other fields are the request's)."""

    __slots__ = ("_request", "topics", "forgotten_topics_data")

    def __init__(self, request: FetchRequestParams, topics: tuple[_FetchTopicView, ...]) -> None:
        self._request = request
        self.topics = topics
        self.forgotten_topics_data: tuple[ForgottenTopicParams, ...] = ()

    @property
    def replica_id(self) -> int:
        return self._request.replica_id

    @property
    def max_bytes(self) -> int:
        return self._request.max_bytes

    @property
    def isolation_level(self) -> int:
        return self._request.isolation_level

    @property
    def session_id(self) -> int:
        return self._request.session_id

    @property
    def session_epoch(self) -> int:
        return self._request.session_epoch

    @property
    def rack_id(self) -> str:
        return self._request.rack_id


class FetchSession:
    """A cached session (Kafka ``FetchSession``): id, privileged (follower), partitions in
    fetch order, epoch expected next, creation / last-use times (ms)."""

    __slots__ = (
        "id",
        "privileged",
        "partitions",
        "creation_ms",
        "last_used_ms",
        "epoch",
        "cached_size",
        "uses_topic_ids",
        "marked",
        "waiter",
    )

    def __init__(
        self,
        session_id: int,
        privileged: bool,
        partitions: dict[TopicPartitionKey, CachedPartition],
        uses_topic_ids: bool,
        now_ms: float,
    ) -> None:
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.cached_size = -1
        #: partitions to read on the next incremental fetch, in read order -> the change stamp
        #: of their last mark (a mark newer than the read keeps them marked).
        self.marked: dict[TopicPartitionKey, int] = {}
        #: the parked incremental fetch of this session, woken by a change to any partition.
        self.waiter: asyncio.Future[bool] | None = None

    @property
    def size(self) -> int:
        return len(self.partitions)

    def evictable_key(self) -> tuple[bool, int, int]:
        return (self.privileged, self.cached_size, self.id)

    def update(
        self, topics: Iterable[FetchTopicParams], forgotten: Iterable[ForgottenTopicParams], stamp: int = 0
    ) -> tuple[list[TopicPartitionKey], int, list[TopicPartitionKey]]:
        """Apply an incremental request: add / update its partitions (marking them with
        ``stamp``), drop forgotten ones. Returns (added keys, updated count, removed keys)."""
        added: list[TopicPartitionKey] = []
        removed: list[TopicPartitionKey] = []
        updated = 0
        marked = self.marked
        for ft in topics:
            topic = str(ft.topic)
            for fp in ft.partitions:
                key = (topic, int(fp.partition))
                cached = self.partitions.get(key)
                if cached is None:
                    self.partitions[key] = CachedPartition(topic, key[1], fp)
                    added.append(key)
                else:
                    cached.update_request_params(fp)
                    updated += 1
                marked[key] = stamp
        for gone in forgotten:
            topic = str(gone.topic)
            for index in gone.partitions:
                key = (topic, int(index))
                if self.partitions.pop(key, None) is not None:
                    marked.pop(key, None)
                    removed.append(key)
        return added, updated, removed

    def unmark_read(
        self,
        topics: Iterable[FetchTopicResult],
        pending: Collection[TopicPartitionKey],
        stamps: dict[TopicPartitionKey, int],
    ) -> None:
        """After a response: unmark each partition read (``stamps``: its mark when the read
        view was taken) unless it returned records, an error or a diverging epoch, is in
        ``pending``, or was marked again since."""
        marked = self.marked
        for tr in topics:
            topic = str(tr.topic)
            for pd in tr.partitions:
                key = (topic, int(pd.partition_index))
                if key in pending or pd.records or int(pd.error_code) != ErrorCode.none:
                    continue
                if int(pd.diverging_epoch.epoch) >= 0:
                    continue
                if key in marked and marked[key] == stamps.get(key):
                    del marked[key]

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, privileged={self.privileged}, partitions={self.size}, "
            f"epoch={self.epoch})"
        )


# ------------------------------------------------------------------ contexts


class FetchContext:
    """How to serve one FetchRequest. ``error_code`` != 0: answer it at top level with no
    partitions and session 0. Otherwise read ``request_view`` (the request itself, or for an
    incremental fetch a view listing every session partition with its cached parameters) and
    pass the topic responses to ``update_and_generate_response``."""

    error_code: int = ErrorCode.none

    def __init__(self, request: FetchRequestParams) -> None:
        self.request_view: FetchRequestParams = request
        #: a follower's fetch (``replica_id`` >= 0): not woken by a high-watermark move alone
        self.follower: bool = request.replica_id >= 0

    def update_and_generate_response(
        self, topics: list[FetchTopicResult], pending: Collection[TopicPartitionKey] = ()
    ) -> tuple[int, int, list[FetchTopicResult]]:
        """(error_code, session_id, topic responses to send). ``pending``: partitions read that
        have more to give than this response carried (see the module docstring)."""
        return ErrorCode.none, INVALID_SESSION_ID, topics

    def refresh_view(self) -> None:
        """Re-take ``request_view`` after a wait in the purgatory (incremental: partitions
        marked meanwhile join it)."""

    async def wait(self, purgatory: FetchPurgatory, keys: list[TopicPartitionKey], timeout_s: float) -> bool:
        """Park until one of ``keys`` changes or ``timeout_s`` elapses (``FetchPurgatory``).

        Returns: False when nothing that was read can have changed (timed out with no
        notification: the previous read is still the answer), True otherwise."""
        return bool(await purgatory.wait(keys, timeout_s, self.follower))


class SessionlessFetchContext(FetchContext):
    """A full fetch that creates no session."""


class SessionErrorContext(FetchContext):
    """A session error: answer ``error_code`` with no partitions."""

    def __init__(self, request: FetchRequestParams, error_code: int) -> None:
        super().__init__(request)
        self.error_code = error_code

    def update_and_generate_response(
        self, topics: list[FetchTopicResult], pending: Collection[TopicPartitionKey] = ()
    ) -> tuple[int, int, list[FetchTopicResult]]:
        return self.error_code, INVALID_SESSION_ID, []


class FullFetchContext(FetchContext):
    """A full fetch that tries to create a session once the response data is known."""

    def __init__(
        self, request: FetchRequestParams, cache: FetchSessionCache, privileged: bool, uses_topic_ids: bool
    ) -> None:
        super().__init__(request)
        self._cache = cache
        self._privileged = privileged
        self._uses_topic_ids = uses_topic_ids

    def update_and_generate_response(
        self, topics: list[FetchTopicResult], pending: Collection[TopicPartitionKey] = ()
    ) -> tuple[int, int, list[FetchTopicResult]]:
        requested: dict[TopicPartitionKey, FetchPartitionParams] = {}
        for ft in self.request_view.topics:
            for fp in ft.partitions:
                requested[(str(ft.topic), int(fp.partition))] = fp

        def create_partitions() -> dict[TopicPartitionKey, CachedPartition]:
            cached: dict[TopicPartitionKey, CachedPartition] = {}
            for (topic, partition), fp in requested.items():
                cached[(topic, partition)] = CachedPartition(topic, partition, fp)
            for tr in topics:
                for pd in tr.partitions:
                    cp = cached.get((str(tr.topic), int(pd.partition_index)))
                    if cp is not None:
                        cp.maybe_update_response_data(pd, True)
            return cached

        session_id = self._cache.maybe_create_session(
            self._privileged, len(requested), self._uses_topic_ids, create_partitions
        )
        session = self._cache.get(session_id)
        if session is not None:  # everything was read: keep marked what has more to give
            session.marked = dict.fromkeys(requested, 0)
            session.unmark_read(topics, pending, session.marked)
        return ErrorCode.none, session_id, topics


class IncrementalFetchContext(FetchContext):
    """An incremental fetch in an existing session."""

    def __init__(self, request: FetchRequestParams, session: FetchSession, request_epoch: int) -> None:
        self._request = request
        self.session = session
        self._request_epoch = request_epoch
        self._stamps: dict[TopicPartitionKey, int] = {}
        super().__init__(request)
        self.refresh_view()

    def refresh_view(self) -> None:
        """The view lists the session's marked partitions (not all of them)."""
        session = self.session
        self._stamps = dict(session.marked)
        by_topic: dict[str, list[CachedPartition]] = {}
        partitions = session.partitions
        for key in self._stamps:
            cp = partitions.get(key)
            if cp is not None:
                by_topic.setdefault(key[0], []).append(cp)
        self.request_view = _RequestView(
            self._request, tuple(_FetchTopicView(t, tuple(ps)) for t, ps in by_topic.items())
        )

    async def wait(self, purgatory: FetchPurgatory, keys: list[TopicPartitionKey], timeout_s: float) -> bool:
        """Park until any partition of the session is marked or ``timeout_s`` elapses; the
        purgatory is not used (registering every session partition would cost a pass over all
        of them per request). A follower's fetch, woken, yields ``FOLLOWER_WAKE_YIELD_TURNS``
        loop turns before it reads. Returns True (the view is re-taken and read again)."""
        session = self.session
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if session.waiter is not None and not session.waiter.done():
            session.waiter.set_result(False)
        session.waiter = future
        timer = loop.call_later(max(0.0, timeout_s), _resolve, future, False)
        try:
            await future
        finally:
            timer.cancel()
            if session.waiter is future:
                session.waiter = None
        if session.privileged:
            for _ in range(FOLLOWER_WAKE_YIELD_TURNS):
                await asyncio.sleep(0)
        return True

    def update_and_generate_response(
        self, topics: list[FetchTopicResult], pending: Collection[TopicPartitionKey] = ()
    ) -> tuple[int, int, list[FetchTopicResult]]:
        session = self.session
        if session.epoch != next_epoch(self._request_epoch):
            log.info(
                "incremental fetch session %s expected epoch %s, but got %s: possible duplicate request",
                session.id,
                next_epoch(self._request_epoch),
                session.epoch,
            )
            return ErrorCode.invalid_fetch_session_epoch, INVALID_SESSION_ID, []
        out: list[FetchTopicResult] = []
        moved: list[TopicPartitionKey] = []
        for tr in topics:
            topic = str(tr.topic)
            kept = []
            for pd in tr.partitions:
                key = (topic, int(pd.partition_index))
                cp = session.partitions.get(key)
                if cp is None or cp.maybe_update_response_data(pd, True):
                    kept.append(pd)
                    if pd.records:
                        moved.append(key)
            if kept:
                out.append(tr if len(kept) == len(tr.partitions) else replace(tr, partitions=tuple(kept)))
        # Partitions that returned data go to the end of the session so that the others get
        # their share of max_bytes next time (Kafka's PartitionIterator).
        for key in moved:
            cp = session.partitions.pop(key, None)
            if cp is not None:
                session.partitions[key] = cp
            stamp = session.marked.pop(key, None)
            if stamp is not None:
                session.marked[key] = stamp
        session.unmark_read(topics, pending, self._stamps)
        return ErrorCode.none, session.id, out


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
                    _resolve(session.waiter, True)

    def wake_all(self) -> None:
        """Wake every parked incremental fetch (shutdown)."""
        for session in self._sessions.values():
            if session.waiter is not None:
                _resolve(session.waiter, True)

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
                _resolve(session.waiter, False)
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


def _resolve(future: asyncio.Future[bool], value: bool) -> None:
    if not future.done():
        future.set_result(value)


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
