"""Counters and latency histograms updated on the request and record paths (Kafka's
``BrokerTopicStats``, ``RequestChannel.Metrics`` / ``RequestMetrics`` and the ISR change meters of
``Partition``), kept as plain Python numbers: recording one request or one appended batch is a few
dict lookups and integer additions on the event loop, never a lock and never per record. The
Prometheus collector (``broker.prometheus.broker_collector``) reads them from its HTTP thread; each
read copies a dict with one C-level call (atomic under the GIL), so a scrape never sees a dict
change size while it iterates. Figures only grow (counters) or are bucketed counts (histograms).
"""

from __future__ import annotations

from bisect import bisect_left as _bisect_left
from collections.abc import Callable, Iterable
from typing import Any

from spark_kafkalite.protocol.api_keys import ApiKey

__all__ = [
    "TIME_BUCKETS_MS",
    "BrokerTopicStats",
    "ControllerStats",
    "RequestMetrics",
    "RequestTimes",
    "IsrChangeMeters",
    "FAILED_FETCH",
    "FAILED_PRODUCE",
    "error_counts",
    "record_fetch",
    "request_name",
]

#: Upper bounds (ms) of the request-time histograms' buckets (``le`` labels; +Inf is implied).
TIME_BUCKETS_MS: tuple[float, ...] = (
    0.5,
    1,
    2.5,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1000,
    2500,
    5000,
    10000,
    30000,
)

# BrokerTopicStats slots: MessagesInPerSec, BytesInPerSec, BytesOutPerSec,
# FailedProduceRequestsPerSec, FailedFetchRequestsPerSec.
MESSAGES_IN, BYTES_IN, BYTES_OUT, FAILED_PRODUCE, FAILED_FETCH = range(5)


class BrokerTopicStats:
    """Kafka's ``BrokerTopicStats``: per-topic meters plus the all-topics ones.

    Attributes:
        topics: topic -> [messages in, bytes in, bytes out, failed produce, failed fetch]
            (counts since the broker started; a deleted topic's entry is dropped).
        all_topics: the same five counts over every topic (deleted ones included).
    """

    __slots__ = ("topics", "all_topics")

    def __init__(self) -> None:
        self.topics: dict[str, list[int]] = {}
        self.all_topics = [0, 0, 0, 0, 0]

    def _topic(self, topic: str) -> list[int]:
        counts = self.topics.get(topic)
        if counts is None:
            counts = self.topics[topic] = [0, 0, 0, 0, 0]
        return counts

    def record_produce(self, topic: str, records: int, size_bytes: int) -> None:
        """One batch of ``records`` records and ``size_bytes`` bytes appended to ``topic`` by a
        client (Kafka's ``ReplicaManager.appendToLocalLog``: MessagesInPerSec, BytesInPerSec)."""
        counts = self._topic(topic)
        counts[MESSAGES_IN] += records
        counts[BYTES_IN] += size_bytes
        total = self.all_topics
        total[MESSAGES_IN] += records
        total[BYTES_IN] += size_bytes

    def record_bytes_out(self, topic: str, size_bytes: int) -> None:
        """``size_bytes`` of ``topic`` returned to a consumer fetch (Kafka's
        ``BrokerTopicStats.updateBytesOut`` for a non-follower: BytesOutPerSec)."""
        self._topic(topic)[BYTES_OUT] += size_bytes
        self.all_topics[BYTES_OUT] += size_bytes

    def record_failure(self, topic: str, slot: int) -> None:
        """One partition of a produce (``FAILED_PRODUCE``) or fetch (``FAILED_FETCH``) request
        failed (Kafka marks FailedProduceRequestsPerSec / FailedFetchRequestsPerSec per
        partition error)."""
        self._topic(topic)[slot] += 1
        self.all_topics[slot] += 1

    def remove_topic(self, topic: str) -> None:
        """The topic was deleted (Kafka's ``BrokerTopicStats.removeMetrics``)."""
        self.topics.pop(topic, None)


_STRIDE = len(TIME_BUCKETS_MS) + 1  # buckets per histogram, +Inf included


