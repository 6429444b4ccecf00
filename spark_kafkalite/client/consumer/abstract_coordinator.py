"""``AbstractCoordinator``: group membership of the classic protocol (Java
``org.apache.kafka.clients.consumer.internals.AbstractCoordinator``).

Member life cycle (``MemberState``)::

    UNJOINED --JoinGroup sent--> PREPARING_REBALANCE --JoinGroup ok--> COMPLETING_REBALANCE
        --SyncGroup ok--> STABLE --(REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
        metadata or subscription change)--> rejoin

- FindCoordinator (key = group id) to the least loaded broker; COORDINATOR_NOT_AVAILABLE,
  NOT_COORDINATOR and connection errors retry after ``retry.backoff.ms``. The coordinator gets
  its own connection (node id ``2**31 - 1 - broker id``, as Java) so that JoinGroup, which the
  broker may hold for the whole rebalance, never waits behind a long-polling Fetch.
- JoinGroup with ``session.timeout.ms``, rebalance timeout ``max.poll.interval.ms``, the member
  id (empty at first: the coordinator answers MEMBER_ID_REQUIRED with one, KIP-394, and we
  rejoin with it at once) and ``group.instance.id`` (static membership, KIP-345, v5+).
- The leader (the member the JoinGroup response names) computes the assignment
  (``on_leader_elected``); every member sends SyncGroup and gets its assignment
  (``on_join_complete``). The JoinGroup / SyncGroup exchange is in ``join_group_handlers.py``.
- The heartbeat thread (``heartbeat.py``) keeps the session alive; errors it sees request a
  rejoin that the application thread performs in its next ``poll``.
- LeaveGroup on close (dynamic members only: static members keep their identity, KIP-345) and
  when ``max.poll.interval.ms`` passes without a ``poll``.

Threading: the application thread drives ``self._client`` (join, sync, commits); the heartbeat
thread has its own client; shared membership fields are guarded by ``self._lock``.
"""

from __future__ import annotations

import logging
import math
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.consumer.group_requests import (
    find_coordinator_request,
    leave_group_request,
)
from spark_kafkalite.client.consumer.group_state import (
    NO_GENERATION,
    Generation,
    MemberState,
    coordinator_node_id,
    is_retriable_group_error,
)
from spark_kafkalite.client.consumer.heartbeat import Heartbeat, HeartbeatSender
from spark_kafkalite.client.consumer.join_group_handlers import send_join_group
from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    error_for_code,
)

__all__ = [
    "AbstractCoordinator",
    "MemberState",
    "Generation",
    "NO_GENERATION",
    "coordinator_node_id",
    "is_retriable_group_error",
]

log = logging.getLogger(__name__)


