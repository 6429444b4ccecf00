"""Group member liveness: the ``Heartbeat`` timers and the background ``HeartbeatThread``
(Java ``org.apache.kafka.clients.consumer.internals.Heartbeat`` and
``AbstractCoordinator.HeartbeatThread``).

Three clocks, all in milliseconds of the injected clock:

- heartbeats are sent every ``heartbeat.interval.ms`` (default 3000), or ``retry.backoff.ms``
  after a failed one;
- the session (``session.timeout.ms``, default 45000) expires when no heartbeat succeeded for
  that long: the coordinator is then presumed dead and looked up again;
- the poll timer (``max.poll.interval.ms``, default 300000) expires when the application did
  not call ``poll`` for that long: the member leaves the group so that its partitions move on,
  and rejoins on its next ``poll``.

The thread uses its own ``NetworkClient`` (and connection) so heartbeats flow while the
application thread is busy or blocked in a long fetch; it shares only the coordinator's
lock-protected membership state. ``HeartbeatSender`` is the component a coordinator owns (Java's
``AbstractCoordinator.HeartbeatThread`` with its ``HeartbeatResponseHandler``); it reaches the
coordinator only through the ``HeartbeatMember`` protocol.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.consumer.group_requests import heartbeat_request, leave_group_request
from spark_kafkalite.client.consumer.group_state import Generation, MemberState
from spark_kafkalite.client.errors import COORDINATOR_RETRY_ERRORS
from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError, error_for_code

if TYPE_CHECKING:
    from spark_kafkalite.client.request_future import RequestFuture

__all__ = ["Heartbeat", "HeartbeatThread", "HeartbeatSender", "HeartbeatMember"]

log = logging.getLogger(__name__)


class Heartbeat:
    """Pure timer state (see module docstring); not thread-safe on its own (the coordinator's
    lock guards it)."""

    def __init__(
        self,
        session_timeout_ms: float,
        heartbeat_interval_ms: float,
        max_poll_interval_ms: float,
        retry_backoff_ms: float,
        clock: Callable[[], float] = now_ms,
    ) -> None:
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self.session_timeout_ms = float(session_timeout_ms)
        self.heartbeat_interval_ms = float(heartbeat_interval_ms)
        self.max_poll_interval_ms = float(max_poll_interval_ms)
        self.retry_backoff_ms = float(retry_backoff_ms)
        self.clock = clock
        now = clock()
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms
        self._session_deadline_ms = now + self.session_timeout_ms
        self._poll_deadline_ms = now + self.max_poll_interval_ms
        self._last_poll_ms = now
        self.in_flight = False

    def poll(self, now: float) -> None:
        """The application called ``poll``: restart the poll timer."""
        self._last_poll_ms = now
        self._poll_deadline_ms = now + self.max_poll_interval_ms

    def sent_heartbeat(self, now: float) -> None:
        """A Heartbeat request left at ``now`` (ms): one in flight, the next due
        ``heartbeat.interval.ms`` later (Java ``Heartbeat.sentHeartbeat``)."""
        self.in_flight = True
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms

    def received_heartbeat(self, now: float) -> None:
        """A Heartbeat response arrived at ``now`` (ms): the session deadline moves to
        ``now + session.timeout.ms`` (Java ``Heartbeat.receiveHeartbeat``)."""
        self.in_flight = False
        self._session_deadline_ms = now + self.session_timeout_ms

    def fail_heartbeat(self, now: float) -> None:
        """A Heartbeat failed at ``now`` (ms): retry after ``retry.backoff.ms`` (Java
        ``Heartbeat.failHeartbeat``)."""
        self.in_flight = False
        self._next_heartbeat_ms = now + self.retry_backoff_ms

    def reset_timeouts(self, now: float) -> None:
        """After a (re)join: every timer starts over."""
        self.in_flight = False
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms
        self._session_deadline_ms = now + self.session_timeout_ms
        self._poll_deadline_ms = now + self.max_poll_interval_ms

    def reset_session_timeout(self, now: float) -> None:
        """Restart the session timer at ``now`` (ms) without touching the others (Java
        ``Heartbeat.resetSessionTimeout``)."""
        self._session_deadline_ms = now + self.session_timeout_ms

    def should_heartbeat(self, now: float) -> bool:
        """True when none is in flight and the next heartbeat is due at ``now`` (ms)."""
        return not self.in_flight and now >= self._next_heartbeat_ms

    def time_to_next_heartbeat(self, now: float) -> float:
        """Milliseconds from ``now`` until a heartbeat is due (0 when due; Java
        ``Heartbeat.timeToNextHeartbeat``)."""
        return 0.0 if self.should_heartbeat(now) else max(0.0, self._next_heartbeat_ms - now)

    def session_timeout_expired(self, now: float) -> bool:
        """True when no heartbeat succeeded for ``session.timeout.ms`` up to ``now`` (ms)."""
        return now >= self._session_deadline_ms

    def poll_timeout_expired(self, now: float) -> bool:
        """True when the application did not ``poll`` for ``max.poll.interval.ms`` up to
        ``now`` (ms; Java ``Heartbeat.pollTimeoutExpired``)."""
        return now >= self._poll_deadline_ms

    def last_poll_ms(self) -> float:
        """When the application last called ``poll`` (ms of the injected clock)."""
        return self._last_poll_ms


class HeartbeatMember(Protocol):
    """What the heartbeat side needs of its group member (``AbstractCoordinator``). Membership
    fields are read and changed under ``lock``."""

    group_id: str
    group_instance_id: str | None
    rebalance_timeout_ms: int
    state: MemberState
    generation: Generation
    heartbeat: Heartbeat

    @property
    def lock(self) -> threading.RLock:
        """Guards the membership fields shared with the heartbeat thread."""

    @property
    def closed(self) -> bool:
        """True once the member closed (the thread then stops)."""

    @property
    def heartbeat_enabled(self) -> bool:
        """True while the member is in a generation (heartbeats are sent)."""

    @property
    def coordinator_endpoint(self) -> tuple[int, str, int] | None:
        """``(node id, host, port)`` of the known coordinator, or None."""

    @property
    def retry_backoff_ms(self) -> float:
        """``retry.backoff.ms``: the pause after a failed heartbeat or lookup."""

    @property
    def request_timeout_ms(self) -> int:
        """``request.timeout.ms`` of each Heartbeat / FindCoordinator request."""

    def now_ms(self) -> float:
        """The member's clock, in milliseconds."""

    def forget_coordinator(self) -> None:
        """Drop the coordinator quietly (its session expired); call under ``lock``."""

    def leave_on_poll_timeout(self) -> Generation:
        """Leave the generation after ``max.poll.interval.ms`` without ``poll``; returns
        the generation left. Call under ``lock``."""

    def is_dynamic_member(self) -> bool:
        """True without ``group.instance.id`` (static members never send LeaveGroup, KIP-345)."""

    def mark_coordinator_unknown(self, reason: str) -> None:
        """Forget the coordinator for ``reason`` (NOT_COORDINATOR, a disconnect ...)."""

    def request_rejoin(self, reason: str) -> None:
        """Ask the application thread to rejoin on its next ``poll`` (REBALANCE_IN_PROGRESS)."""

    def generation_if_stable(self) -> Generation | None:
        """The generation while the member is STABLE, else None."""

    def is_current_generation(self, generation: Generation) -> bool:
        """True while ``generation`` is still the member's."""

    def reset_generation(self, reason: str, reset_member_id: bool) -> None:
        """Forget the generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) and ask for a rejoin."""

    def set_coordinator(self, found: tuple[int, str, int]) -> None:
        """Use ``(broker id, host, port)`` from a FindCoordinator answer as the coordinator."""

    def set_fatal_error(self, exc: KafkaError) -> None:
        """Record an error the application's next ``poll`` raises (FENCED_INSTANCE_ID)."""

    def send_find_coordinator(self, client: NetworkClient, group_id: str) -> RequestFuture:
        """Send FindCoordinator for ``group_id`` on ``client``; the future completes with
        ``(broker id, host, port)`` or fails with the lookup error."""