class RequestTimes:
    """The time histograms of one request name (Kafka's ``RequestMetrics``: TotalTimeMs and its
    parts). ``buckets`` holds the histograms one after the other, each
    ``len(TIME_BUCKETS_MS) + 1`` counts (the last one: above every bound); ``sums`` their sums in ms.
    """

    __slots__ = ("buckets", "sums")

    #: Kafka's TotalTimeMs and its parts, as ``RequestChannel.Request.updateRequestMetrics``
    #: splits it: RequestQueueTimeMs (frame read -> handler start: waiting for a
    #: ``queued.max.requests`` slot and for the Produce requests before it on its connection),
    #: LocalTimeMs (handler start -> response ready, or -> parked in a purgatory),
    #: RemoteTimeMs (parked in the produce or fetch purgatory -> response ready),
    #: ResponseQueueTimeMs (response ready -> handed to the socket: behind earlier Produce
    #: responses of its connection) and ResponseSendTimeMs (handed to the socket -> written).
    #: The total is the sum of the five parts.
    PARTS = (
        "totaltimems",
        "requestqueuetimems",
        "localtimems",
        "remotetimems",
        "responsequeuetimems",
        "responsesendtimems",
    )

    def __init__(self) -> None:
        self.buckets = [0] * (_STRIDE * len(self.PARTS))
        self.sums = [0.0] * len(self.PARTS)

    @staticmethod
    def copy_of(times: RequestTimes) -> RequestTimes:
        """A copy of ``times`` (for a reader on another thread: two list copies)."""
        copied = RequestTimes.__new__(RequestTimes)
        copied.buckets = times.buckets[:]
        copied.sums = times.sums[:]
        return copied

    def histogram(self, part: int) -> list[int]:
        """The bucket counts (not cumulative) of histogram ``part`` (an index of ``PARTS``)."""
        return self.buckets[part * _STRIDE : (part + 1) * _STRIDE]


class RequestMetrics:
    """Kafka's ``RequestChannel.Metrics``: RequestsPerSec by (request, version), ErrorsPerSec by
    (request, error) and the request-time histograms by request name (``Fetch`` times are also
    recorded under ``FetchConsumer`` or ``FetchFollower``, as Kafka does).

    Attributes:
        requests: (api key, version) -> requests served.
        errors: (api key, error code) -> count (error code 0 = NONE is counted too, as in Kafka's
            ``errorCounts``).
        times: request name -> its :class:`RequestTimes`.
    """

    __slots__ = ("requests", "errors", "times")

    def __init__(self) -> None:
        self.requests: dict[tuple[int, int], int] = {}
        self.errors: dict[tuple[int, int], int] = {}
        self.times: dict[str, RequestTimes] = {}

    def record(
        self,
        api_key: int,
        version: int,
        names: tuple[str, ...],
        codes: dict[int, int],
        queue_ms: float,
        local_ms: float,
        remote_ms: float = 0.0,
        response_queue_ms: float = 0.0,
        send_ms: float = 0.0,
    ) -> None:
        """One request answered: its error code counts (``error_counts``), and its times (ms,
        the parts of :attr:`RequestTimes.PARTS` after the total) under each of ``names`` (its
        request name, plus FetchConsumer / FetchFollower for Fetch); the total is their sum."""
        requests = self.requests
        key = (api_key, version)
        requests[key] = requests.get(key, 0) + 1
        errors = self.errors
        for code, count in codes.items():
            ekey = (api_key, code)
            errors[ekey] = errors.get(ekey, 0) + count
        total_ms = queue_ms + local_ms + remote_ms + response_queue_ms + send_ms
        bounds = TIME_BUCKETS_MS
        total_at = _bisect_left(bounds, total_ms)
        queue_at = _STRIDE + _bisect_left(bounds, queue_ms)
        local_at = 2 * _STRIDE + _bisect_left(bounds, local_ms)
        remote_at = 3 * _STRIDE + _bisect_left(bounds, remote_ms)
        response_queue_at = 4 * _STRIDE + _bisect_left(bounds, response_queue_ms)
        send_at = 5 * _STRIDE + _bisect_left(bounds, send_ms)
        all_times = self.times
        for name in names:  # unrolled over the six parts: this runs for every request
            times = all_times.get(name)
            if times is None:
                times = all_times[name] = RequestTimes()
            buckets = times.buckets
            buckets[total_at] += 1
            buckets[queue_at] += 1
            buckets[local_at] += 1
            buckets[remote_at] += 1
            buckets[response_queue_at] += 1
            buckets[send_at] += 1
            sums = times.sums
            sums[0] += total_ms
            sums[1] += queue_ms
            sums[2] += local_ms
            sums[3] += remote_ms
            sums[4] += response_queue_ms
            sums[5] += send_ms


