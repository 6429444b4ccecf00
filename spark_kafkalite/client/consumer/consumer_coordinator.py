"""``ConsumerCoordinator``: the consumer side of a consumer group (Java
``org.apache.kafka.clients.consumer.internals.ConsumerCoordinator``).

On top of ``AbstractCoordinator``'s membership it adds:

- subscriptions (topics or a regex pattern, re-evaluated against all topics every
  ``metadata.max.age.ms``) sent as Java ``ConsumerProtocol`` subscriptions, one per configured
  assignor (``partition.assignment.strategy``, default ``["range", "cooperative-sticky"]`` as
  Java 3.x); the rebalance protocol is COOPERATIVE only when every configured assignor supports
  it (KIP-429), else EAGER;
- the leader's assignment (``assignors.py``) over the metadata of every member's topics; the
  leader rejoins when the partition counts of those topics change;
- rebalance listener callbacks: EAGER revokes every partition before rejoining; COOPERATIVE
  revokes only the partitions that move and rejoins once more; partitions of a member that lost
  its generation are reported lost;
- offsets: ``commit_sync`` / ``commit_async`` (OffsetCommit with generation and member id; with
  manual assignment generation -1), auto-commit every ``auto.commit.interval.ms`` and before a
  rebalance or close, ``fetch_committed_offsets`` (OffsetFetch), and positions of newly assigned
  partitions initialised from committed offsets (else ``auto.offset.reset``).

Errors: a commit while the group rebalances raises ``RebalanceInProgressError``; a commit by a
member that is no longer in the group (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, not joined)
raises ``CommitFailedError`` (Java ``CommitFailedException``).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.consumer.abstract_coordinator import (
    AbstractCoordinator,
    Generation,
)
from spark_kafkalite.client.consumer.assignors import (
    ConsumerPartitionAssignor,
    RebalanceProtocol,
    assignors_from_config,
)
from spark_kafkalite.client.consumer.consumer_offsets import (
    CommitFailedError,
    ConsumerOffsets,
    OffsetCommitCallback,
    RebalanceInProgressError,
)
from spark_kafkalite.client.consumer.group_state import SubscriptionType
from spark_kafkalite.client.consumer.subscription_state import SubscriptionState
from spark_kafkalite.client.metadata import Metadata, metadata_request, parse_metadata_response
from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from spark_kafkalite.protocol.errors import KafkaError

__all__ = [
    "ConsumerCoordinator",
    "ConsumerRebalanceListener",
    "CommitFailedError",
    "SubscriptionType",
    "GROUP_DEFAULTS",
    "OffsetCommitCallback",
    "RebalanceInProgressError",
]

log = logging.getLogger(__name__)

#: Consumer config keys of group management and their defaults (Java's).
GROUP_DEFAULTS: dict[str, Any] = {
    "group.instance.id": None,
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 5000,
    "partition.assignment.strategy": "range,cooperative-sticky",
    "client.rack": "",
}


class ConsumerRebalanceListener:
    """Java ``ConsumerRebalanceListener``: override the callbacks you need. They run on the
    consumer's thread inside ``poll`` (and ``close``/``unsubscribe``); sets of TopicPartition."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        """Partitions this member gives up (commit their offsets here when committing by hand)."""

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        """Partitions newly assigned (all of them with the eager protocol; may be empty)."""

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        """Partitions already owned by others (the member lost its generation); by default the
        same as ``on_partitions_revoked``. Do not commit here."""
        self.on_partitions_revoked(lost)