class AbstractCoordinator(ABC):
    """Group membership (see module docstring).

    Config: ``group.id``, ``group.instance.id`` (None), ``session.timeout.ms`` (45000),
    ``heartbeat.interval.ms`` (3000), ``max.poll.interval.ms`` (300000, also the rebalance
    timeout), ``retry.backoff.ms``, ``request.timeout.ms``, ``client.id``.
    """

    def __init__(
        self, client: NetworkClient, config: Mapping[str, Any], clock: Callable[[], float] = now_ms
    ) -> None:
        self._client = client
        self._config = dict(config)
        self.group_id = str(config["group.id"])
        instance = config.get("group.instance.id")
        self.group_instance_id: str | None = str(instance) if instance not in (None, "") else None
        self.session_timeout_ms = int(config["session.timeout.ms"])
        self.rebalance_timeout_ms = int(config["max.poll.interval.ms"])
        self.heartbeat_interval_ms = int(config["heartbeat.interval.ms"])
        self._retry_backoff_ms = float(config["retry.backoff.ms"])
        self._request_timeout_ms = int(config["request.timeout.ms"])
        self._clock = clock
        self._lock = threading.RLock()
        self.state = MemberState.UNJOINED
        self.generation = NO_GENERATION
        self._rejoin_needed = True
        self._rejoin_reason = "initial join"
        self._coordinator: tuple[int, str, int] | None = None
        self.heartbeat = Heartbeat(
            self.session_timeout_ms,
            self.heartbeat_interval_ms,
            self.rebalance_timeout_ms,
            self._retry_backoff_ms,
            clock,
        )
        self._heartbeat_enabled = False
        #: the heartbeat thread and its client (Java's AbstractCoordinator.HeartbeatThread)
        self.heartbeat_sender = HeartbeatSender(self, self._config)
        self._find_future: RequestFuture | None = None
        self._join_future: RequestFuture | None = None
        self._needs_join_prepare = True
        self._fatal_error: KafkaError | None = None
        self._closed = False
        self._close_deadline = math.inf  # bounds the commit + LeaveGroup of close()

    # ------------------------------------------------------------------ subclass hooks
    @abstractmethod
    def protocol_type(self) -> str:
        """The JoinGroup protocol type, e.g. ``"consumer"`` (Java ``protocolType``)."""

    @abstractmethod
    def metadata_protocols(self) -> list[tuple[str, bytes]]:
        """``[(protocol name, metadata bytes)]`` in preference order for JoinGroup."""

    @abstractmethod
    def on_join_prepare(self, generation: Generation) -> None:
        """Before (re)joining: commit, revoke (eager) or mark lost partitions."""

    @abstractmethod
    def on_leader_elected(
        self, protocol: str, members: list[tuple[str, str | None, bytes]], skip_assignment: bool
    ) -> dict[str, bytes]:
        """Leader only: ``members`` are ``(member_id, group_instance_id, metadata)``; return
        ``{member_id: assignment bytes}``."""

    @abstractmethod
    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        """After SyncGroup: install the assignment."""

    def on_leave_prepare(self, generation: Generation) -> None:
        """Before leaving the group (close, unsubscribe)."""
        return None

    # ------------------------------------------------------------------ shared state
    def coordinator(self) -> int | None:
        """The coordinator's pseudo node id (registered with the application's client), or
        None when unknown. Application thread only."""
        with self._lock:
            c = self._coordinator
        if c is None:
            return None
        self._client.add_node(*c)
        if self._client.is_unavailable(c[0]):
            self.mark_coordinator_unknown("coordinator connection is unavailable")
            return None
        return c[0]

    def coordinator_unknown(self) -> bool:
        """True when no usable coordinator is known (Java ``coordinatorUnknown``)."""
        return self.coordinator() is None

    def mark_coordinator_unknown(self, reason: str) -> None:
        """Forget the coordinator for ``reason`` (NOT_COORDINATOR, a disconnect ...); the
        next request looks it up again (Java ``markCoordinatorUnknown``). Either thread."""
        with self._lock:
            if self._coordinator is not None:
                log.info(
                    "group %s: coordinator %s:%s is unavailable or invalid (%s); will rediscover",
                    self.group_id,
                    self._coordinator[1],
                    self._coordinator[2],
                    reason,
                )
                self._coordinator = None

    def request_rejoin(self, reason: str) -> None:
        """Rejoin on the next ``poll`` for ``reason`` (sent as the JoinGroup reason, KIP-800);
        wakes the application's client (Java ``requestRejoin``). Either thread."""
        with self._lock:
            if not self._rejoin_needed:
                log.info("group %s: request joining the group: %s", self.group_id, reason)
            self._rejoin_needed = True
            self._rejoin_reason = reason
        self._client.wakeup()

    def rejoin_needed_or_pending(self) -> bool:
        """True while a rejoin is requested, a join is in flight, or the member is not
        STABLE (Java ``rejoinNeededOrPending``)."""
        with self._lock:
            return (
                self._rejoin_needed or self._join_future is not None or self.state is not MemberState.STABLE
            )

    def generation_if_stable(self) -> Generation | None:
        """The generation while the member is STABLE, else None (Java ``generationIfStable``)."""
        with self._lock:
            return self.generation if self.state is MemberState.STABLE else None

    def rebalance_in_progress(self) -> bool:
        """True between JoinGroup sent and SyncGroup answered (Java ``rebalanceInProgress``)."""
        with self._lock:
            return self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)

    def reset_generation(self, reason: str, reset_member_id: bool) -> None:
        """Forget the generation (Java ``resetStateAndGeneration``) and ask for a rejoin."""
        with self._lock:
            log.info("group %s: resetting generation (%s)", self.group_id, reason)
            self.generation = Generation(-1, "" if reset_member_id else self.generation.member_id, None)
            self.state = MemberState.UNJOINED
            self._heartbeat_enabled = False
            self._rejoin_needed = True
            self._rejoin_reason = reason
        self._client.wakeup()

    def is_dynamic_member(self) -> bool:
        """True without ``group.instance.id`` (KIP-345: only dynamic members send LeaveGroup)."""
        return self.group_instance_id is None

    # ------------------------------------------------------------------ for the heartbeat side
    @property
    def lock(self) -> threading.RLock:
        """Guards the membership fields shared with the heartbeat thread."""
        return self._lock

    @property
    def closed(self) -> bool:
        """True once ``close_coordinator`` ran."""
        return self._closed

    @property
    def heartbeat_enabled(self) -> bool:
        """True while the member is in a generation and heartbeats are due."""
        return self._heartbeat_enabled

    @property
    def coordinator_endpoint(self) -> tuple[int, str, int] | None:
        """``(node id, host, port)`` of the known coordinator, or None."""
        return self._coordinator

    @property
    def retry_backoff_ms(self) -> float:
        """``retry.backoff.ms``: the pause before a failed lookup, join or heartbeat is retried."""
        return self._retry_backoff_ms

    def forget_coordinator(self) -> None:
        """Drop the coordinator quietly (its session expired); call under ``lock``."""
        self._coordinator = None

    def leave_on_poll_timeout(self) -> Generation:
        """``max.poll.interval.ms`` expired: leave the generation (Java
        ``maybeLeaveGroup("consumer poll timeout has expired")`` state change) and ask for a
        rejoin on the next ``poll``; returns the generation left. Call under ``lock``."""
        generation = self.generation
        self.generation = Generation(-1, "" if self.is_dynamic_member() else generation.member_id, None)
        self.state = MemberState.UNJOINED
        self._heartbeat_enabled = False
        self._rejoin_needed = True
        self._rejoin_reason = "consumer poll timeout has expired"
        return generation

    def poll_heartbeat(self, now: float) -> None:
        """The application polled: restart the ``max.poll.interval.ms`` timer."""
        with self._lock:
            self.heartbeat.poll(now)

    def set_fatal_error(self, exc: KafkaError) -> None:
        """Record an error that ``poll`` raises next (e.g. a fenced static member)."""
        with self._lock:
            self._fatal_error = exc

    def is_current_generation(self, generation: Generation) -> bool:
        """True while ``generation`` is still the member's (a commit of an older one is stale)."""
        with self._lock:
            return self.generation == generation

    def now_ms(self) -> float:
        """The coordinator's clock (milliseconds)."""
        return self._clock()

    @property
    def request_timeout_ms(self) -> int:
        """``request.timeout.ms`` of requests to the coordinator (JoinGroup gets the rebalance
        timeout on top)."""
        return self._request_timeout_ms

    @property
    def close_deadline(self) -> float:
        """Bounds the commit + LeaveGroup of ``close`` (infinite until ``close`` starts)."""
        return self._close_deadline

    def raise_fatal_if_any(self) -> None:
        """Raise (once) an error recorded by ``set_fatal_error``, e.g. FENCED_INSTANCE_ID seen
        by the heartbeat thread.

        Raises:
            KafkaError: the recorded error."""
        with self._lock:
            exc, self._fatal_error = self._fatal_error, None
        if exc is not None:
            raise exc

    # ------------------------------------------------------------------ driving the client
    def wait_for(self, future: RequestFuture, deadline: float) -> bool:
        """Poll the application's client until ``future`` is done or ``deadline`` passes."""
        self._client.poll(0)
        while not future.is_done():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            self._client.poll(min(remaining, 1000.0))
        return True

    def backoff(self, deadline: float) -> None:
        """Poll the application's client for ``retry.backoff.ms``, at most until ``deadline``
        (ms of the coordinator's clock)."""
        remaining = deadline - self._clock()
        if remaining > 0:
            self._client.poll(min(self._retry_backoff_ms, remaining))

    def send_to_coordinator(self, builder: Any, timeout_ms: float | None = None) -> RequestFuture:
        """Send ``builder`` to the coordinator with ``timeout_ms`` (default
        ``request.timeout.ms``); the future fails with CoordinatorNotAvailableError when none is known."""
        node = self.coordinator()
        if node is None:
            future = RequestFuture()
            future.failure(error_for_code(ErrorCode.coordinator_not_available, f"group {self.group_id}"))
            return future
        return self._client.send(node, builder, timeout_ms=timeout_ms)

    def watch_coordinator_errors(self, future: RequestFuture) -> None:
        """A failed request to the coordinator (disconnect, timeout) invalidates it."""

        def check(f: RequestFuture) -> None:
            if f.failed() and isinstance(f.exception, (KafkaConnectionError, KafkaTimeoutError)):
                self.mark_coordinator_unknown(str(f.exception))

        future.add_callback(check)

    # ------------------------------------------------------------------ coordinator lookup
    @staticmethod
    def send_find_coordinator(client: NetworkClient, group_id: str) -> RequestFuture:
        """FindCoordinator to the least loaded node; the future yields ``(broker_id, host, port)``."""
        outer = RequestFuture()
        node = client.least_loaded_node()
        if node is None:
            outer.failure(KafkaConnectionError("no broker available to find the group coordinator"))
            return outer

        def done(f: RequestFuture) -> None:
            if f.failed():
                outer.failure(f.exception or KafkaError("FindCoordinator failed"))
                return
            r = f.value
            code = int(r.error_code)
            if code != ErrorCode.none:
                message = getattr(r, "error_message", None)
                outer.failure(error_for_code(code, f"group {group_id}" + (f": {message}" if message else "")))
                return
            outer.success((int(r.node_id), str(r.host), int(r.port)))

        client.send(node, find_coordinator_request(group_id)).add_callback(done)
        return outer

    def _on_find_coordinator(self, future: RequestFuture) -> None:
        if future.succeeded():
            self.set_coordinator(future.value)

    def set_coordinator(self, found: tuple[int, str, int]) -> None:
        """Use ``found`` = ``(broker id, host, port)`` from FindCoordinator as the coordinator,
        reached on its own connection (node id ``coordinator_node_id(broker id)``)."""
        broker_id, host, port = found
        with self._lock:
            self._coordinator = (coordinator_node_id(broker_id), host, port)
        log.info("group %s: discovered group coordinator %s:%s (id %s)", self.group_id, host, port, broker_id)

    def ensure_coordinator_ready(self, deadline: float) -> bool:
        """Look the coordinator up until known (True) or ``deadline`` (False).

        Raises:
            KafkaError: a non-retriable lookup error (e.g. GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID).
        """
        while self.coordinator_unknown():
            if self._find_future is None:
                self._find_future = self.send_find_coordinator(self._client, self.group_id)
                self._find_future.add_callback(self._on_find_coordinator)
            if not self.wait_for(self._find_future, deadline):
                return False
            future, self._find_future = self._find_future, None
            if future.failed():
                exc = future.error()
                if not is_retriable_group_error(exc):
                    raise exc
                log.debug("group %s: coordinator lookup failed: %s", self.group_id, exc)
                self.backoff(deadline)
                if self._clock() >= deadline:
                    return False
        return True

    # ------------------------------------------------------------------ join / sync
    def ensure_active_group(self, deadline: float) -> bool:
        """Join (or rejoin) the group until stable (True) or ``deadline`` (False; the join
        continues on the next call).

        Raises:
            KafkaError: fatal group errors (INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT,
                GROUP_AUTHORIZATION_FAILED, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED ...).
        """
        self.heartbeat_sender.start()
        while self.rejoin_needed_or_pending():
            self.raise_fatal_if_any()
            if not self.ensure_coordinator_ready(deadline):
                return False
            if self._join_future is None:
                if self._needs_join_prepare:
                    with self._lock:
                        generation = self.generation
                    self.on_join_prepare(generation)
                    self._needs_join_prepare = False
                self._join_future = self._send_join_group()
            if not self.wait_for(self._join_future, deadline):
                return False
            future, self._join_future = self._join_future, None
            if future.succeeded():
                with self._lock:
                    generation = self.generation
                self._needs_join_prepare = True
                self.on_join_complete(generation, future.value)
                continue
            exc = future.error()
            if not is_retriable_group_error(exc):
                raise exc
            if getattr(exc, "error_code", None) != ErrorCode.member_id_required:
                log.info("group %s: join failed (%s); retrying", self.group_id, exc)
                self.backoff(deadline)
            if self._clock() >= deadline:
                return False
        return True

    def _send_join_group(self) -> RequestFuture:
        return send_join_group(self)

    # ------------------------------------------------------------------ for the join / sync handlers
    def begin_join(self) -> tuple[str, str]:
        """Enter PREPARING_REBALANCE for a JoinGroup (heartbeats off until it is answered);
        returns ``(member id, rejoin reason)`` to send."""
        with self._lock:
            self.state = MemberState.PREPARING_REBALANCE
            self._heartbeat_enabled = False
            self._rejoin_needed = False
            return self.generation.member_id, self._rejoin_reason

    def fail_join(self, outer: RequestFuture, exc: KafkaError) -> None:
        """Fail the join ``outer`` with ``exc``: back to UNJOINED (unless STABLE) with a rejoin
        requested."""
        with self._lock:
            if self.state is not MemberState.STABLE:
                self.state = MemberState.UNJOINED
            self._rejoin_needed = True
        outer.failure(exc)

    def joined(self, generation: Generation) -> bool:
        """JoinGroup succeeded with ``generation``: enter COMPLETING_REBALANCE and turn
        heartbeats on. False (nothing changed) when the member left PREPARING_REBALANCE
        meanwhile (left the group or was reset)."""
        with self._lock:
            if self.state is not MemberState.PREPARING_REBALANCE:
                return False
            self.generation = generation
            self.state = MemberState.COMPLETING_REBALANCE
            self._heartbeat_enabled = True
            self.heartbeat.reset_timeouts(self._clock())
        self.heartbeat_sender.wake()
        return True

    def synced(self, generation: Generation) -> bool:
        """SyncGroup succeeded for ``generation``: enter STABLE. False (nothing changed) when
        the generation or state changed during the sync."""
        with self._lock:
            if self.state is not MemberState.COMPLETING_REBALANCE or self.generation != generation:
                return False
            self.state = MemberState.STABLE
            self.heartbeat.reset_timeouts(self._clock())
        return True

    def set_member_id(self, member_id: str) -> None:
        """KIP-394: keep the member id the coordinator assigned with MEMBER_ID_REQUIRED."""
        with self._lock:
            self.generation = Generation(-1, member_id, None)

    # ------------------------------------------------------------------ leave / close
    def maybe_leave_group(self, reason: str, timeout_ms: float) -> None:
        """Send LeaveGroup (dynamic members in a generation) and forget the generation."""
        with self._lock:
            generation = self.generation
            send = (
                self.is_dynamic_member() and generation.member_id and self.state is not MemberState.UNJOINED
            )
        if send:
            node = self.coordinator()
            if node is not None:
                log.info(
                    "group %s: member %s sending LeaveGroup (%s)", self.group_id, generation.member_id, reason
                )
                future = self._client.send(
                    node, leave_group_request(self.group_id, [(generation.member_id, None)], reason)
                )
                try:
                    self.wait_for(future, self._clock() + timeout_ms)
                except KafkaError:  # best effort (Java maybeLeaveGroup): the session times out otherwise
                    pass
        self.reset_generation(reason, reset_member_id=True)

    def close_coordinator(self, timeout_ms: float) -> None:
        """Leave (see ``maybe_leave_group``) and stop the heartbeat thread. Idempotent."""
        if self._closed:
            return
        self._close_deadline = self._clock() + timeout_ms
        try:
            if self.generation.member_id and self.state is not MemberState.UNJOINED:
                with self._lock:
                    generation = self.generation
                self.on_leave_prepare(generation)
            self.maybe_leave_group(
                "the consumer is being closed", max(0.0, self._close_deadline - self._clock())
            )
        finally:
            with self._lock:
                self._closed = True
                self._heartbeat_enabled = False
            self.heartbeat_sender.close()
