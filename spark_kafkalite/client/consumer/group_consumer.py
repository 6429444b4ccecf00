"""Consumer-group methods of ``KafkaConsumer`` (Java ``KafkaConsumer.subscribe`` /
``commitSync`` / ``commitAsync`` / ``committed`` ...), kept apart from the fetch path.

``KafkaConsumer`` inherits ``ConsumerGroupMixin``; the mixin owns the ``ConsumerCoordinator``
(created when ``group.id`` is set) and the hooks the poll loop calls
(``_update_assignment_metadata``, ``_group_poll_wait_ms``, ``_close_group``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, overload

from spark_kafkalite.client.consumer.consumer_coordinator import (
    GROUP_DEFAULTS,
    ConsumerCoordinator,
    ConsumerRebalanceListener,
    OffsetCommitCallback,
    SubscriptionType,
)
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.client.network_client import now_ms
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol import errors as _errors
from spark_kafkalite.protocol.errors import InvalidConfigError, KafkaError

if TYPE_CHECKING:
    from spark_kafkalite.client.consumer.fetcher import Fetcher
    from spark_kafkalite.client.consumer.subscription_state import SubscriptionState
    from spark_kafkalite.client.metadata import Metadata
    from spark_kafkalite.client.network_client import NetworkClient

__all__ = ["ConsumerGroupMixin", "GROUP_DEFAULTS", "InvalidGroupIdError"]

log = logging.getLogger(__name__)

InvalidGroupIdError: type[KafkaError] = _errors.InvalidGroupIdError  # type: ignore[attr-defined]

_MUTUALLY_EXCLUSIVE = "subscription to topics, partitions and pattern are mutually exclusive"


def _offsets(offsets: Mapping[Any, int | OffsetAndMetadata]) -> dict[TopicPartition, OffsetAndMetadata]:
    out = {}
    for tp, value in offsets.items():
        key = TopicPartition(str(tp[0]), int(tp[1]))
        om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
        if om.offset < 0:
            raise ValueError(f"invalid negative offset {om.offset} for {key.topic}-{key.partition}")
        out[key] = om
    return out


class ConsumerGroupMixin:
    """Group management for ``KafkaConsumer`` (see module docstring)."""

    # provided by KafkaConsumer
    config: dict[str, Any]
    _client: NetworkClient
    _metadata: Metadata
    _subscriptions: SubscriptionState
    _fetcher: Fetcher
    _default_timeout_ms: float
    _coordinator: ConsumerCoordinator | None

    def _ensure_open(self) -> None:  # overridden by KafkaConsumer
        raise NotImplementedError

    # ------------------------------------------------------------------ wiring
    def _init_group(self) -> None:
        """Create the coordinator when ``group.id`` is set (call at the end of ``__init__``).

        Raises:
            InvalidConfigError: bad group settings (e.g. heartbeat.interval.ms >= session.timeout.ms).
        """
        self._coordinator = None
        group_id = str(self.config.get("group.id") or "")
        if not group_id:
            return
        if int(self.config["heartbeat.interval.ms"]) >= int(self.config["session.timeout.ms"]):
            raise InvalidConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self._coordinator = ConsumerCoordinator(
            self._client, self._metadata, self._subscriptions, self.config, self._fetcher.clear_buffered
        )

    def _require_group(self, what: str) -> ConsumerCoordinator:
        if self._coordinator is None:
            raise InvalidGroupIdError(
                f"to use {what} you must provide a valid group.id in the consumer config"
            )
        return self._coordinator

    def _check_manual_assign(self, partitions: list[TopicPartition]) -> None:
        """``assign`` is exclusive with ``subscribe``; ``assign([])`` equals unsubscribe."""
        coordinator = self._coordinator
        if coordinator is None:
            return
        if coordinator.is_auto_subscribed():
            if partitions:
                raise IllegalStateError(_MUTUALLY_EXCLUSIVE)
            return
        coordinator.subscription_type = (
            SubscriptionType.USER_ASSIGNED if partitions else SubscriptionType.NONE
        )

    def _is_group_subscribed(self) -> bool:
        return self._coordinator is not None and self._coordinator.is_auto_subscribed()

    def _update_assignment_metadata(self, deadline: float) -> bool:
        """Group work at the top of each poll round: (re)join, then committed-offset positions.
        False when ``deadline`` passed first."""
        coordinator = self._coordinator
        if coordinator is None:
            return True
        if not coordinator.poll(deadline):
            return False
        return coordinator.refresh_committed_offsets_if_needed(deadline)

    def _refresh_committed_positions(self, deadline: float) -> bool:
        """Positions of partitions without one from the group's committed offsets (Java
        ``updateFetchPositions``); False when ``deadline`` passed first."""
        coordinator = self._coordinator
        return True if coordinator is None else coordinator.refresh_committed_offsets_if_needed(deadline)

    def _group_poll_wait_ms(self, now: float) -> float:
        coordinator = self._coordinator
        return float("inf") if coordinator is None else coordinator.time_to_next_poll_ms(now)

    def _close_group(self, timeout_ms: float) -> None:
        if self._coordinator is not None:
            self._coordinator.close(timeout_ms)

    # ------------------------------------------------------------------ subscriptions
    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str] = (),
        listener: ConsumerRebalanceListener | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> None:
        """Join the group ``group.id`` for ``topics`` (names, or a compiled regex / ``pattern=``
        matched in full against every topic, re-evaluated every ``metadata.max.age.ms``).
        The assignment arrives in ``poll``; ``listener`` gets the rebalance callbacks. An empty
        topic list equals ``unsubscribe()``.

        Raises:
            InvalidGroupIdError: no ``group.id``. IllegalStateError: partitions were assigned
            manually. ValueError: an empty topic name.
        """
        self._ensure_open()
        coordinator = self._require_group("subscribe")
        if (
            coordinator.subscription_type is SubscriptionType.USER_ASSIGNED
            and self._subscriptions.assigned_partitions()
        ):
            raise IllegalStateError(_MUTUALLY_EXCLUSIVE)
        if isinstance(topics, re.Pattern):
            pattern = topics
            topics = ()
        if pattern is not None:
            coordinator.subscribe_pattern(pattern, listener)
            return
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            self.unsubscribe()  # type: ignore[attr-defined]
            return
        coordinator.subscribe(names, listener)

    def subscription(self) -> set[str]:
        """Topics of the current subscription (for a pattern: the topics it matches now)."""
        coordinator = self._coordinator
        if coordinator is None or not coordinator.is_auto_subscribed():
            return set()
        return set(coordinator.subscribed_topics)

    def _group_unsubscribe(self) -> None:
        if self._coordinator is not None:
            self._coordinator.unsubscribe()

    # ------------------------------------------------------------------ offsets
    def commit_sync(
        self, offsets: Mapping[Any, int | OffsetAndMetadata] | None = None, timeout_ms: float | None = None
    ) -> None:
        """Commit ``offsets`` (``{tp: next offset to consume}`` or OffsetAndMetadata values;
        default: the position of every assigned partition) and wait.

        Raises:
            InvalidGroupIdError: no ``group.id``. CommitFailedError: the member left the group
            (rebalanced away). RebalanceInProgressError: a rebalance is under way; ``poll`` and
            retry. KafkaTimeoutError: not done within ``timeout_ms`` (default.api.timeout.ms).
            KafkaError: other broker errors (OFFSET_METADATA_TOO_LARGE, authorization ...).
        """
        self._ensure_open()
        coordinator = self._require_group("commit_sync")
        resolved = coordinator.all_consumed_offsets() if offsets is None else _offsets(offsets)
        deadline = now_ms() + (self._default_timeout_ms if timeout_ms is None else float(timeout_ms))
        coordinator.commit_sync(resolved, deadline)

    def commit_async(
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata] | None = None,
        callback: OffsetCommitCallback | None = None,
    ) -> None:
        """Send a commit without waiting; ``callback(offsets, exception_or_None)`` runs during a
        later ``poll``/``commit_*``/``close`` on this thread.

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        self._ensure_open()
        coordinator = self._require_group("commit_async")
        resolved = coordinator.all_consumed_offsets() if offsets is None else _offsets(offsets)
        coordinator.commit_async(resolved, callback)
        self._client.poll(0)

    @overload
    def committed(
        self, partitions: TopicPartition, timeout_ms: float | None = None
    ) -> OffsetAndMetadata | None: ...

    @overload
    def committed(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]: ...

    def committed(
        self, partitions: TopicPartition | Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> OffsetAndMetadata | None | dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (OffsetFetch): for one TopicPartition its
        ``OffsetAndMetadata`` or None; for several ``{tp: OffsetAndMetadata | None}``.

        Raises:
            InvalidGroupIdError: no ``group.id``. KafkaTimeoutError. KafkaError.
        """
        self._ensure_open()
        coordinator = self._require_group("committed")
        if isinstance(partitions, TopicPartition):
            tps = [partitions]
        else:
            tps = [TopicPartition(str(t[0]), int(t[1])) for t in partitions]
        deadline = now_ms() + (self._default_timeout_ms if timeout_ms is None else float(timeout_ms))
        found = coordinator.fetch_committed_offsets(tps, deadline)
        return found.get(tps[0]) if isinstance(partitions, TopicPartition) else found

    def group_metadata(self) -> dict[str, Any]:
        """``{"group_id", "generation_id", "member_id", "group_instance_id"}`` (Java
        ``ConsumerGroupMetadata``).

        Raises:
            InvalidGroupIdError: no ``group.id``.
        """
        coordinator = self._require_group("group_metadata")
        generation = coordinator.generation
        return {
            "group_id": coordinator.group_id,
            "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": coordinator.group_instance_id,
        }
