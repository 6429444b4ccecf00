"""How one FetchRequest is served with the fetch session cache (Kafka's ``FetchContext``
subclasses in ``FetchSession.scala``: ``SessionlessFetchContext``, ``SessionErrorContext``,
``FullFetchContext``, ``IncrementalFetchContext``). The session rules are in
:mod:`broker.replication.fetch_session_cache`'s module docstring."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from broker.replication.fetch_session import (
    CachedPartition,
    FetchPartitionParams,
    FetchRequestParams,
    FetchSession,
    ForgottenTopicParams,
    resolve_waiter,
)
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_session import INVALID_SESSION_ID, next_epoch
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from broker.replication.delayed_fetch import FetchPurgatory
    from broker.replication.fetch_session_cache import FetchSessionCache
    from spark_kafkalite.protocol.fetch_response_encode import FetchTopicResult


__all__ = [
    "FetchContext",
    "SessionlessFetchContext",
    "SessionErrorContext",
    "FullFetchContext",
    "IncrementalFetchContext",
    "FOLLOWER_WAKE_YIELD_TURNS",
]

log = logging.getLogger(__name__)

FOLLOWER_WAKE_YIELD_TURNS = 10
"""A follower's parked incremental fetch, once woken by an append, lets the event loop run this
many more turns before it reads. Produce requests already read or buffered on the leader's
connections (up to ``MAX_IN_FLIGHT_PRODUCES`` per producer connection, see
``broker.network.in_flight_produces``) append meanwhile and reach the follower in one response
instead of one response each: librdkafka sends one partition per ProduceRequest (librdkafka issue
#1700), so without this a producer spread over thousands of partitions costs every follower a
fetch round trip per request. On an idle loop the turns cost microseconds."""


# ------------------------------------------------------------------ request views


@dataclass(frozen=True, slots=True)
class FetchTopicView:
    topic: str
    partitions: tuple[CachedPartition, ...]


class RequestView:
    """A FetchRequest whose ``topics`` are the session's partitions (a :class:`FetchRequestParams`;
    the other fields are the request's)."""

    __slots__ = ("_request", "topics", "forgotten_topics_data")

    def __init__(self, request: FetchRequestParams, topics: tuple[FetchTopicView, ...]) -> None:
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
        self.request_view = RequestView(
            self._request, tuple(FetchTopicView(t, tuple(ps)) for t, ps in by_topic.items())
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
        timer = loop.call_later(max(0.0, timeout_s), resolve_waiter, future, False)
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
