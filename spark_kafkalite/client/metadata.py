"""Cluster metadata cache (Java ``org.apache.kafka.clients.Metadata`` + ``Cluster``).

``Metadata`` holds an immutable ``Cluster`` snapshot (nodes, partition leader / replicas / ISR /
leader epoch, topic ids, per-topic errors) for the topics the client is interested in. It asks
for a refresh when the snapshot is older than ``metadata.max.age.ms`` or when someone calls
``request_update()`` (after NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
LEADER_NOT_AVAILABLE, disconnects ...), never more often than ``retry.backoff.ms``. The
``NetworkClient`` sends the MetadataRequest; this class only decides when and what.

Thread-safe: the producer's Sender thread updates it while user threads read snapshots and wait
for updates (``await_update``). KIP-320: partition metadata carrying an older leader epoch than
the cached one is ignored.
"""

from __future__ import annotations

import logging
import math
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.config import parse_bootstrap_servers
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaTimeoutError,
    error_for_code,
    needs_metadata_refresh,
)

__all__ = [
    "Metadata",
    "Cluster",
    "PartitionMetadata",
    "metadata_request",
    "parse_metadata_response",
    "fetch_cluster",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """One partition; ``leader`` is -1 when the partition has no leader."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int


@dataclass(frozen=True, slots=True)
class Cluster:
    """An immutable view of the cluster from one MetadataResponse."""

    nodes: dict[int, tuple[str, int]] = field(default_factory=dict)
    partitions: dict[str, dict[int, PartitionMetadata]] = field(default_factory=dict)
    topic_errors: dict[str, int] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    internal_topics: frozenset[str] = frozenset()
    cluster_id: str | None = None
    controller_id: int = -1
    _available: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)

    def leader_for(self, tp: TopicPartition) -> int | None:
        """Leader node id of ``tp``, None if unknown or leaderless."""
        parts = self.partitions.get(tp.topic)
        if parts is None:
            return None
        pm = parts.get(tp.partition)
        if pm is None or pm.leader < 0:
            return None
        return pm.leader

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        """The metadata of ``tp`` (leader, leader epoch, replicas, ISR, offline replicas), or
        None when the topic or partition is unknown (Java ``Cluster.partition``)."""
        parts = self.partitions.get(tp.topic)
        return None if parts is None else parts.get(tp.partition)

    def partitions_for_topic(self, topic: str) -> dict[int, PartitionMetadata] | None:
        """``{partition id: PartitionMetadata}`` of ``topic``, or None when the topic is
        unknown (Java ``Cluster.partitionsForTopic``)."""
        return self.partitions.get(topic)

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions of ``topic`` that have a leader, sorted (cached per snapshot)."""
        cached = self._available.get(topic)
        if cached is None:
            parts = self.partitions.get(topic) or {}
            cached = self._available[topic] = sorted(p for p, pm in parts.items() if pm.leader >= 0)
        return cached


def metadata_request(topics: Iterable[str] | None, allow_auto_topic_creation: bool = False) -> RequestBuilder:
    """A MetadataRequest builder; ``topics=None`` asks for every topic (v1+ semantics)."""
    names = None if topics is None else tuple(topics)

    def build(version: int) -> Any:
        cls = request_class(ApiKey.METADATA, version)
        topic_entities = None
        if names is not None:
            topic_cls = nested(cls, "MetadataRequestTopic")
            topic_entities = tuple(make(topic_cls, name=name, topic_id=None) for name in names)
        return make(
            cls,
            topics=topic_entities,
            allow_auto_topic_creation=allow_auto_topic_creation,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )

    return RequestBuilder(ApiKey.METADATA, build)


def parse_metadata_response(response: Any, previous: Cluster | None = None) -> Cluster:
    """Build a ``Cluster`` from a MetadataResponse entity; with ``previous``, partitions whose
    leader epoch went backwards keep their previous metadata (KIP-320)."""
    nodes = {int(b.node_id): (str(b.host), int(b.port)) for b in response.brokers}
    partitions: dict[str, dict[int, PartitionMetadata]] = {}
    topic_errors: dict[str, int] = {}
    topic_ids: dict[str, uuid.UUID] = {}
    internal: set[str] = set()
    for topic in response.topics:
        name = str(topic.name)
        topic_id = getattr(topic, "topic_id", None)
        if topic_id is not None and topic_id.int != 0:
            topic_ids[name] = topic_id
        if getattr(topic, "is_internal", False):
            internal.add(name)
        if topic.error_code != ErrorCode.none:
            topic_errors[name] = int(topic.error_code)
            if topic.error_code != ErrorCode.leader_not_available or not topic.partitions:
                continue
        old_parts = previous.partitions.get(name, {}) if previous is not None else {}
        parts: dict[int, PartitionMetadata] = {}
        for p in topic.partitions:
            pm = PartitionMetadata(
                topic=name,
                partition=int(p.partition_index),
                leader=int(p.leader_id),
                leader_epoch=int(getattr(p, "leader_epoch", -1)),
                replicas=tuple(int(r) for r in p.replica_nodes),
                isr=tuple(int(r) for r in p.isr_nodes),
                offline_replicas=tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                error_code=int(p.error_code),
            )
            old = old_parts.get(pm.partition)
            if old is not None and 0 <= pm.leader_epoch < old.leader_epoch:
                log.debug(
                    "ignoring stale metadata for %s-%s (epoch %s < %s)",
                    name,
                    pm.partition,
                    pm.leader_epoch,
                    old.leader_epoch,
                )
                pm = old
            parts[pm.partition] = pm
        partitions[name] = parts
    return Cluster(
        nodes=nodes,
        partitions=partitions,
        topic_errors=topic_errors,
        topic_ids=topic_ids,
        internal_topics=frozenset(internal),
        cluster_id=getattr(response, "cluster_id", None),
        controller_id=int(getattr(response, "controller_id", -1)),
    )


class Metadata:
    """The client's metadata cache (see module docstring).

    Args:
        config: parsed client config (``bootstrap.servers``, ``metadata.max.age.ms``,
            ``retry.backoff.ms``).
        allow_auto_topic_creation: sent in MetadataRequests (v4+); Java producers send true.
    """

    def __init__(self, config: Mapping[str, Any], allow_auto_topic_creation: bool = False) -> None:
        self._bootstrap = {
            -(i + 1): addr for i, addr in enumerate(parse_bootstrap_servers(config["bootstrap.servers"]))
        }
        self._max_age_ms = float(config.get("metadata.max.age.ms", 300000))
        self._retry_backoff_ms = float(config.get("retry.backoff.ms", 100))
        self._allow_auto_topic_creation = allow_auto_topic_creation
        self._cond = threading.Condition()
        self._cluster = Cluster()
        self._topics: set[str] = set()
        self._need_all_topics = False
        self._request_version = 1
        self._in_flight_request_version = 0
        self._handled_request_version = 0
        self._version = 0
        self._last_refresh_ms = -math.inf
        self._last_attempt_ms = -math.inf
        self._fatal_error: BaseException | None = None
        self._closed = False

    # -------------------------------------------------------------- reading

    def fetch(self) -> Cluster:
        """The current snapshot (immutable; safe to keep)."""
        return self._cluster

    @property
    def version(self) -> int:
        """Incremented on every successful update."""
        return self._version

    def node_ids(self) -> list[int]:
        """Brokers of the last response, or the bootstrap pseudo-nodes (-1, -2, ...) before it."""
        nodes = self._cluster.nodes
        return list(nodes) if nodes else list(self._bootstrap)

    def node_address(self, node_id: int) -> tuple[str, int] | None:
        """``(host, port)`` of broker ``node_id`` in the last response, or of a bootstrap
        pseudo-node (negative id); None when unknown."""
        return self._cluster.nodes.get(node_id) or self._bootstrap.get(node_id)

    @property
    def topics(self) -> frozenset[str]:
        """The topics whose metadata is kept fresh (the topics of interest)."""
        return frozenset(self._topics)

    # -------------------------------------------------------------- interest and requests

    def add_topics(self, *topics: str) -> bool:
        """Add topics of interest; request an update when one is new, sent at once (no
        ``retry.backoff.ms`` wait: Java's ``Metadata.requestUpdateForNewTopics``). Returns True if so."""
        with self._cond:
            new = set(topics) - self._topics
            if not new:
                return False
            self._topics |= new
            self._request_update_for_new_topics()
            return True

    def set_topics(self, topics: Iterable[str]) -> None:
        """Replace the topics of interest; an update is requested when the set changes, sent at
        once when a topic was added (Java's ``Metadata.requestUpdateForNewTopics``)."""
        with self._cond:
            wanted = set(topics)
            if wanted != self._topics:
                added = bool(wanted - self._topics)
                self._topics = wanted
                if added:
                    self._request_update_for_new_topics()
                else:
                    self._request_version += 1

    def _request_update_for_new_topics(self) -> None:
        """An update that skips the ``retry.backoff.ms`` wait after the last attempt: a new topic
        is not a retry (Java resets ``lastRefreshMs``), so e.g. a consumer that listed topics and
        then looks up offsets of one does not stall 100 ms. Call with ``_cond`` held."""
        self._request_version += 1
        self._last_attempt_ms = -math.inf

    def request_update(self) -> int:
        """Ask for a refresh as soon as ``retry.backoff.ms`` allows; returns the current version
        (wait until ``version`` exceeds it)."""
        with self._cond:
            self._request_version += 1
            return self._version

    def update_requested(self) -> bool:
        """True when a refresh was requested and not yet answered (Java
        ``Metadata.updateRequested``)."""
        return self._request_version > self._handled_request_version

    def time_to_next_update(self, now_ms: float) -> float:
        """Milliseconds until a refresh is due (0 = now)."""
        if self.update_requested():
            ttl = 0.0
        else:
            ttl = self._last_refresh_ms + self._max_age_ms - now_ms
        backoff = self._last_attempt_ms + self._retry_backoff_ms - now_ms
        return max(ttl, backoff, 0.0)

    def mark_update_attempt(self, now_ms: float) -> None:
        """A MetadataRequest was sent at ``now_ms``: the next waits ``retry.backoff.ms``
        after it."""
        self._last_attempt_ms = now_ms

    def build_request(self) -> RequestBuilder:
        """The MetadataRequest for the current topics of interest."""
        with self._cond:
            self._in_flight_request_version = self._request_version
            topics = None if self._need_all_topics else sorted(self._topics)
        return metadata_request(topics, self._allow_auto_topic_creation)

    # -------------------------------------------------------------- updates

    def update(self, response: Any, now_ms: float) -> None:
        """Install a MetadataResponse. Topics with retriable errors (e.g. LEADER_NOT_AVAILABLE
        while being created) or leaderless partitions schedule another refresh."""
        cluster = parse_metadata_response(response, self._cluster)
        retry = any(
            needs_metadata_refresh(code) and code != ErrorCode.unknown_topic_or_partition
            for code in cluster.topic_errors.values()
        )
        retry = retry or any(pm.leader < 0 for parts in cluster.partitions.values() for pm in parts.values())
        with self._cond:
            self._cluster = cluster
            self._version += 1
            self._last_refresh_ms = now_ms
            self._fatal_error = None
            self._handled_request_version = self._in_flight_request_version
            if retry:
                self._request_version += 1
            self._cond.notify_all()
        if cluster.topic_errors:
            log.debug("metadata topic errors: %s", cluster.topic_errors)

    def failed_update(self, now_ms: float, fatal_error: BaseException | None = None) -> None:
        """A metadata request failed; the next try waits ``retry.backoff.ms``. ``fatal_error``
        (an authentication failure) is kept as by :meth:`fatal_error`."""
        with self._cond:
            self._last_attempt_ms = now_ms
            if fatal_error is not None:
                self._fatal_error = fatal_error
            self._cond.notify_all()

    def fatal_error(self, error: BaseException) -> None:
        """Keep ``error`` (an authentication failure seen by any request) for
        :meth:`maybe_throw_fatal_error` and wake waiters (Java ``Metadata.fatalError``)."""
        with self._cond:
            self._fatal_error = error
            self._cond.notify_all()

    def maybe_throw_fatal_error(self) -> None:
        """Raise (once) the error a failed update was given as fatal, e.g. a
        SaslAuthenticationFailedError (Java ``Metadata.maybeThrowFatalException``)."""
        with self._cond:
            error, self._fatal_error = self._fatal_error, None
        if error is not None:
            raise error

    def await_update(self, last_version: int, timeout_s: float) -> bool:
        """Block until ``version > last_version`` (True) or ``timeout_s`` elapses (False).
        Someone else (the producer's Sender thread) must be polling the network.

        Raises:
            KafkaError: an authentication failure of the metadata requests meanwhile
                (:meth:`maybe_throw_fatal_error`).
        """
        with self._cond:
            updated = (
                self._cond.wait_for(
                    lambda: self._version > last_version or self._closed or self._fatal_error is not None,
                    timeout_s,
                )
                and self._version > last_version
                and not self._closed
            )
        if not updated:
            self.maybe_throw_fatal_error()
        return updated

    def close(self) -> None:
        """Close the cache: threads waiting for an update wake up (their wait returns False)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()


def fetch_cluster(
    client: Any,
    topics: list[str] | None,
    timeout_ms: float,
    retry_backoff_ms: float,
    retry_codes: frozenset[int] = frozenset(),
) -> Cluster:
    """One MetadataRequest (no auto-creation) to ``client``'s least loaded node, retried every
    ``retry_backoff_ms`` after a connection error, a timeout or a topic answered with a code in
    ``retry_codes``, until ``timeout_ms`` (what the admin client's ``describeCluster`` /
    ``describeTopics`` and ``KafkaConsumer.partitionsFor`` / ``listTopics`` do in Kafka).

    Raises:
        KafkaTimeoutError: no usable answer in time (names the last error; a connection error
            is kept over a later wait that the deadline cut short).
    """
    deadline = now_ms() + timeout_ms
    last_error: BaseException | None = None
    while True:
        node = client.least_loaded_node()
        if node is not None:
            future = client.send(node, metadata_request(topics, False))
            try:
                cluster = parse_metadata_response(client.wait_for(future, max(1.0, deadline - now_ms())))
            except KafkaConnectionError as exc:
                last_error = exc
            except KafkaTimeoutError as exc:
                # a wait cut short by the deadline says less than the connection error before it
                if not isinstance(last_error, KafkaConnectionError):
                    last_error = exc
            else:
                retriable = [t for t, c in cluster.topic_errors.items() if c in retry_codes]
                if not retriable:
                    return cluster
                last_error = error_for_code(cluster.topic_errors[retriable[0]], f"topics {retriable}")
        if now_ms() >= deadline:
            raise KafkaTimeoutError(f"cannot fetch metadata in time (last error: {last_error})")
        client.poll(min(retry_backoff_ms, max(0.0, deadline - now_ms())))
