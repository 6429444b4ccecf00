"""Consumer-group methods of ``KafkaConsumer`` (Java ``KafkaConsumer.subscribe`` /
``commitSync`` / ``commitAsync`` / ``committed`` ...), kept apart from the fetch path.

``KafkaConsumer`` owns a ``ConsumerGroup`` and delegates its group methods to it (as Java's
``KafkaConsumer`` holds an optional ``ConsumerCoordinator``). The component owns the
``ConsumerCoordinator`` (created when ``group.id`` is set) and the hooks the poll loop calls
(``update_assignment_metadata``, ``poll_wait_ms``, ``close``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.consumer.consumer_coordinator import (
    GROUP_DEFAULTS,
    ConsumerCoordinator,
    ConsumerRebalanceListener,
    OffsetCommitCallback,
    SubscriptionType,
)
from spark_kafkalite.client.consumer.consumer_protocol_coordinator import (
    ConsumerProtocolCoordinator,
    check_group_protocol_config,
)
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.errors import IllegalStateError
from spark_kafkalite.client.network_client import now_ms
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import InvalidConfigError, InvalidGroupIdError

if TYPE_CHECKING:
    from spark_kafkalite.client.consumer.subscription_state import SubscriptionState
    from spark_kafkalite.client.metadata import Metadata
    from spark_kafkalite.client.network_client import NetworkClient

__all__ = ["ConsumerGroup", "GROUP_DEFAULTS", "InvalidGroupIdError"]

log = logging.getLogger(__name__)

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


class ConsumerGroup:
    """Group management of one ``KafkaConsumer`` (see module docstring). Without ``group.id``
    there is no coordinator: the hooks are no-ops and the group methods raise
    ``InvalidGroupIdError``.

    With ``group.protocol=consumer`` the coordinator is a ``ConsumerProtocolCoordinator``
    (KIP-848), else the classic ``ConsumerCoordinator``; ``user_keys`` are the config keys the
    user set (Java rejects classic-only keys with the consumer protocol).

    Raises:
        InvalidConfigError: bad group settings (e.g. heartbeat.interval.ms >= session.timeout.ms,
            an unknown group.protocol, partition.assignment.strategy with group.protocol=consumer).
    """

    def __init__(
        self,
        config: dict[str, Any],
        client: NetworkClient,
        metadata: Metadata,
        subscriptions: SubscriptionState,
        clear_buffered: Callable[[set[TopicPartition] | None], None],
        default_timeout_ms: float,
        user_keys: Iterable[str] = (),
    ) -> None:
        self._client = client
        self._subscriptions = subscriptions
        self._default_timeout_ms = default_timeout_ms
        self.coordinator: ConsumerCoordinator | ConsumerProtocolCoordinator | None = None
        protocol = check_group_protocol_config(user_keys, config)
        group_id = str(config.get("group.id") or "")
        if not group_id:
            return
        if protocol == "consumer":  # KIP-848: the broker assigns (Java AsyncKafkaConsumer)
            self.coordinator = ConsumerProtocolCoordinator(
                client, metadata, subscriptions, config, clear_buffered
            )
            return
        if int(config["heartbeat.interval.ms"]) >= int(config["session.timeout.ms"]):
            raise InvalidConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self.coordinator = ConsumerCoordinator(client, metadata, subscriptions, config, clear_buffered)

    # ------------------------------------------------------------------ poll-loop hooks
    def require(self, what: str) -> ConsumerCoordinator | ConsumerProtocolCoordinator:
        if self.coordinator is None:
            raise InvalidGroupIdError(
                f"to use {what} you must provide a valid group.id in the consumer config"
            )
        return self.coordinator

    def check_manual_assign(self, partitions: list[TopicPartition]) -> None:
        """``assign`` is exclusive with ``subscribe``; ``assign([])`` equals unsubscribe."""
        coordinator = self.coordinator
        if coordinator is None:
            return
        if coordinator.is_auto_subscribed():
            if partitions:
                raise IllegalStateError(_MUTUALLY_EXCLUSIVE)
            return
        coordinator.subscription_type = (
            SubscriptionType.USER_ASSIGNED if partitions else SubscriptionType.NONE
        )

    def is_subscribed(self) -> bool:
        return self.coordinator is not None and self.coordinator.is_auto_subscribed()

    def update_assignment_metadata(self, deadline: float) -> bool:
        """Group work at the top of each poll round: (re)join, then committed-offset positions.
        False when ``deadline`` passed first."""
        coordinator = self.coordinator
        if coordinator is None:
            return True
        if not coordinator.poll(deadline):
            return False
        return coordinator.offsets.refresh_committed_offsets_if_needed(deadline)

    def refresh_committed_positions(self, deadline: float) -> bool:
        """Positions of partitions without one from the group's committed offsets (Java
        ``updateFetchPositions``); False when ``deadline`` passed first."""
        coordinator = self.coordinator
        return (
            True if coordinator is None else coordinator.offsets.refresh_committed_offsets_if_needed(deadline)
        )

    def poll_wait_ms(self, now: float) -> float:
        coordinator = self.coordinator
        return float("inf") if coordinator is None else coordinator.time_to_next_poll_ms(now)

    def close(self, timeout_ms: float) -> None:
        if self.coordinator is not None:
            self.coordinator.close(timeout_ms)

    def unsubscribe(self) -> None:
        if self.coordinator is not None:
            self.coordinator.unsubscribe()

    # ------------------------------------------------------------------ subscriptions
    def subscribe(
        self,
        topics: Iterable[str] | str | re.Pattern[str] = (),
        listener: ConsumerRebalanceListener | None = None,
        *,
        pattern: str | re.Pattern[str] | None = None,
    ) -> bool:
        """``KafkaConsumer.subscribe``; False for an empty topic list, which the consumer turns
        into ``unsubscribe()`` (as Java's ``subscribe(emptyList)``)."""
        coordinator = self.require("subscribe")
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
            return True
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            return False
        coordinator.subscribe(names, listener)
        return True

    def subscription(self) -> set[str]:
        """Topics of the current subscription (for a pattern: the topics it matches now)."""
        coordinator = self.coordinator
        if coordinator is None or not coordinator.is_auto_subscribed():
            return set()
        return set(coordinator.subscribed_topics)

    # ------------------------------------------------------------------ offsets
    def commit_sync(
        self, offsets: Mapping[Any, int | OffsetAndMetadata] | None = None, timeout_ms: float | None = None
    ) -> None:
        """``KafkaConsumer.commit_sync`` (documented there)."""
        coordinator = self.require("commit_sync")
        resolved = coordinator.offsets.all_consumed_offsets() if offsets is None else _offsets(offsets)
        deadline = now_ms() + (self._default_timeout_ms if timeout_ms is None else float(timeout_ms))
        coordinator.offsets.commit_sync(resolved, deadline)

    def commit_async(
        self,
        offsets: Mapping[Any, int | OffsetAndMetadata] | None = None,
        callback: OffsetCommitCallback | None = None,
    ) -> None:
        """``KafkaConsumer.commit_async`` (documented there)."""
        coordinator = self.require("commit_async")
        resolved = coordinator.offsets.all_consumed_offsets() if offsets is None else _offsets(offsets)
        coordinator.offsets.commit_async(resolved, callback)
        self._client.poll(0)

    def committed(
        self, partitions: TopicPartition | Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> OffsetAndMetadata | None | dict[TopicPartition, OffsetAndMetadata | None]:
        """``KafkaConsumer.committed`` (documented there)."""
        coordinator = self.require("committed")
        if isinstance(partitions, TopicPartition):
            tps = [partitions]
        else:
            tps = [TopicPartition(str(t[0]), int(t[1])) for t in partitions]
        deadline = now_ms() + (self._default_timeout_ms if timeout_ms is None else float(timeout_ms))
        found = coordinator.offsets.fetch_committed_offsets(tps, deadline)
        return found.get(tps[0]) if isinstance(partitions, TopicPartition) else found

    def group_metadata(self) -> dict[str, Any]:
        """``KafkaConsumer.group_metadata`` (documented there)."""
        coordinator = self.require("group_metadata")
        generation = coordinator.generation
        return {
            "group_id": coordinator.group_id,
            "generation_id": generation.generation_id,
            "member_id": generation.member_id,
            "group_instance_id": coordinator.group_instance_id,
        }
