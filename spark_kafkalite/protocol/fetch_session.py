"""KIP-227 fetch sessions, client side (Java ``org.apache.kafka.clients.FetchSessionHandler``).

Pure logic, no I/O, no client classes: used by the consumer's ``Fetcher`` and by the broker's
replica fetcher. One :class:`FetchSessionHandler` per destination node. Partitions are keyed by
any hashable ``(topic, partition)`` pair (a ``TopicPartition`` named tuple works); each carries a
:class:`PartitionFetchData`.

Protocol (``FetchRequest`` v7+, KIP-227; the table in ``FetchSession.scala``)::

    session_id  epoch   meaning
    0           -1      full fetch, no session (FINAL_EPOCH; also what v4-6 imply)
    0            0      full fetch, create a session if the broker can (INITIAL_EPOCH)
    ID           0      close session ID, full fetch, try to create a new one
    ID           N>0    incremental fetch in session ID (N = the epoch the broker expects)
    ID          -1      close session ID, full fetch, no new session

A full request lists every partition. An incremental request lists only partitions added or
whose fetch parameters changed (``to_send``) plus ``to_forget`` (removed) ones; the broker
answers only partitions with something new (records, high watermark / log start changes,
errors). The epoch advances by one per request (``Integer.MAX_VALUE`` wraps to 1).

Use::

    handler = FetchSessionHandler(node_id)
    builder = handler.builder()
    for key, data in wanted.items():
        builder.add(key, data)
    request_data = builder.build()          # session_id, epoch, to_send, to_forget, ...
    ... send, then on the response:
    if handler.handle_response(response):   # False: drop it, the next fetch is full
        for key in response partitions: look the request up in request_data.session_partitions
    ... on a disconnect / timeout: handler.handle_error()

``handle_response`` follows Java's rules: a top-level ``FETCH_SESSION_ID_NOT_FOUND`` starts over
with (0, 0); any other top-level error (``INVALID_FETCH_SESSION_EPOCH``,
``FETCH_SESSION_TOPIC_ID_ERROR``, ...) or a response whose partitions do not match the request
closes the session and opens a new one (ID, 0) on the next fetch. A full response must contain
exactly the requested partitions; an incremental one only partitions of the session.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from spark_kafkalite.protocol.errors import ErrorCode

__all__ = [
    "INVALID_SESSION_ID",
    "INITIAL_EPOCH",
    "FINAL_EPOCH",
    "next_epoch",
    "FetchMetadata",
    "PartitionFetchData",
    "FetchRequestData",
    "FetchSessionBuilder",
    "FetchSessionHandler",
    "response_partition_keys",
]

log = logging.getLogger(__name__)

#: No session (request: none wanted or none known; response: none was created).
INVALID_SESSION_ID = 0
#: First epoch: a full fetch that asks the broker to create a session.
INITIAL_EPOCH = 0
#: A full fetch that wants no session (closes the named session, if any).
FINAL_EPOCH = -1

_INT32_MAX = 2**31 - 1

PartitionKey = Hashable  # (topic, partition): str, int


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Java ``FetchMetadata.nextEpoch``): -1 stays -1 (no session),
    ``Integer.MAX_VALUE`` wraps to 1 (0 is reserved for "new session")."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _INT32_MAX:
        return 1
    return epoch + 1


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """The session fields of one request (Java ``FetchMetadata``)."""

    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        """True for full fetches (epoch 0 or -1): every partition is listed."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def next_close_existing(self) -> FetchMetadata:
        """Close this session and try to open a new one (ID, 0)."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def next_incremental(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    def final(self) -> FetchMetadata:
        """Close this session and open none (ID, -1)."""
        return FetchMetadata(self.session_id, FINAL_EPOCH)

    @staticmethod
    def new_incremental(session_id: int) -> FetchMetadata:
        """The first incremental fetch of a session the broker just created (ID, 1)."""
        return FetchMetadata(session_id, next_epoch(INITIAL_EPOCH))


FetchMetadata.INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)  # type: ignore[attr-defined]
FetchMetadata.LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)  # type: ignore[attr-defined]
_INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
_LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)


@dataclass(frozen=True, slots=True)
class PartitionFetchData:
    """One partition of a fetch (the ``FetchPartition`` fields). Equality decides whether an
    incremental fetch must resend the partition.

    Attributes:
        fetch_offset: first offset to read.
        max_bytes: ``partition_max_bytes`` (bytes).
        current_leader_epoch: the leader epoch the fetcher knows (KIP-320), -1 if unknown.
        log_start_offset: the follower's log start offset (replicas), -1 for consumers.
        last_fetched_epoch: epoch of the last fetched batch (KIP-595 / Fetch v12), -1 if none.
        topic_id: the topic id (Fetch v13+), None when fetching by name.
    """

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1
    last_fetched_epoch: int = -1
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """What to put in one FetchRequest (Java ``FetchSessionHandler.FetchRequestData``).

    Attributes:
        session_id / epoch: the request's ``session_id`` / ``session_epoch``.
        to_send: partitions to list in ``topics`` (all of them for a full fetch; added or
            changed ones for an incremental fetch), in insertion order.
        to_forget: partitions for ``forgotten_topics_data`` (incremental fetches only).
        to_replace: partitions whose topic id changed (v13+; forgotten and re-added).
        session_partitions: every partition of the session after this request, with its fetch
            data: use it to interpret response partitions (an incremental response can name
            partitions that were not in ``to_send``).
    """

    session_id: int
    epoch: int
    to_send: dict[Any, PartitionFetchData]
    to_forget: list[Any] = field(default_factory=list)
    to_replace: list[Any] = field(default_factory=list)
    session_partitions: Mapping[Any, PartitionFetchData] = field(default_factory=dict)

    @property
    def metadata(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, self.epoch)

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    @property
    def can_use_topic_ids(self) -> bool:
        """True when every session partition has a topic id (Fetch v13+ is possible)."""
        return bool(self.session_partitions) and all(
            d.topic_id is not None for d in self.session_partitions.values()
        )


class FetchSessionBuilder:
    """Collects the partitions wanted in the next fetch (Java ``FetchSessionHandler.Builder``).

    ``add`` every partition to fetch (in the desired order), then ``build`` once.
    """

    def __init__(self, handler: FetchSessionHandler) -> None:
        self._handler = handler
        self._next: dict[Any, PartitionFetchData] = {}

    def add(self, key: PartitionKey, data: PartitionFetchData) -> FetchSessionBuilder:
        """Fetch ``key`` (a ``(topic, partition)`` pair) with ``data``. Returns self."""
        self._next[key] = data
        return self

    def build(self) -> FetchRequestData:
        """The request data; updates the handler's view of the session (as Java does, before the
        response: a failed request resets the session through ``handle_error``)."""
        return self._handler._build(self._next)


class FetchSessionHandler:
    """Client side of one node's fetch session (see module docstring).

    Args:
        node_id: the destination broker (for logs).
        use_sessions: False sends sessionless full fetches (0, -1) forever, as librdkafka does.

    Not thread-safe: one fetch to the node at a time, built and handled on one thread.
    """

    def __init__(self, node_id: int, *, use_sessions: bool = True) -> None:
        self.node_id = node_id
        self.use_sessions = use_sessions
        self._next_metadata = _INITIAL if use_sessions else _LEGACY
        self._session_partitions: dict[Any, PartitionFetchData] = {}

    # -------------------------------------------------------------- state

    @property
    def next_metadata(self) -> FetchMetadata:
        """Session id and epoch the next request will carry."""
        return self._next_metadata

    @property
    def session_id(self) -> int:
        return self._next_metadata.session_id

    @property
    def next_epoch(self) -> int:
        return self._next_metadata.epoch

    @property
    def session_partitions(self) -> Mapping[Any, PartitionFetchData]:
        """Partitions the broker's session holds (as far as we know), with their fetch data."""
        return self._session_partitions

    def session_topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name for the session's partitions that have ids (Fetch v13+ responses)."""
        names: dict[uuid.UUID, str] = {}
        for key, data in self._session_partitions.items():
            if data.topic_id is not None:
                names[data.topic_id] = key[0]  # type: ignore[index]
        return names

    # -------------------------------------------------------------- building

    def builder(self) -> FetchSessionBuilder:
        """A builder for the next request."""
        return FetchSessionBuilder(self)

    def build(
        self, partitions: Mapping[Any, PartitionFetchData] | Iterable[tuple[Any, PartitionFetchData]]
    ) -> FetchRequestData:
        """Shortcut: ``builder()``, ``add`` each item, ``build()``."""
        items = partitions.items() if isinstance(partitions, Mapping) else partitions
        return self._build(dict(items))

    def build_changes(
        self,
        wanted: Mapping[Any, PartitionFetchData],
        updates: Mapping[Any, PartitionFetchData],
        removed: Iterable[Any],
    ) -> FetchRequestData:
        """``build(wanted)`` for a caller that tracks its own changes: ``updates`` holds every
        partition of ``wanted`` whose data may differ from the last request (added or changed)
        and ``removed`` every partition no longer wanted; the rest of ``wanted`` is unchanged.
        A full fetch lists (and copies) all of ``wanted``; an incremental one costs in
        proportion to the changes, not to the session size (a replica fetcher with thousands
        of idle partitions). The returned ``session_partitions`` of an incremental fetch is a
        live read-only view of the session, valid until the next build."""
        meta = self._next_metadata
        if meta.is_full:
            return self._build(dict(wanted))
        session = self._session_partitions
        to_forget = [key for key in removed if session.pop(key, None) is not None]
        to_send: dict[Any, PartitionFetchData] = {}
        replaced: list[Any] = []
        for key, new in updates.items():
            prev = session.get(key)
            if prev is not None and prev.topic_id is not None and new.topic_id is not None:
                if prev.topic_id != new.topic_id:
                    replaced.append(key)
            if new != prev:
                session[key] = new
                to_send[key] = new
        return FetchRequestData(
            session_id=meta.session_id,
            epoch=meta.epoch,
            to_send=to_send,
            to_forget=to_forget,
            to_replace=replaced,
            session_partitions=MappingProxyType(session),
        )

    def _build(self, wanted: dict[Any, PartitionFetchData]) -> FetchRequestData:
        meta = self._next_metadata
        if meta.is_full:
            self._session_partitions = wanted
            return FetchRequestData(
                session_id=meta.session_id,
                epoch=meta.epoch,
                to_send=dict(wanted),
                session_partitions=dict(wanted),
            )
        session = self._session_partitions
        altered: list[Any] = []
        removed: list[Any] = []
        replaced: list[Any] = []
        for key in list(session):
            new = wanted.pop(key, None)
            if new is None:
                del session[key]
                removed.append(key)
                continue
            prev = session[key]
            if prev.topic_id is not None and new.topic_id is not None and prev.topic_id != new.topic_id:
                replaced.append(key)  # forgotten (old id) and sent again (new id)
            if new != prev:
                session[key] = new
                altered.append(key)
        added = list(wanted)
        for key in added:
            session[key] = wanted[key]
        to_send = {key: session[key] for key in added}
        for key in altered:
            to_send[key] = session[key]
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "incremental fetch to node %s (session %s, epoch %s): %d added, %d altered, %d removed, %d replaced",
                self.node_id,
                meta.session_id,
                meta.epoch,
                len(added),
                len(altered),
                len(removed),
                len(replaced),
            )
        return FetchRequestData(
            session_id=meta.session_id,
            epoch=meta.epoch,
            to_send=to_send,
            to_forget=removed,
            to_replace=replaced,
            session_partitions=dict(session),
        )

    def close_request(self) -> FetchRequestData | None:
        """A request closing the session (ID, -1, no partitions), e.g. when the consumer closes
        (Java ``notifyClose``); None when there is no session. Afterwards the handler is reset
        to a new full fetch."""
        meta = self._next_metadata
        if meta.session_id == INVALID_SESSION_ID:
            return None
        self._next_metadata = _INITIAL if self.use_sessions else _LEGACY
        self._session_partitions = {}
        return FetchRequestData(session_id=meta.session_id, epoch=FINAL_EPOCH, to_send={})

    # -------------------------------------------------------------- responses

    def handle_response(self, response: Any, version: int | None = None) -> bool:
        """Account for a FetchResponse (kio entity or any object with ``error_code``,
        ``session_id``, ``throttle_time`` and ``responses[].topic|topic_id``
        ``.partitions[].partition_index``) answering the last built request.

        Returns:
            True when the response is usable; False when it must be dropped (a top-level error
            or partitions that do not match the request); the next fetch is then full.
        """
        error_code = int(getattr(response, "error_code", 0))
        session_id = int(getattr(response, "session_id", INVALID_SESSION_ID))
        throttle = getattr(response, "throttle_time", 0)
        throttle_ms = (
            int(throttle.total_seconds() * 1000) if hasattr(throttle, "total_seconds") else int(throttle or 0)
        )
        keys = response_partition_keys(response, self.session_topic_names) if error_code == 0 else []
        return self.handle_response_keys(error_code, session_id, keys, throttle_ms)

    def handle_response_keys(
        self, error_code: int, session_id: int, keys: Iterable[Any], throttle_time_ms: int = 0
    ) -> bool:
        """``handle_response`` on already extracted fields: the top-level ``error_code``, the
        response ``session_id`` and the ``(topic, partition)`` keys it contains."""
        meta = self._next_metadata
        if error_code != ErrorCode.none:
            if error_code == ErrorCode.fetch_session_id_not_found:
                log.info(
                    "node %s: fetch session %s not found; starting a new session",
                    self.node_id,
                    meta.session_id,
                )
                self._next_metadata = _INITIAL if self.use_sessions else _LEGACY
            else:
                log.info(
                    "node %s: fetch session %s epoch %s failed with error %s; closing it and opening a new one",
                    self.node_id,
                    meta.session_id,
                    meta.epoch,
                    _code_name(error_code),
                )
                self._close_existing()
            return False
        response_keys = set(keys)
        if meta.is_full:
            if not response_keys and throttle_time_ms > 0:
                # KIP-219: a throttled broker may answer a full fetch with no partitions.
                self._next_metadata = _INITIAL if self.use_sessions else _LEGACY
                return False
            problem = self._verify_full(response_keys)
            if problem:
                log.info(
                    "node %s: invalid full fetch response (%s); the next fetch is full", self.node_id, problem
                )
                self._next_metadata = _INITIAL if self.use_sessions else _LEGACY
                return False
            if not self.use_sessions or session_id == INVALID_SESSION_ID:
                self._next_metadata = _INITIAL if self.use_sessions else _LEGACY
            else:
                if log.isEnabledFor(logging.DEBUG):
                    log.debug(
                        "node %s: created fetch session %s with %d partitions",
                        self.node_id,
                        session_id,
                        len(self._session_partitions),
                    )
                self._next_metadata = FetchMetadata.new_incremental(session_id)
            return True
        extra = response_keys.difference(self._session_partitions)
        if extra:
            log.info(
                "node %s: invalid incremental fetch response for session %s: partitions %s are not in the "
                "session; closing it",
                self.node_id,
                meta.session_id,
                sorted(map(str, extra)),
            )
            self._close_existing()
            return False
        if session_id == INVALID_SESSION_ID:
            log.debug("node %s: the broker closed fetch session %s", self.node_id, meta.session_id)
            self._next_metadata = _INITIAL
        else:
            self._next_metadata = meta.next_incremental()
        return True

    def handle_error(self, exc: BaseException | None = None) -> None:
        """The request failed without a response (disconnect, timeout): the next fetch closes
        the session and opens a new one (Java ``handleError``)."""
        log.debug("node %s: fetch failed (%s); the next fetch is full", self.node_id, exc)
        self._close_existing()

    def _close_existing(self) -> None:
        if self.use_sessions:
            self._next_metadata = self._next_metadata.next_close_existing()
        else:
            self._next_metadata = _LEGACY

    def _verify_full(self, response_keys: set[Any]) -> str:
        expected = self._session_partitions
        omitted = [k for k in expected if k not in response_keys]
        extra = [k for k in response_keys if k not in expected]
        parts = []
        if omitted:
            parts.append(f"omitted partitions {sorted(map(str, omitted))}")
        if extra:
            parts.append(f"extra partitions {sorted(map(str, extra))}")
        return "; ".join(parts)


def response_partition_keys(
    response: Any, topic_names: Mapping[uuid.UUID, str] | Callable[[], Mapping[uuid.UUID, str]] | None = None
) -> Iterator[tuple[str, int]]:
    """The ``(topic, partition)`` keys of a FetchResponse entity (v13+ topics named by id are
    resolved with ``topic_names``, a mapping or a function returning one, called only if needed;
    unknown ids yield ``("<topic id>", partition)``)."""
    names: Mapping[uuid.UUID, str] | None = None
    for topic in getattr(response, "responses", ()) or ():
        name = getattr(topic, "topic", None)
        if not name:
            topic_id = getattr(topic, "topic_id", None)
            if names is None:
                names = (topic_names() if callable(topic_names) else topic_names) or {}
            name = names.get(topic_id) if topic_id is not None else None
            if name is None:
                name = str(topic_id)
        for partition in topic.partitions:
            yield (str(name), int(partition.partition_index))


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return str(code)