class ConsumerCoordinator(AbstractCoordinator):
    """See module docstring. Application thread only, except the heartbeat machinery."""

    def __init__(
        self,
        client: NetworkClient,
        metadata: Metadata,
        subscriptions: SubscriptionState,
        config: Mapping[str, Any],
        on_partitions_removed: Callable[[set[TopicPartition]], None] | None = None,
        clock: Callable[[], float] = now_ms,
    ) -> None:
        super().__init__(client, config, clock)
        self._metadata = metadata
        self._subscriptions = subscriptions
        self._on_partitions_removed = on_partitions_removed
        self.assignors: list[ConsumerPartitionAssignor] = assignors_from_config(
            config["partition.assignment.strategy"]
        )
        common = set(RebalanceProtocol)
        for a in self.assignors:
            common &= set(a.supported_protocols())
        self.protocol = (
            RebalanceProtocol.COOPERATIVE
            if RebalanceProtocol.COOPERATIVE in common
            else RebalanceProtocol.EAGER
        )
        self._rack = str(config.get("client.rack") or "") or None
        self._exclude_internal = bool(config.get("exclude.internal.topics", True))
        self._metadata_max_age_ms = float(config.get("metadata.max.age.ms", 300000))
        self.subscription_type = SubscriptionType.NONE
        self.subscribed_topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: ConsumerRebalanceListener = ConsumerRebalanceListener()
        self._joined_subscription: set[str] = set()
        self._group_subscription: set[str] = set()
        self._assignment_snapshot: dict[str, int] | None = None
        self._snapshot_metadata_version = -1
        self._pattern_future: RequestFuture | None = None
        self._pattern_evaluated = False
        self._next_pattern_refresh_ms = 0.0
        self._listener_error: BaseException | None = None
        #: the offset manager: commits, committed offsets, auto-commit (Java keeps these in
        #: ConsumerCoordinator itself; a component here so each half reads and tests alone)
        self.offsets = ConsumerOffsets(
            self,
            client,
            subscriptions,
            auto_commit_enabled=bool(config["enable.auto.commit"]),
            auto_commit_interval_ms=float(config["auto.commit.interval.ms"]),
        )

    # ------------------------------------------------------------------ subscriptions
    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None) -> None:
        """Subscribe to ``topics`` (Java ``SubscriptionState.subscribe``): the metadata follows
        them and a changed set requests a rejoin; ``listener`` (kept when None) gets the rebalance
        callbacks.

        Raises:
            ValueError: an empty topic name."""
        names = {str(t) for t in topics}
        if any(not t.strip() for t in names):
            raise ValueError("topic names must not be empty")
        self.subscription_type = SubscriptionType.AUTO_TOPICS if names else SubscriptionType.NONE
        self.pattern = None
        self._change_subscription(names, listener)

    def subscribe_pattern(
        self, pattern: str | re.Pattern[str], listener: ConsumerRebalanceListener | None
    ) -> None:
        """Subscribe to every topic whose name matches ``pattern`` (``re.fullmatch``
        semantics of Java's ``Pattern.matcher().matches()``), re-evaluated as the metadata changes."""
        self.subscription_type = SubscriptionType.AUTO_PATTERN
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._pattern_evaluated = False
        self._next_pattern_refresh_ms = 0.0
        self._change_subscription(set(), listener)

    def _change_subscription(self, topics: set[str], listener: ConsumerRebalanceListener | None) -> None:
        if listener is not None:
            self.listener = listener
        self.subscribed_topics = topics
        self._metadata.set_topics(topics | self._group_subscription)
        if topics != self._joined_subscription:
            self.request_rejoin(f"subscription changed to {sorted(topics)}")

    def is_auto_subscribed(self) -> bool:
        """True for a topic or pattern subscription (the group assigns), False for
        ``assign`` or no subscription."""
        return self.subscription_type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    def unsubscribe(self) -> None:
        """Revoke (listener), leave the group, drop the subscription."""
        if (
            self.is_auto_subscribed()
            and self.generation.member_id
            and self._subscriptions.assigned_partitions()
        ):
            self.on_leave_prepare(self.generation)
        if self.is_auto_subscribed():
            self.maybe_leave_group("the consumer unsubscribed from all topics", self._request_timeout_ms)
        self.subscription_type = SubscriptionType.NONE
        self.subscribed_topics = set()
        self.pattern = None
        self._joined_subscription = set()
        self._group_subscription = set()
        self._assignment_snapshot = None
        self._assign([])

    # ------------------------------------------------------------------ protocol hooks
    def protocol_type(self) -> str:
        """``"consumer"`` (Java ``ConsumerProtocol.PROTOCOL_TYPE``)."""
        return CONSUMER_PROTOCOL_TYPE

    def metadata_protocols(self) -> list[tuple[str, bytes]]:
        """One ``(assignor name, Subscription bytes)`` per configured assignor, in
        ``partition.assignment.strategy`` order: the subscribed topics, the owned partitions, the
        generation and ``client.rack`` (Java ``ConsumerProtocol`` subscription v3, KIP-429 / KIP-881)."""
        self._joined_subscription = set(self.subscribed_topics)
        topics = tuple(sorted(self._joined_subscription))
        owned = tuple(sorted(self._subscriptions.assigned_partitions()))
        with self._lock:
            generation_id = self.generation.generation_id
        out = []
        for assignor in self.assignors:
            sub = Subscription(
                topics, assignor.subscription_user_data(set(topics)), owned, generation_id, self._rack
            )
            out.append((assignor.name, encode_subscription(sub)))
        return out

    def _assignor(self, name: str | None) -> ConsumerPartitionAssignor:
        for a in self.assignors:
            if a.name == name:
                return a
        raise KafkaError(f"the coordinator selected assignor {name!r}, which this consumer does not have")

    def _invoke(self, callback: str, partitions: set[TopicPartition]) -> None:
        try:
            getattr(self.listener, callback)(set(partitions))
        except Exception as exc:  # Java: logged, rethrown from poll after the rebalance step
            log.error("group %s: rebalance listener %s failed: %r", self.group_id, callback, exc)
            if self._listener_error is None:
                self._listener_error = exc

    def _raise_listener_error(self) -> None:
        exc, self._listener_error = self._listener_error, None
        if exc is not None:
            raise exc

    def _assign(self, partitions: Iterable[TopicPartition]) -> None:
        new = set(partitions)
        removed = self._subscriptions.assigned_partitions() - new
        if removed and self._on_partitions_removed is not None:
            self._on_partitions_removed(removed)
        self._subscriptions.assign(sorted(new))
        if self.is_auto_subscribed():
            self._metadata.set_topics(self.subscribed_topics | self._group_subscription)

    def on_join_prepare(self, generation: Generation) -> None:
        """Before (re)joining (Java ``ConsumerCoordinator.onJoinPrepare``): auto-commit the
        consumed offsets; then all partitions lost (generation reset), all revoked (EAGER) or only
        those of unsubscribed topics revoked (COOPERATIVE, KIP-429).

        Raises:
            Exception: what a rebalance listener raised (after the step completed)."""
        if self.offsets.auto_commit_enabled and generation.generation_id >= 0 and generation.member_id:
            self.offsets.commit_quietly(self.offsets.all_consumed_offsets(), "before rebalance")
        owned = self._subscriptions.assigned_partitions()
        if generation.generation_id < 0 or not generation.member_id:
            if owned:
                log.info("group %s: partitions lost (generation reset): %s", self.group_id, sorted(owned))
                self._invoke("on_partitions_lost", owned)
            self._assign([])
        elif self.protocol is RebalanceProtocol.EAGER:
            if owned:
                self._invoke("on_partitions_revoked", owned)
            self._assign([])
        else:
            revoked = {tp for tp in owned if tp.topic not in self.subscribed_topics}
            if revoked:
                self._invoke("on_partitions_revoked", revoked)
                self._assign(owned - revoked)
        self._assignment_snapshot = None
        self._raise_listener_error()

    def on_leader_elected(
        self, protocol: str, members: list[tuple[str, str | None, bytes]], skip_assignment: bool
    ) -> dict[str, bytes]:
        """Leader only (Java ``ConsumerCoordinator.onLeaderElected``): decode the members'
        subscriptions, run the ``protocol`` assignor over the partition counts in the metadata and
        return ``{member_id: Assignment bytes}``; empty with ``skip_assignment`` (KIP-814).

        Raises:
            KafkaError: the coordinator chose an assignor this consumer lacks."""
        assignor = self._assignor(protocol)
        subscriptions: dict[str, Subscription] = {}
        for member_id, instance_id, metadata in members:
            sub = decode_subscription(metadata)
            subscriptions[member_id] = dataclasses.replace(
                sub, group_instance_id=instance_id, member_id=member_id
            )
        all_topics = {t for s in subscriptions.values() for t in s.topics}
        self._group_subscription = all_topics
        self._metadata.set_topics(self.subscribed_topics | all_topics)
        if skip_assignment:  # KIP-814: a static leader rejoined, the assignment stands
            return {}
        cluster = self._metadata.fetch()
        partitions_per_topic = {
            t: len(cluster.partitions[t]) for t in all_topics if cluster.partitions.get(t)
        }
        self._assignment_snapshot = {t: partitions_per_topic.get(t, 0) for t in all_topics}
        self._snapshot_metadata_version = self._metadata.version
        assignments = assignor.assign(partitions_per_topic, subscriptions)
        log.info(
            "group %s: leader assigned with %s: %s",
            self.group_id,
            protocol,
            {m: [f"{tp.topic}-{tp.partition}" for tp in a.partitions] for m, a in assignments.items()},
        )
        return {m: encode_assignment(a) for m, a in assignments.items()}

    def on_join_complete(self, generation: Generation, assignment_bytes: bytes) -> None:
        """Install the SyncGroup assignment (Java ``ConsumerCoordinator.onJoinComplete``):
        under COOPERATIVE, partitions that moved are committed, revoked and a rejoin requested; the
        listener gets ``on_partitions_assigned`` for the new ones. An assignment naming topics outside
        the subscription requests a rejoin instead.

        Raises:
            Exception: what a rebalance listener raised."""
        assignment = decode_assignment(assignment_bytes)
        assigned = set(assignment.partitions)
        foreign = {tp for tp in assigned if tp.topic not in self.subscribed_topics}
        if foreign:
            log.warning(
                "group %s: assignment %s has topics outside the subscription; rejoining",
                self.group_id,
                sorted(foreign),
            )
            self.request_rejoin("assignment does not match the subscription")
            return
        self._assignor(generation.protocol_name).on_assignment(assignment, generation.generation_id)
        owned = self._subscriptions.assigned_partitions()
        added = assigned - owned
        revoked = owned - assigned
        if revoked:  # cooperative: give up only what moved, then rejoin so it can be reassigned
            if self.offsets.auto_commit_enabled:
                self.offsets.commit_quietly(
                    {tp: om for tp, om in self.offsets.all_consumed_offsets().items() if tp in revoked},
                    "of revoked partitions",
                )
            self._invoke("on_partitions_revoked", revoked)
            self.request_rejoin("need to revoke partitions and re-join")
        self._assign(assigned)
        self.offsets.reset_auto_commit_timer()
        log.info(
            "group %s: generation %d assigned %s",
            self.group_id,
            generation.generation_id,
            sorted(f"{tp.topic}-{tp.partition}" for tp in assigned),
        )
        self._invoke("on_partitions_assigned", added)
        self._raise_listener_error()

    def on_leave_prepare(self, generation: Generation) -> None:
        """Before leaving (Java ``onLeavePrepare``): auto-commit, then the listener gets
        the owned partitions as revoked (or lost without a generation) and the assignment is cleared."""
        owned = self._subscriptions.assigned_partitions()
        if self.offsets.auto_commit_enabled and generation.generation_id >= 0:
            self.offsets.commit_quietly(self.offsets.all_consumed_offsets(), "before leaving the group")
        if owned:
            lost = generation.generation_id < 0 or not generation.member_id
            self._invoke("on_partitions_lost" if lost else "on_partitions_revoked", owned)
        self._assign([])

    # ------------------------------------------------------------------ poll
    def poll(self, deadline: float) -> bool:
        """Group work of ``KafkaConsumer.poll``: commit callbacks, pattern / metadata checks,
        (re)join, heartbeat poll timer, auto-commit. False when ``deadline`` passed first.

        Raises:
            KafkaError: fatal group errors; a rebalance listener's exception.
        """
        self.offsets.invoke_completed_commit_callbacks()
        self.raise_fatal_if_any()
        self.poll_heartbeat(self._clock())
        if self.is_auto_subscribed():
            self._maybe_refresh_pattern()
            self._check_rejoin_conditions()
            if self.rejoin_needed_or_pending():
                if not self._await_subscription_metadata(deadline):
                    return False
                if not self.ensure_active_group(deadline):
                    return False
            elif self.coordinator_unknown():
                self.ensure_coordinator_ready(deadline)
            self.poll_heartbeat(self._clock())
        self.offsets.maybe_auto_commit()
        return True

    def time_to_next_poll_ms(self, now: float) -> float:
        """How long ``KafkaConsumer.poll`` may block in the network before coming back here."""
        wait = math.inf
        if self.offsets.auto_commit_enabled and self.subscription_type is not SubscriptionType.NONE:
            wait = max(0.0, self.offsets.next_auto_commit_ms - now)
        if self.is_auto_subscribed():
            if self.rejoin_needed_or_pending():
                return 0.0
            wait = min(wait, self.heartbeat_interval_ms)
        return wait

    def _check_rejoin_conditions(self) -> None:
        if self.generation_if_stable() is None:
            return
        if self.subscribed_topics != self._joined_subscription:
            self.request_rejoin("subscription changed since the last join")
            return
        snapshot = self._assignment_snapshot
        if snapshot is not None and self._metadata.version != self._snapshot_metadata_version:
            self._snapshot_metadata_version = self._metadata.version
            cluster = self._metadata.fetch()
            current = {t: len(cluster.partitions.get(t) or {}) for t in snapshot}
            if current != snapshot:
                self.request_rejoin(f"metadata of subscribed topics changed ({snapshot} -> {current})")

    def _await_subscription_metadata(self, deadline: float) -> bool:
        """Before joining: a pattern evaluated at least once, our topics in the metadata once."""
        if self.subscription_type is SubscriptionType.AUTO_PATTERN:
            while not self._pattern_evaluated:
                self._maybe_refresh_pattern()
                if self._pattern_future is None or not self.wait_for(self._pattern_future, deadline):
                    if self._clock() >= deadline:
                        return False
                    self.backoff(deadline)
        cluster = self._metadata.fetch()
        if (
            self.subscribed_topics
            and self._metadata.version == 0
            or any(
                t not in cluster.partitions and t not in cluster.topic_errors for t in self.subscribed_topics
            )
        ):
            version = self._metadata.request_update()
            while self._metadata.version <= version:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return False
                self._client.poll(min(remaining, 200.0))
        return True

    def _maybe_refresh_pattern(self) -> None:
        if self.subscription_type is not SubscriptionType.AUTO_PATTERN or self._pattern_future is not None:
            return
        now = self._clock()
        if now < self._next_pattern_refresh_ms:
            return
        node = self._client.least_loaded_node()
        if node is None:
            return
        self._next_pattern_refresh_ms = now + self._metadata_max_age_ms
        future = self._client.send(node, metadata_request(None, False))
        self._pattern_future = future
        future.add_callback(self._on_pattern_metadata)

    def _on_pattern_metadata(self, future: RequestFuture) -> None:
        self._pattern_future = None
        if future.failed() or self.pattern is None:
            self._next_pattern_refresh_ms = self._clock() + self._retry_backoff_ms
            return
        cluster = parse_metadata_response(future.value)
        matched = {
            t
            for t in cluster.partitions
            if self.pattern.fullmatch(t) and not (self._exclude_internal and t in cluster.internal_topics)
        }
        self._pattern_evaluated = True
        if matched != self.subscribed_topics:
            log.info(
                "group %s: pattern %s now matches %s", self.group_id, self.pattern.pattern, sorted(matched)
            )
            self._change_subscription(matched, None)

    # ------------------------------------------------------------------ close
    def close(self, timeout_ms: float) -> None:
        """Commit (auto-commit), revoke, leave the group, stop heartbeats; run pending commit
        callbacks. Never raises for group errors (they are logged)."""
        try:
            if self.offsets.auto_commit_enabled and self.subscription_type is SubscriptionType.USER_ASSIGNED:
                self.offsets.commit_quietly(self.offsets.all_consumed_offsets(), "on close")
            if self.is_auto_subscribed():
                self.close_coordinator(timeout_ms)
            else:
                self.close_coordinator(0)
        except KafkaError as exc:
            log.warning("group %s: error while closing the coordinator: %s", self.group_id, exc)
        finally:
            self.offsets.invoke_completed_commit_callbacks()