class IsrChangeMeters:
    """Kafka's ``ReplicaManager`` IsrShrinksPerSec / IsrExpandsPerSec (marked by the leader when
    its AlterPartition commits)."""

    __slots__ = ("shrinks", "expands")

    def __init__(self) -> None:
        self.shrinks = 0
        self.expands = 0

    def record(self, old_isr_size: int, new_isr_size: int) -> None:
        if new_isr_size < old_isr_size:
            self.shrinks += 1
        elif new_isr_size > old_isr_size:
            self.expands += 1


class ControllerStats:
    """Kafka's ``ControllerStats`` LeaderElectionRateAndTimeMs (its count): leader changes of
    existing partitions (a partition whose committed registration names a new leader, not
    none), counted as the broker applies committed metadata; every broker applies the same
    records, so every broker counts the same elections (the metrics endpoint shows the active
    controller's)."""

    __slots__ = ("leader_elections",)

    def __init__(self) -> None:
        self.leader_elections = 0

    def record(
        self, old_leader: Callable[[str, int], int | None], changed: Iterable[tuple[str, Any]]
    ) -> None:
        """Count the elections among ``changed`` ((topic, registration with ``partition`` and
        ``leader``) of one metadata delta); ``old_leader(topic, partition)`` is the leader
        before it (None: a new partition). One visit per changed partition."""
        for topic, registration in changed:
            before = old_leader(topic, registration.partition)
            if before is not None and registration.leader >= 0 and registration.leader != before:
                self.leader_elections += 1


_API_NAMES: dict[int, str] = {}


def request_name(api_key: int) -> str:
    """Kafka's ``ApiKeys.name`` of an api key (1 -> ``Fetch``, 2 -> ``ListOffsets``)."""
    name = _API_NAMES.get(api_key)
    if name is None:
        name = _API_NAMES[api_key] = "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    return name


_CHILDREN: dict[type, list[str]] = {}
_CONTAINERS = (tuple, list)
_LEAVES = (str, bytes, bytearray, memoryview, int, float, bool)


def _child_fields(cls: type) -> list[str]:
    """The fields of ``cls`` that may hold nested entries: every field but ``error_code`` at
    first; :func:`error_counts` drops a field the first time it holds a scalar (a field's type
    does not change within a generated class)."""
    fields = _CHILDREN.get(cls)
    if fields is None:
        names: list[str] = list(getattr(cls, "_fields", ()))  # NamedTuple
        if not names:
            dataclass_fields = getattr(cls, "__dataclass_fields__", None)
            if dataclass_fields is not None:
                names = list(dataclass_fields)
            else:
                for klass in cls.__mro__:
                    slots = klass.__dict__.get("__slots__", ())
                    names.extend((slots,) if isinstance(slots, str) else slots)
        fields = _CHILDREN[cls] = [n for n in names if n != "error_code"]
    return fields


def error_counts(response: Any) -> dict[int, int]:
    """Error code -> count over a response entity, as Kafka's ``AbstractResponse.errorCounts``:
    the top-level ``error_code`` and every ``error_code`` in its nested entries (partitions of
    a Produce or Fetch response, topics of CreateTopics, ...). Costs one visit per nested
    entry, i.e. in proportion to what the request carried."""
    counts: dict[int, int] = {}
    stack = [response]
    while stack:
        entry = stack.pop()
        # getattr: one walk for every API's response (entities of any class), by field name
        code = getattr(entry, "error_code", None)
        if code is not None:
            code = int(code)
            counts[code] = counts.get(code, 0) + 1
        fields = _child_fields(type(entry))
        for name in tuple(fields):
            value = getattr(entry, name, None)
            if value is None:
                continue
            if type(value) in _CONTAINERS:
                if value and not isinstance(value[0], _LEAVES):
                    stack.extend(value)
            else:  # a scalar field (or a record set): never a list of entries
                fields.remove(name)
    return counts


def record_fetch(stats: BrokerTopicStats, topics: Iterable[Any]) -> None:
    """A consumer's Fetch response is ready: count each partition's bytes (BytesOutPerSec) and
    each failed partition (FailedFetchRequestsPerSec). ``topics``: the response's topic entries
    (``.topic``, ``.partitions`` with ``.error_code`` and ``.records``); one visit per partition
    answered."""
    for entry in topics:
        topic = entry.topic
        size = 0
        for partition in entry.partitions:
            if partition.error_code:
                stats.record_failure(topic, FAILED_FETCH)
            elif partition.records is not None:
                size += len(partition.records)
        if size:
            stats.record_bytes_out(topic, size)
