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
lock-protected membership state.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.clock import now_ms
from spark_kafkalite.client.consumer.group_requests import heartbeat_request, leave_group_request
from spark_kafkalite.client.consumer.group_state import COORDINATOR_ERRORS, Generation, MemberState
from spark_kafkalite.client.network_client import NetworkClient
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError, error_for_code

if TYPE_CHECKING:
    from spark_kafkalite.client.request_future import RequestFuture

__all__ = ["Heartbeat", "HeartbeatThread", "HeartbeatMixin"]

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
        self.in_flight = True
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms

    def received_heartbeat(self, now: float) -> None:
        self.in_flight = False
        self._session_deadline_ms = now + self.session_timeout_ms

    def fail_heartbeat(self, now: float) -> None:
        self.in_flight = False
        self._next_heartbeat_ms = now + self.retry_backoff_ms

    def reset_timeouts(self, now: float) -> None:
        """After a (re)join: every timer starts over."""
        self.in_flight = False
        self._next_heartbeat_ms = now + self.heartbeat_interval_ms
        self._session_deadline_ms = now + self.session_timeout_ms
        self._poll_deadline_ms = now + self.max_poll_interval_ms

    def reset_session_timeout(self, now: float) -> None:
        self._session_deadline_ms = now + self.session_timeout_ms

    def should_heartbeat(self, now: float) -> bool:
        return not self.in_flight and now >= self._next_heartbeat_ms

    def time_to_next_heartbeat(self, now: float) -> float:
        return 0.0 if self.should_heartbeat(now) else max(0.0, self._next_heartbeat_ms - now)

    def session_timeout_expired(self, now: float) -> bool:
        return now >= self._session_deadline_ms

    def poll_timeout_expired(self, now: float) -> bool:
        return now >= self._poll_deadline_ms

    def last_poll_ms(self) -> float:
        return self._last_poll_ms


class HeartbeatThread(threading.Thread):
    """Daemon thread sending Heartbeats for ``coordinator`` while it is a stable (or completing
    rebalance) member; see ``AbstractCoordinator.heartbeat_once``."""

    def __init__(self, coordinator: HeartbeatMixin, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._coordinator = coordinator
        self._closed = threading.Event()
        self._wake = threading.Event()

    def wake(self) -> None:
        self._wake.set()

    def close(self, timeout_s: float = 5.0) -> None:
        self._closed.set()
        self._wake.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout_s)

    def run(self) -> None:
        log.debug("heartbeat thread started")
        try:
            while not self._closed.is_set():
                try:
                    wait_ms = self._coordinator.heartbeat_once()
                except Exception:  # never die silently: log and keep beating
                    log.exception("heartbeat thread error")
                    wait_ms = 1000.0
                if self._closed.is_set():
                    break
                if wait_ms > 0:
                    self._wake.wait(None if math.isinf(wait_ms) else wait_ms / 1000.0)
                    self._wake.clear()
        finally:
            self._coordinator.close_heartbeat_client()
            log.debug("heartbeat thread stopped")


