"""The consumer side of a KIP-848 consumer group (``group.protocol=consumer``), as Java's
``AsyncKafkaConsumer`` runs it, on the consumer's own thread: ``ConsumerProtocolCoordinator``
owns the ``ConsumerMembershipManager`` (epoch and states), the ``ConsumerHeartbeatRequestManager``
(ConsumerGroupHeartbeat at the coordinator's interval) and the ``ConsumerOffsets`` (OffsetCommit
v9 and OffsetFetch v9 carrying the member id and member epoch; STALE_MEMBER_EPOCH retried with
the newer epoch), and reconciles the target assignment the broker computes (KIP-848: no
JoinGroup / SyncGroup, no client-side assignor).

Reconciliation (Java ``ConsumerMembershipManager.maybeReconcile`` / ``revokeAndAssign``): the
topic ids of the target are resolved to names through the metadata; partitions to give up are
revoked first (auto-commit of the consumed offsets, then ``on_partitions_revoked``), then the new
ones are assigned (``on_partitions_assigned``, called even when none is added, as Java does) and
the next heartbeat, sent at once, acknowledges the new assignment. A fenced member
(FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) reports its partitions lost (``on_partitions_lost``, no
commit) and rejoins with epoch 0. ``close`` / ``unsubscribe`` commit, revoke and send the leave
heartbeat (epoch -1, or -2 for a static member: ``group.instance.id``).

Subscriptions: topic names (``subscribed_topic_names``) or a regular expression sent as
``subscribed_topic_regex`` and evaluated by the broker (RE2, KIP-848); ``subscription()`` of a
regex subscription lists the topics of the current assignment.

Heartbeats leave from ``poll`` (and the commit / committed calls that wait on the network): a
caller that does not poll within the group's session timeout is fenced by the coordinator and
rejoins on its next ``poll`` (Java sends them from its background thread).
"""

from __future__ import annotations

import logging
import math
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.consumer.abstract_coordinator import AbstractCoordinator
from spark_kafkalite.client.consumer.consumer_coordinator import ConsumerRebalanceListener
from spark_kafkalite.client.consumer.consumer_heartbeat_request_manager import (
    ConsumerHeartbeatRequestManager,
    HeartbeatState,
)
from spark_kafkalite.client.consumer.consumer_membership_manager import (
    ConsumerMembershipManager,
    MemberState,
)
from spark_kafkalite.client.consumer.consumer_offsets import ConsumerOffsets
from spark_kafkalite.client.consumer.group_state import (
    Generation,
    SubscriptionType,
    coordinator_node_id,
    is_retriable_group_error,
)
from spark_kafkalite.client.consumer.subscription_state import SubscriptionState
from spark_kafkalite.client.metadata import Metadata, metadata_request, parse_metadata_response
from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)

__all__ = ["ConsumerProtocolCoordinator", "GROUP_PROTOCOLS", "check_group_protocol_config"]

log = logging.getLogger(__name__)

#: ``group.protocol`` values (Java ``GroupProtocol``), case-insensitive
GROUP_PROTOCOLS = ("classic", "consumer")
#: keys of the classic protocol that Java's ``ConsumerConfig`` rejects with group.protocol=consumer
#: (``CLASSIC_PROTOCOL_UNSUPPORTED_CONFIGS``): the broker assigns and sets the session and interval
_CLASSIC_ONLY_KEYS = ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms")


def check_group_protocol_config(user_keys: Iterable[str], config: Mapping[str, Any]) -> str:
    """Validate ``group.protocol`` and the keys that depend on it (Java
    ``ConsumerConfig.checkGroupRemoteAssignor`` and ``checkUnsupportedConfigsPostProcess``);
    returns the protocol in lower case.

    Raises:
        InvalidConfigError: ``group.protocol`` is neither classic nor consumer; with consumer,
            ``partition.assignment.strategy``, ``session.timeout.ms`` or ``heartbeat.interval.ms``
            was set; with classic, ``group.remote.assignor`` was set.
    """
    protocol = str(config.get("group.protocol") or "classic").strip().lower()
    if protocol not in GROUP_PROTOCOLS:
        raise InvalidConfigError(
            f"invalid group.protocol {config.get('group.protocol')!r}: use one of {', '.join(GROUP_PROTOCOLS)}"
        )
    given = set(user_keys)
    if protocol == "consumer":
        bad = [k for k in _CLASSIC_ONLY_KEYS if k in given]
        if bad:
            raise InvalidConfigError(
                f"{', '.join(bad)} cannot be set when group.protocol=consumer (the broker assigns the "
                "partitions and sets the session timeout and heartbeat interval: use group.remote.assignor "
                "and the broker's group.consumer.* configs)"
            )
    elif config.get("group.remote.assignor"):
        raise InvalidConfigError("group.remote.assignor is only supported with group.protocol=consumer")
    return protocol


