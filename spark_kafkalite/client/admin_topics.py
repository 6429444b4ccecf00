"""The topic-changing part of ``KafkaAdminClient`` (Java ``Admin.createTopics``,
``deleteTopics``, ``createPartitions``): each request goes to the controller named in the
metadata, retried on NOT_CONTROLLER, REQUEST_TIMED_OUT, LEADER_NOT_AVAILABLE and connection
errors until the timeout; the call then waits until the metadata shows the change (leaders for
new partitions, deleted topics gone).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.admin_configs import create_partitions_builder
from spark_kafkalite.client.network_client import now_ms
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import NewTopic
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)

if TYPE_CHECKING:
    from spark_kafkalite.client.metadata import Cluster
    from spark_kafkalite.client.network_client import NetworkClient

__all__ = ["AdminTopics"]

log = logging.getLogger(__name__)

_RETRY_CODES = {ErrorCode.not_controller, ErrorCode.request_timed_out, ErrorCode.leader_not_available}


class AdminTopics:
    """Creates and deletes topics and adds partitions for ``KafkaAdminClient``, on the caller's
    thread (blocking; not thread-safe)."""

    def __init__(
        self,
        client: NetworkClient,
        retry_backoff_ms: float,
        ensure_open: Callable[[], None],
        describe: Callable[[list[str] | None, float | None], Cluster],
    ) -> None:
        self._client = client
        self._retry_backoff_ms = retry_backoff_ms
        self._ensure_open = ensure_open
        self._describe = describe

    def _call_controller(
        self, builder: RequestBuilder, results_of: Any, timeout_ms: float
    ) -> dict[str, tuple[int, str | None]]:
        """Send to the controller until no topic result says NOT_CONTROLLER (or time is up);
        returns ``{topic: (error_code, error_message)}``."""
        deadline = now_ms() + timeout_ms + self._client.request_timeout_ms
        while True:
            cluster = self._describe([], max(1.0, deadline - now_ms()))
            node = (
                cluster.controller_id
                if cluster.controller_id in cluster.nodes
                else self._client.least_loaded_node()
            )
            retry_error: BaseException | None = None
            if node is not None:
                future = self._client.send(
                    node, builder, timeout_ms=timeout_ms + self._client.request_timeout_ms
                )
                try:
                    response = self._client.wait_for(future, max(1.0, deadline - now_ms()))
                except (KafkaConnectionError, KafkaTimeoutError) as exc:
                    retry_error = exc
                else:
                    results = results_of(response)
                    if not any(code in _RETRY_CODES for code, _ in results.values()):
                        return results
                    retry_error = KafkaError(f"controller busy or moved: {results}")
            if now_ms() >= deadline:
                raise KafkaTimeoutError(f"{ApiKey(builder.api_key).name} did not complete: {retry_error}")
            self._client.poll(self._retry_backoff_ms)

    @staticmethod
    def _raise_first(results: Mapping[str, tuple[int, str | None]], names: Iterable[str]) -> None:
        for name in names:
            code, message = results.get(name, (int(ErrorCode.unknown_server_error), "no result for topic"))
            if code != ErrorCode.none:
                raise error_for_code(code, f"topic {name}: {message}" if message else f"topic {name}")

    def create_topics(
        self, new_topics: Iterable[NewTopic], timeout_ms: int = 30000, validate_only: bool = False
    ) -> None:
        """Create topics; returns when the controller created them and the metadata shows a
        leader for every partition (bounded by ``timeout_ms``).

        Raises:
            TopicAlreadyExistsError, InvalidPartitionsError, InvalidReplicationFactorError,
            InvalidTopicError, InvalidConfigError, PolicyViolationError ... (the first error).
            KafkaTimeoutError: no answer in time.
        """
        self._ensure_open()
        topics = list(new_topics)
        if not topics:
            return

        def build(version: int) -> Any:
            cls = request_class(ApiKey.CREATE_TOPICS, version)
            topic_cls = nested(cls, "CreatableTopic")
            config_cls = nested(cls, "CreatableTopicConfig")
            return make(
                cls,
                topics=tuple(
                    topic_cls(
                        name=t.name,
                        num_partitions=int(t.num_partitions),
                        replication_factor=int(t.replication_factor),
                        assignments=(),
                        configs=tuple(
                            config_cls(name=k, value=None if v is None else str(v))
                            for k, v in t.config.items()
                        ),
                    )
                    for t in topics
                ),
                timeout=int(timeout_ms),
                validate_only=validate_only,
            )

        # CreateTopics v4+ lets the broker pick defaults for -1 partitions / replication factor.
        min_version = 4 if any(t.num_partitions < 0 or t.replication_factor < 0 for t in topics) else None
        results = self._call_controller(
            RequestBuilder(ApiKey.CREATE_TOPICS, build, min_version=min_version),
            lambda r: {str(t.name): (int(t.error_code), getattr(t, "error_message", None)) for t in r.topics},
            timeout_ms,
        )
        self._raise_first(results, [t.name for t in topics])
        if not validate_only:
            self._await_topics([t.name for t in topics], present=True, timeout_ms=timeout_ms)

    def delete_topics(self, topics: Iterable[str], timeout_ms: int = 30000) -> None:
        """Delete topics; returns when the controller deleted them and the metadata no longer
        lists them (bounded by ``timeout_ms``).

        Raises:
            UnknownTopicOrPartitionError: a topic does not exist (the first error is raised).
            KafkaTimeoutError: no answer in time.
        """
        self._ensure_open()
        names = list(topics)
        if not names:
            return

        def build(version: int) -> Any:
            return make(
                request_class(ApiKey.DELETE_TOPICS, version),
                topic_names=tuple(names),
                timeout=int(timeout_ms),
            )

        results = self._call_controller(
            RequestBuilder(ApiKey.DELETE_TOPICS, build),
            lambda r: {
                str(t.name): (int(t.error_code), getattr(t, "error_message", None)) for t in r.responses
            },
            timeout_ms,
        )
        self._raise_first(results, names)
        self._await_topics(names, present=False, timeout_ms=timeout_ms)

    def _await_topics(self, names: list[str], present: bool, timeout_ms: float) -> None:
        deadline = now_ms() + timeout_ms
        while True:
            cluster = self._describe(names, max(1.0, deadline - now_ms()))
            if present:
                done = all(
                    name in cluster.partitions
                    and cluster.partitions[name]
                    and all(pm.leader >= 0 for pm in cluster.partitions[name].values())
                    for name in names
                )
            else:
                done = not any(name in cluster.partitions for name in names)
            if done:
                return
            if now_ms() >= deadline:
                log.warning(
                    "topics %s not %s in metadata after %s ms",
                    names,
                    "ready" if present else "gone",
                    timeout_ms,
                )
                return
            self._client.poll(self._retry_backoff_ms)

    def create_partitions(
        self, new_totals: Mapping[str, int], timeout_ms: int = 30000, validate_only: bool = False
    ) -> None:
        """Grow topics to a new total number of partitions (CreatePartitions, Java
        ``Admin.createPartitions``), e.g. ``{"orders": 6}``; returns once the metadata shows
        the new partitions with leaders (bounded by ``timeout_ms``).

        Raises:
            InvalidPartitionsError: the total is not above the current count.
            UnknownTopicOrPartitionError, KafkaTimeoutError (the first error is raised).
        """
        self._ensure_open()
        totals = {str(t): int(n) for t, n in new_totals.items()}
        if not totals:
            return
        results = self._call_controller(
            create_partitions_builder(totals, timeout_ms, validate_only),
            lambda r: {str(t.name): (int(t.error_code), t.error_message) for t in r.results},
            timeout_ms,
        )
        self._raise_first(results, list(totals))
        if validate_only:
            return
        deadline = now_ms() + timeout_ms
        while True:
            cluster = self._describe(list(totals), max(1.0, deadline - now_ms()))
            if all(
                len(cluster.partitions.get(t, {})) >= n
                and all(pm.leader >= 0 for pm in cluster.partitions[t].values())
                for t, n in totals.items()
            ):
                return
            if now_ms() >= deadline:
                log.warning("new partitions of %s not in metadata after %s ms", list(totals), timeout_ms)
                return
            self._client.poll(self._retry_backoff_ms)