class HeartbeatMixin:
    """The heartbeat side of ``AbstractCoordinator`` (Java ``HeartbeatThread.run`` and
    ``HeartbeatResponseHandler``): runs on the heartbeat thread with its own client."""

    if TYPE_CHECKING:  # provided by AbstractCoordinator
        _lock: threading.RLock
        _closed: bool
        _heartbeat_enabled: bool
        _heartbeat_thread: HeartbeatThread | None
        _hb_client: NetworkClient | None
        _coordinator: tuple[int, str, int] | None
        _config: dict[str, Any]
        _clock: Callable[[], float]
        _rejoin_needed: bool
        _rejoin_reason: str
        _retry_backoff_ms: float
        _request_timeout_ms: int
        _fatal_error: KafkaError | None
        state: MemberState
        generation: Generation
        heartbeat: Heartbeat
        group_id: str
        group_instance_id: str | None
        rebalance_timeout_ms: int

        def _is_dynamic_member(self) -> bool: ...
        def mark_coordinator_unknown(self, reason: str) -> None: ...
        def request_rejoin(self, reason: str) -> None: ...
        def generation_if_stable(self) -> Generation | None: ...
        def reset_generation(self, reason: str, reset_member_id: bool) -> None: ...
        def set_coordinator(self, found: tuple[int, str, int]) -> None: ...
        @staticmethod
        def send_find_coordinator(client: NetworkClient, group_id: str) -> RequestFuture: ...

    # ------------------------------------------------------------------ heartbeats
    def _start_heartbeat_thread(self) -> None:
        if self._heartbeat_thread is None and not self._closed:
            self._heartbeat_thread = HeartbeatThread(self, f"kafkalite-heartbeat-{self.group_id}")
            self._heartbeat_thread.start()

    def _wake_heartbeat(self) -> None:
        if self._heartbeat_thread is not None:
            self._heartbeat_thread.wake()

    def poll_heartbeat(self, now: float) -> None:
        """The application polled: restart the ``max.poll.interval.ms`` timer."""
        with self._lock:
            self.heartbeat.poll(now)

    def close_heartbeat_client(self) -> None:
        """Close the heartbeat thread's client (by the thread on exit, or by ``close``)."""
        with self._lock:
            client, self._hb_client = self._hb_client, None
        if client is not None:
            client.close()

    def _heartbeat_client(self) -> NetworkClient:
        if self._hb_client is None:
            from spark_kafkalite.client.metadata import Metadata

            config = dict(self._config)
            config["client.id"] = f"{config.get('client.id', 'spark-kafkalite')}"
            self._hb_client = NetworkClient(config, Metadata(config))
        return self._hb_client

    def heartbeat_once(self) -> float:
        """One step of the heartbeat thread; returns milliseconds to sleep."""
        with self._lock:
            if self._closed:
                return math.inf
            if not self._heartbeat_enabled or self.state not in (
                MemberState.STABLE,
                MemberState.COMPLETING_REBALANCE,
            ):
                return 1000.0
            coordinator = self._coordinator
            now = self._clock()
            if coordinator is not None and self.heartbeat.session_timeout_expired(now):
                self._coordinator = None
                log.info(
                    "group %s: no successful heartbeat for session.timeout.ms; coordinator presumed dead",
                    self.group_id,
                )
                self.heartbeat.reset_session_timeout(now)
                return self._retry_backoff_ms
            if self.heartbeat.poll_timeout_expired(now):
                log.warning(
                    "group %s: consumer poll timeout has expired: poll() was not called for %d ms "
                    "(max.poll.interval.ms); leaving the group",
                    self.group_id,
                    self.rebalance_timeout_ms,
                )
                generation = self.generation
                self.generation = Generation(
                    -1, "" if self._is_dynamic_member() else generation.member_id, None
                )
                self.state = MemberState.UNJOINED
                self._heartbeat_enabled = False
                self._rejoin_needed = True
                self._rejoin_reason = "consumer poll timeout has expired"
                leave = (coordinator, generation) if coordinator and self._is_dynamic_member() else None
            else:
                leave = None
                if coordinator is not None and not self.heartbeat.should_heartbeat(now):
                    return self.heartbeat.time_to_next_heartbeat(now)
                generation = self.generation
                if coordinator is not None:
                    self.heartbeat.sent_heartbeat(now)
        client = self._heartbeat_client()
        if leave is not None:
            (node, host, port), gen = leave
            client.add_node(node, host, port)
            try:
                client.send_and_wait(
                    node,
                    leave_group_request(
                        self.group_id, [(gen.member_id, None)], "consumer poll timeout has expired"
                    ),
                    self._request_timeout_ms,
                )
            except KafkaError as exc:
                log.debug("group %s: LeaveGroup failed: %s", self.group_id, exc)
            return 0.0
        if coordinator is None:
            try:
                found = client.wait_for(
                    self.send_find_coordinator(client, self.group_id), self._request_timeout_ms
                )
            except KafkaError as exc:
                log.debug("group %s: heartbeat thread coordinator lookup failed: %s", self.group_id, exc)
                return self._retry_backoff_ms
            self.set_coordinator(found)
            return 0.0
        node, host, port = coordinator
        client.add_node(node, host, port)
        try:
            response = client.send_and_wait(
                node,
                heartbeat_request(
                    self.group_id, generation.generation_id, generation.member_id, self.group_instance_id
                ),
                self._request_timeout_ms,
            )
            code = int(response.error_code)
        except KafkaError as exc:
            log.debug("group %s: heartbeat failed: %s", self.group_id, exc)
            self.mark_coordinator_unknown(f"heartbeat failed: {exc}")
            with self._lock:
                self.heartbeat.fail_heartbeat(self._clock())
            return self._retry_backoff_ms
        self._handle_heartbeat_error(code, generation)
        return 0.0

    def _handle_heartbeat_error(self, code: int, generation: Generation) -> None:
        now = self._clock()
        with self._lock:
            if code in (ErrorCode.none, ErrorCode.rebalance_in_progress):
                self.heartbeat.received_heartbeat(now)
            else:
                self.heartbeat.fail_heartbeat(now)
            current = self.generation == generation
        if code == ErrorCode.none:
            return
        if code == ErrorCode.rebalance_in_progress:
            if self.generation_if_stable() is not None:
                self.request_rejoin("group is rebalancing (heartbeat: REBALANCE_IN_PROGRESS)")
        elif code in (
            ErrorCode.illegal_generation,
            ErrorCode.unknown_member_id,
            ErrorCode.fenced_instance_id,
        ):
            if current:
                self.reset_generation(
                    f"heartbeat: {error_for_code(code).name}",
                    reset_member_id=code != ErrorCode.illegal_generation,
                )
            if code == ErrorCode.fenced_instance_id:
                with self._lock:
                    self._fatal_error = error_for_code(
                        code, f"static member {self.group_instance_id} was fenced"
                    )
        elif code in COORDINATOR_ERRORS or code == ErrorCode.coordinator_load_in_progress:
            self.mark_coordinator_unknown(error_for_code(code).name)
        else:
            with self._lock:
                self._fatal_error = error_for_code(code, f"heartbeat of group {self.group_id}")