class ConsumerProtocolCoordinator:
    """See the module docstring. Application thread only.

    Config: ``group.id``, ``group.instance.id``, ``group.remote.assignor`` (None: the broker's
    default, ``uniform``), ``max.poll.interval.ms`` (the rebalance timeout), ``client.rack``,
    ``enable.auto.commit``, ``auto.commit.interval.ms``, ``retry.backoff.ms``,
    ``request.timeout.ms``.
    """

    def __init__(
        self,
        client: NetworkClient,
        metadata: Metadata,
        subscriptions: SubscriptionState,
        config: Mapping[str, Any],
        on_partitions_removed: Callable[[set[TopicPartition]], None] | None = None,
        clock: Callable[[], float] = now_ms,
    ) -> None:
        self._client = client
        self._metadata = metadata
        self._subscriptions = subscriptions
        self._on_partitions_removed = on_partitions_removed
        self._clock = clock
        self.group_id = str(config["group.id"])
        instance = config.get("group.instance.id")
        self.group_instance_id: str | None = str(instance) if instance not in (None, "") else None
        self._retry_backoff_ms = float(config["retry.backoff.ms"])
        self._request_timeout_ms = int(config["request.timeout.ms"])
        self._close_deadline = math.inf
        self._coordinator: tuple[int, str, int] | None = None
        self._find_future: RequestFuture | None = None
        self._fatal_error: KafkaError | None = None
        self.subscription_type = SubscriptionType.NONE
        self.subscribed_topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener = ConsumerRebalanceListener()
        self._listener_error: BaseException | None = None
        self._topic_names: dict[uuid.UUID, str] = {}
        self._names_future: RequestFuture | None = None
        self._sent_any = False
        self.membership = ConsumerMembershipManager(self.group_instance_id)
        assignor = config.get("group.remote.assignor")
        self.heartbeats = ConsumerHeartbeatRequestManager(
            self.group_id,
            self.membership,
            HeartbeatState(
                int(config["max.poll.interval.ms"]),
                str(config.get("client.rack") or "") or None,
                str(assignor) if assignor else None,
            ),
            self.send_to_coordinator,
            self.mark_coordinator_unknown,
            self._retry_backoff_ms,
            clock,
        )
        self.offsets = ConsumerOffsets(
            self,
            client,
            subscriptions,
            auto_commit_enabled=bool(config["enable.auto.commit"]),
            auto_commit_interval_ms=float(config["auto.commit.interval.ms"]),
            member_epoch_in_offset_fetch=True,
        )

    # ------------------------------------------------------------------ identity (GroupMember)
    @property
    def generation(self) -> Generation:
        """The member epoch and member id in the shape of a classic generation (what OffsetCommit
        carries: ``generation_id_or_member_epoch``)."""
        return Generation(self.membership.member_epoch, self.membership.member_id, None)

    @property
    def request_timeout_ms(self) -> int:
        return self._request_timeout_ms

    @property
    def close_deadline(self) -> float:
        return self._close_deadline

    def now_ms(self) -> float:
        return self._clock()

    def is_auto_subscribed(self) -> bool:
        return self.subscription_type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    def generation_if_stable(self) -> Generation | None:
        """The member epoch while the member is in the group with an epoch; commits carry it
        (KIP-848 has no rebalance barrier: commits go on during reconciliation)."""
        m = self.membership
        if m.member_epoch > 0 and m.state in (
            MemberState.RECONCILING,
            MemberState.ACKNOWLEDGING,
            MemberState.STABLE,
            MemberState.PREPARE_LEAVING,
        ):
            return self.generation
        return None

    def is_current_generation(self, generation: Generation) -> bool:
        return generation == self.generation

    def rebalance_in_progress(self) -> bool:
        """Joining (no epoch yet): a commit now raises RebalanceInProgressError ("poll and retry")."""
        return self.membership.state is MemberState.JOINING

    def request_rejoin(self, reason: str) -> None:
        """No-op: KIP-848 members do not rejoin on request; the heartbeat drives the assignment."""
        log.debug("group %s: %s (the next heartbeat reconciles)", self.group_id, reason)

    def reset_generation(self, reason: str, reset_member_id: bool) -> None:
        """A commit found the member unknown to the group: fenced (rejoin at epoch 0)."""
        log.info("group %s: %s; member fenced", self.group_id, reason)
        self.heartbeats.state.reset()
        self.membership.on_fenced()

    def set_fatal_error(self, exc: KafkaError) -> None:
        self._fatal_error = exc

    # ------------------------------------------------------------------ coordinator
    def coordinator(self) -> int | None:
        """The coordinator's pseudo node id, or None when unknown or unreachable (as
        ``AbstractCoordinator.coordinator``)."""
        c = self._coordinator
        if c is None:
            return None
        self._client.add_node(*c)
        if self._client.is_unavailable(c[0]):
            self.mark_coordinator_unknown("coordinator connection is unavailable")
            return None
        return c[0]

    def mark_coordinator_unknown(self, reason: str) -> None:
        if self._coordinator is not None:
            log.info("group %s: coordinator unknown (%s); will rediscover", self.group_id, reason)
            self._coordinator = None

    def set_coordinator(self, found: tuple[int, str, int]) -> None:
        broker_id, host, port = found
        self._coordinator = (coordinator_node_id(broker_id), host, port)

    def send_find_coordinator(self, client: NetworkClient, group_id: str) -> RequestFuture:
        return AbstractCoordinator.send_find_coordinator(client, group_id)

    def ensure_coordinator_ready(self, deadline: float) -> bool:
        """Look the coordinator up until known (True) or ``deadline`` (False).

        Raises:
            KafkaError: a non-retriable lookup error (e.g. GROUP_AUTHORIZATION_FAILED)."""
        while self.coordinator() is None:
            if self._find_future is None:
                self._find_future = self.send_find_coordinator(self._client, self.group_id)
            if not self.wait_for(self._find_future, deadline):
                return False
            future, self._find_future = self._find_future, None
            if future.succeeded():
                self.set_coordinator(future.value)
                continue
            exc = future.error()
            if not is_retriable_group_error(exc):
                raise exc
            self.backoff(deadline)
            if self._clock() >= deadline:
                return False
        return True

    def send_to_coordinator(
        self, builder: RequestBuilder | Any, timeout_ms: float | None = None
    ) -> RequestFuture:
        node = self.coordinator()
        if node is None:
            future = RequestFuture()
            future.failure(error_for_code(ErrorCode.coordinator_not_available, f"group {self.group_id}"))
            return future
        future = self._client.send(node, builder, timeout_ms=timeout_ms)
        self.watch_coordinator_errors(future)
        return future

    def watch_coordinator_errors(self, future: RequestFuture) -> None:
        def check(f: RequestFuture) -> None:
            if f.failed() and isinstance(f.exception, (KafkaConnectionError, KafkaTimeoutError)):
                self.mark_coordinator_unknown(str(f.exception))

        future.add_callback(check)

    def wait_for(self, future: RequestFuture, deadline: float) -> bool:
        self._client.poll(0)
        while not future.is_done():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            self._client.poll(min(remaining, 1000.0))
        return True

    def backoff(self, deadline: float) -> None:
        remaining = deadline - self._clock()
        if remaining > 0:
            self._client.poll(min(self._retry_backoff_ms, remaining))

    # ------------------------------------------------------------------ subscriptions
    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None) -> None:
        """Subscribe to ``topics`` (sent as ``subscribed_topic_names`` with the next heartbeat).

        Raises:
            ValueError: an empty topic name."""
        names = {str(t) for t in topics}
        if any(not t.strip() for t in names):
            raise ValueError("topic names must not be empty")
        self.subscription_type = SubscriptionType.AUTO_TOPICS if names else SubscriptionType.NONE
        self.pattern = None
        self.subscribed_topics = names
        self._start(listener)

    def subscribe_pattern(
        self, pattern: str | re.Pattern[str], listener: ConsumerRebalanceListener | None
    ) -> None:
        """Subscribe to the topics matching ``pattern``, evaluated by the broker (RE2 syntax,
        KIP-848's ``subscribed_topic_regex``; Java ``subscribe(SubscriptionPattern)``)."""
        self.subscription_type = SubscriptionType.AUTO_PATTERN
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self.subscribed_topics = set()
        self._start(listener)

    def _start(self, listener: ConsumerRebalanceListener | None) -> None:
        if listener is not None:
            self.listener = listener
        self._metadata.set_topics(self.subscribed_topics | self._assigned_topics())
        self.membership.subscribe()

    def _assigned_topics(self) -> set[str]:
        return {tp.topic for tp in self._subscriptions.assigned_partitions()}

    def unsubscribe(self) -> None:
        """Revoke (listener), leave the group (epoch -1 / -2), drop the subscription."""
        if self.is_auto_subscribed():
            self._leave(self._clock() + self._request_timeout_ms)
        self.subscription_type = SubscriptionType.NONE
        self.subscribed_topics = set()
        self.pattern = None
        self._assign([])

    # ------------------------------------------------------------------ listener, assignment
    def _invoke(self, callback: str, partitions: Iterable[TopicPartition]) -> None:
        try:
            getattr(self.listener, callback)(set(partitions))
        except Exception as exc:  # Java: logged, rethrown from poll after the reconciliation step
            log.error("group %s: rebalance listener %s failed: %r", self.group_id, callback, exc)
            if self._listener_error is None:
                self._listener_error = exc

    def _assign(self, partitions: Iterable[TopicPartition]) -> None:
        new = set(partitions)
        removed = self._subscriptions.assigned_partitions() - new
        if removed and self._on_partitions_removed is not None:
            self._on_partitions_removed(removed)
        self._subscriptions.assign(sorted(new))
        self._metadata.set_topics(self.subscribed_topics | {tp.topic for tp in new})

    def _resolve_topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name from the consumer's metadata and the last full lookup; a full
        Metadata request is sent when an id of the target is unknown (a regex may match topics
        the consumer never asked about)."""
        cluster = self._metadata.fetch()
        for name, topic_id in cluster.topic_ids.items():
            self._topic_names[topic_id] = name
        return self._topic_names

    def _look_up_topic_names(self) -> None:
        if self._names_future is not None:
            return
        node = self._client.least_loaded_node()
        if node is None:
            return
        future = self._client.send(node, metadata_request(None, False))
        self._names_future = future

        def done(f: RequestFuture) -> None:
            self._names_future = None
            if f.succeeded():
                for name, topic_id in parse_metadata_response(f.value).topic_ids.items():
                    self._topic_names[topic_id] = name

        future.add_callback(done)

    def _reconcile(self) -> None:
        """One step of the state machine that runs on the consumer's thread: release lost
        partitions of a fenced member, or reconcile toward the target."""
        membership = self.membership
        if membership.state is MemberState.FENCED:
            owned = self._subscriptions.assigned_partitions()
            if owned:
                log.info("group %s: partitions lost (member fenced): %s", self.group_id, sorted(owned))
                self._invoke("on_partitions_lost", owned)
            self._assign([])
            membership.on_lost_released()
            return
        if membership.state is not MemberState.RECONCILING:
            return
        owned = self._subscriptions.assigned_partitions()
        plan = membership.plan_reconciliation(self._resolve_topic_names(), owned)
        if plan is None:
            self._look_up_topic_names()
            return
        if plan.revoked:
            if self.offsets.auto_commit_enabled:  # Java maybeAutoCommitSyncBeforeRevocation
                self.offsets.commit_quietly(self.offsets.all_consumed_offsets(), "before revocation")
            self._invoke("on_partitions_revoked", plan.revoked)
            self._assign(owned - plan.revoked)
        self._assign(plan.assigned)
        if self.subscription_type is SubscriptionType.AUTO_PATTERN:
            self.subscribed_topics = {tp.topic for tp in plan.assigned}
        log.info(
            "group %s: member %s epoch %d assigned %s",
            self.group_id,
            membership.member_id,
            plan.epoch,
            sorted(f"{tp.topic}-{tp.partition}" for tp in plan.assigned),
        )
        self._invoke("on_partitions_assigned", plan.added)
        membership.on_reconciled(plan)
        self.offsets.reset_auto_commit_timer()

    def _send_heartbeat(self) -> RequestFuture | None:
        names = (
            tuple(sorted(self.subscribed_topics))
            if self.subscription_type is SubscriptionType.AUTO_TOPICS
            else None
        )
        regex = (
            self.pattern.pattern
            if self.subscription_type is SubscriptionType.AUTO_PATTERN and self.pattern
            else None
        )
        future = self.heartbeats.maybe_send(names, regex)
        if future is not None:
            self._sent_any = True
        return future

    # ------------------------------------------------------------------ poll
    def poll(self, deadline: float) -> bool:
        """Group work of ``KafkaConsumer.poll``: commit callbacks, coordinator lookup, heartbeat,
        reconciliation, auto-commit. False when ``deadline`` passed first.

        Raises:
            KafkaError: a fatal heartbeat error (e.g. GROUP_AUTHORIZATION_FAILED,
                UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION), TOPIC_AUTHORIZATION_FAILED once;
                a rebalance listener's exception.
        """
        self.offsets.invoke_completed_commit_callbacks()
        self._raise_errors()
        if self.is_auto_subscribed():
            if self.coordinator() is None and not self.ensure_coordinator_ready(deadline):
                return False
            self._reconcile()
            self._send_heartbeat()
            self._client.poll(0)
            self._reconcile()
            self._send_heartbeat()  # acknowledges a reconciliation at once
            self._raise_errors()
        self.offsets.maybe_auto_commit()
        return True

    def _raise_errors(self) -> None:
        exc: BaseException | None = self.heartbeats.fatal_error or self._fatal_error
        if exc is not None:
            raise exc
        exc, self.heartbeats.error_to_raise = self.heartbeats.error_to_raise, None
        if exc is None:
            exc, self._listener_error = self._listener_error, None
        if exc is not None:
            raise exc

    def time_to_next_poll_ms(self, now: float) -> float:
        """How long ``KafkaConsumer.poll`` may block in the network before coming back here."""
        wait = math.inf
        if self.offsets.auto_commit_enabled and self.subscription_type is not SubscriptionType.NONE:
            wait = max(0.0, self.offsets.next_auto_commit_ms - now)
        if self.is_auto_subscribed():
            if self.membership.state in (MemberState.FENCED, MemberState.RECONCILING):
                return self._retry_backoff_ms if self._names_future is not None else 0.0
            wait = min(wait, self.heartbeats.time_to_next_heartbeat_ms(now))
        return wait

    # ------------------------------------------------------------------ leave, close
    def _leave(self, deadline: float) -> None:
        """Commit (auto-commit), revoke (or report lost when fenced), send the leave heartbeat
        and wait for it until ``deadline``."""
        membership = self.membership
        if membership.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
            return
        fenced = membership.state is MemberState.FENCED
        if not self._sent_any:
            membership.on_unsubscribed_without_leaving()
            return
        owned = self._subscriptions.assigned_partitions()
        if self.offsets.auto_commit_enabled and not fenced and self.generation_if_stable() is not None:
            self.offsets.commit_quietly(self.offsets.all_consumed_offsets(), "before leaving the group")
        membership.leave()
        if owned:
            self._invoke("on_partitions_lost" if fenced else "on_partitions_revoked", owned)
        self._assign([])
        membership.on_revoked_for_leave()
        self._sent_any = False
        try:
            if self.ensure_coordinator_ready(deadline):
                future = self._send_heartbeat()
                if future is not None:
                    self.wait_for(future, deadline)
        except KafkaError as exc:
            log.warning("group %s: leave heartbeat failed: %s", self.group_id, exc)
        membership.on_unsubscribed_without_leaving()

    def close(self, timeout_ms: float) -> None:
        """Commit, revoke, leave the group; run pending commit callbacks. Never raises for group
        errors (they are logged)."""
        self._close_deadline = self._clock() + timeout_ms
        try:
            if self.offsets.auto_commit_enabled and self.subscription_type is SubscriptionType.USER_ASSIGNED:
                self.offsets.commit_quietly(self.offsets.all_consumed_offsets(), "on close")
            if self.is_auto_subscribed():
                self._leave(self._close_deadline)
        except KafkaError as exc:
            log.warning("group %s: error while leaving the group: %s", self.group_id, exc)
        finally:
            self.offsets.invoke_completed_commit_callbacks()
