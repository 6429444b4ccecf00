"""One KIP-227 fetch session and its cached partitions (Kafka's ``FetchSession`` and
``CachedPartition`` in ``FetchSession.scala``), and the request shapes a session reads
(:class:`FetchRequestParams`: the fields of a FetchRequest the session logic uses, any version).
The cache that holds sessions is :mod:`broker.replication.fetch_session_cache`; the contexts that
serve one request with them are :mod:`broker.replication.fetch_context`."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.fetch_session import INITIAL_EPOCH, next_epoch
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from spark_kafkalite.protocol.fetch_response_encode import FetchPartitionResult, FetchTopicResult


__all__ = [
    "CachedPartition",
    "FetchSession",
    "FetchPartitionParams",
    "FetchTopicParams",
    "ForgottenTopicParams",
    "FetchRequestParams",
    "resolve_waiter",
]


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


def resolve_waiter(future: asyncio.Future[bool], value: bool) -> None:
    """Wake a parked fetch: ``value`` True when a partition of its session changed, False when
    it timed out or its session closed; a done future is left as it is."""
    if not future.done():
        future.set_result(value)