class HeartbeatThread(threading.Thread):
    """Daemon thread running ``sender.heartbeat_once`` while the sender is open."""

    def __init__(self, sender: HeartbeatSender, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._sender = sender
        self._closed = threading.Event()
        self._wake = threading.Event()

    def wake(self) -> None:
        """Cut the thread's current wait short (a join completed, or the member is closing)."""
        self._wake.set()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the thread and wait up to ``timeout_s`` seconds for it (not when called from
        the thread itself)."""
        self._closed.set()
        self._wake.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout_s)

    def run(self) -> None:
        """The loop: ``heartbeat_once`` then wait for the milliseconds it returns (or a
        ``wake``); an unexpected error is logged and retried after 1 s. Closes the thread's client on
        exit."""
        log.debug("heartbeat thread started")
        try:
            while not self._closed.is_set():
                try:
                    wait_ms = self._sender.heartbeat_once()
                except Exception:  # never die silently: log and keep beating
                    log.exception("heartbeat thread error")
                    wait_ms = 1000.0
                if self._closed.is_set():
                    break
                if wait_ms > 0:
                    self._wake.wait(None if math.isinf(wait_ms) else wait_ms / 1000.0)
                    self._wake.clear()
        finally:
            self._sender.close_client()
            log.debug("heartbeat thread stopped")


class HeartbeatSender:
    """Heartbeats of one group member (see module docstring): the thread, its own client, and
    the handling of Heartbeat responses. ``config`` builds the thread's ``NetworkClient``."""

    def __init__(self, member: HeartbeatMember, config: dict[str, Any]) -> None:
        self._member = member
        self._config = config
        self._thread: HeartbeatThread | None = None
        self._client: NetworkClient | None = None

    def start(self) -> None:
        """Start the thread (once; not after the member closed)."""
        if self._thread is None and not self._member.closed:
            self._thread = HeartbeatThread(self, f"kafkalite-heartbeat-{self._member.group_id}")
            self._thread.start()

    def wake(self) -> None:
        """Wake the thread so it re-reads the membership state (e.g. heartbeats just enabled)."""
        if self._thread is not None:
            self._thread.wake()

    def close(self) -> None:
        """Stop the thread; its client is closed by the thread on exit, or here."""
        thread = self._thread
        if thread is not None:
            thread.close()
        if thread is None or not thread.is_alive():
            self.close_client()

    def close_client(self) -> None:
        """Close the heartbeat thread's client (by the thread on exit, or by ``close``)."""
        with self._member.lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def _heartbeat_client(self) -> NetworkClient:
        if self._client is None:
            from spark_kafkalite.client.metadata import Metadata

            config = dict(self._config)
            config["client.id"] = f"{config.get('client.id', 'spark-kafkalite')}"
            self._client = NetworkClient(config, Metadata(config))
        return self._client

    def heartbeat_once(self) -> float:
        """One step of the heartbeat thread; returns milliseconds to sleep."""
        member = self._member
        with member.lock:
            if member.closed:
                return math.inf
            if not member.heartbeat_enabled or member.state not in (
                MemberState.STABLE,
                MemberState.COMPLETING_REBALANCE,
            ):
                return 1000.0
            coordinator = member.coordinator_endpoint
            now = member.now_ms()
            if coordinator is not None and member.heartbeat.session_timeout_expired(now):
                member.forget_coordinator()
                log.info(
                    "group %s: no successful heartbeat for session.timeout.ms; coordinator presumed dead",
                    member.group_id,
                )
                member.heartbeat.reset_session_timeout(now)
                return member.retry_backoff_ms
            if member.heartbeat.poll_timeout_expired(now):
                log.warning(
                    "group %s: consumer poll timeout has expired: poll() was not called for %d ms "
                    "(max.poll.interval.ms); leaving the group",
                    member.group_id,
                    member.rebalance_timeout_ms,
                )
                generation = member.leave_on_poll_timeout()
                leave = (coordinator, generation) if coordinator and member.is_dynamic_member() else None
            else:
                leave = None
                if coordinator is not None and not member.heartbeat.should_heartbeat(now):
                    return member.heartbeat.time_to_next_heartbeat(now)
                generation = member.generation
                if coordinator is not None:
                    member.heartbeat.sent_heartbeat(now)
        client = self._heartbeat_client()
        if leave is not None:
            (node, host, port), gen = leave
            client.add_node(node, host, port)
            try:
                client.send_and_wait(
                    node,
                    leave_group_request(
                        member.group_id, [(gen.member_id, None)], "consumer poll timeout has expired"
                    ),
                    member.request_timeout_ms,
                )
            except KafkaError as exc:
                log.debug("group %s: LeaveGroup failed: %s", member.group_id, exc)
            return 0.0
        if coordinator is None:
            try:
                found = client.wait_for(
                    member.send_find_coordinator(client, member.group_id), member.request_timeout_ms
                )
            except KafkaError as exc:
                log.debug("group %s: heartbeat thread coordinator lookup failed: %s", member.group_id, exc)
                return member.retry_backoff_ms
            member.set_coordinator(found)
            return 0.0
        node, host, port = coordinator
        client.add_node(node, host, port)
        try:
            response = client.send_and_wait(
                node,
                heartbeat_request(
                    member.group_id, generation.generation_id, generation.member_id, member.group_instance_id
                ),
                member.request_timeout_ms,
            )
            code = int(response.error_code)
        except KafkaError as exc:
            log.debug("group %s: heartbeat failed: %s", member.group_id, exc)
            member.mark_coordinator_unknown(f"heartbeat failed: {exc}")
            with member.lock:
                member.heartbeat.fail_heartbeat(member.now_ms())
            return member.retry_backoff_ms
        self.handle_heartbeat_error(code, generation)
        return 0.0

    def handle_heartbeat_error(self, code: int, generation: Generation) -> None:
        """Act on a Heartbeat response's error code (Java ``HeartbeatResponseHandler``)."""
        member = self._member
        now = member.now_ms()
        with member.lock:
            if code in (ErrorCode.none, ErrorCode.rebalance_in_progress):
                member.heartbeat.received_heartbeat(now)
            else:
                member.heartbeat.fail_heartbeat(now)
            current = member.generation == generation
        if code == ErrorCode.none:
            return
        if code == ErrorCode.rebalance_in_progress:
            if member.generation_if_stable() is not None:
                member.request_rejoin("group is rebalancing (heartbeat: REBALANCE_IN_PROGRESS)")
        elif code in (
            ErrorCode.illegal_generation,
            ErrorCode.unknown_member_id,
            ErrorCode.fenced_instance_id,
        ):
            if current:
                member.reset_generation(
                    f"heartbeat: {error_for_code(code).name}",
                    reset_member_id=code != ErrorCode.illegal_generation,
                )
            if code == ErrorCode.fenced_instance_id:
                member.set_fatal_error(
                    error_for_code(code, f"static member {member.group_instance_id} was fenced")
                )
        elif code in COORDINATOR_RETRY_ERRORS:
            member.mark_coordinator_unknown(error_for_code(code).name)
        else:
            member.set_fatal_error(error_for_code(code, f"heartbeat of group {member.group_id}"))
