"""The broker side of KIP-631 (Kafka's ``BrokerLifecycleManager``), composed into
:class:`~broker.controller.quorum_controller.QuorumController`, whose Raft node carries its
commands (``submit``).

* :meth:`register_broker` at startup (retries until a quorum answers; the answer is the broker
  epoch), then :meth:`wait_unfenced` (heartbeats until the controller unfences this broker, i.e.
  it has caught up with the metadata log) -- only then does the broker serve clients;
* a heartbeat every ``broker.heartbeat.interval.ms``, answered by the active controller from
  memory (``send_heartbeat``, no log entry); when it says this broker is fenced (its session
  expired), a heartbeat command through the log unfences it once caught up; a STALE_BROKER_EPOCH
  answer means this incarnation was fenced out: register again;
* :meth:`controlled_shutdown` on SIGTERM: a heartbeat with ``want_shutdown`` moves this broker's
  leaderships away (and fences it) before the process exits; bounded when the quorum is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from broker.controller.controller_commands import Command, HeartbeatCmd, HeartbeatResult, RegisterBrokerCmd
from broker.controller.metadata_image import MetadataImage
from broker.tasks import await_cancelled
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = ["BrokerLifecycleManager", "ControllerUnavailable"]

logger = logging.getLogger(__name__)


class ControllerUnavailable(KafkaError):
    """The quorum did not commit a command in time (wire: NOT_CONTROLLER, retriable)."""

    error_code = ErrorCode.not_controller.value
    retriable = True


class BrokerLifecycleManager:
    """Registration, heartbeats and controlled shutdown of this broker (see the module docstring).

    Args:
        node_id: this broker.
        submit: ``await submit(command, timeout_s)`` -> the command's result once committed;
            raises :class:`ControllerUnavailable` when the quorum does not answer in time.
        send_heartbeat: ``await send_heartbeat(node_id, broker_epoch, metadata_offset)`` -> the
            active controller's in-memory :class:`HeartbeatResult`; raises
            :class:`ControllerUnavailable` when no active controller answers in time.
        broker_image: the broker's applied metadata image (its offset goes in heartbeats).
        request_timeout_s: how long one command may wait for its commit.
        heartbeat_interval_s: ``broker.heartbeat.interval.ms`` in seconds.

    Attributes:
        broker_epoch: the epoch of this broker's registration (-1 before it registered).
        fenced: whether the controller has this broker fenced (as of the last heartbeat).
    """

    def __init__(
        self,
        node_id: int,
        submit: Callable[[Command, float | None], Awaitable[Any]],
        send_heartbeat: Callable[[int, int, int], Awaitable[HeartbeatResult]],
        broker_image: Callable[[], MetadataImage],
        *,
        request_timeout_s: float,
        heartbeat_interval_s: float,
    ) -> None:
        self.node_id = node_id
        self._submit = submit
        self._send_heartbeat = send_heartbeat
        self._broker_image = broker_image
        self.request_timeout_s = request_timeout_s
        self.heartbeat_interval_s = heartbeat_interval_s
        self.broker_epoch = -1
        self.fenced = True
        self._endpoints: dict[str, tuple[str, int]] = {}
        self._rack: str | None = None
        self._shutting_down = False
        self._heartbeat_task: asyncio.Task[None] | None = None

    def start_heartbeats(self) -> None:
        """Start the heartbeat task (after :meth:`wait_unfenced`)."""
        self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(), name="broker-heartbeat")

    async def stop(self) -> None:
        """Stop the heartbeat task."""
        task, self._heartbeat_task = self._heartbeat_task, None
        if task is not None:
            task.cancel()
            await await_cancelled(task, "broker heartbeat task")

    # -- this broker's lifecycle ----------------------------------------------------------------
    async def register_broker(
        self, endpoints: Mapping[str, tuple[str, int]], rack: str | None, stop: asyncio.Event | None = None
    ) -> int:
        """Register this broker (retrying until the quorum answers); returns its broker epoch.

        Raises:
            asyncio.CancelledError: ``stop`` was set before a quorum answered.
        """
        self._endpoints, self._rack = dict(endpoints), rack
        command = RegisterBrokerCmd(self.node_id, dict(endpoints), rack, uuid.uuid4())
        waited = 0.0
        while True:
            if stop is not None and stop.is_set():
                raise asyncio.CancelledError("stopped while waiting for the controller quorum")
            try:
                code, epoch = await self._submit(command, max(self.request_timeout_s, 2.0))
            except ControllerUnavailable as exc:
                waited += max(self.request_timeout_s, 2.0)
                logger.info("waiting for the controller quorum to register broker %d (%s)", self.node_id, exc)
                if waited >= 30 and int(waited) % 30 < max(int(self.request_timeout_s), 2):
                    logger.warning(
                        "no controller quorum after %.0f s: is a majority of controller.quorum.voters "
                        "running, with the same cluster id (meta.properties) and controller.quorum.password?",
                        waited,
                    )
                await asyncio.sleep(0.2)
                continue
            if code == ErrorCode.none:
                self.broker_epoch = epoch
                self.fenced = True
                logger.info("broker %d registered with broker epoch %d", self.node_id, epoch)
                return int(epoch)
            await asyncio.sleep(0.2)

    async def heartbeat(self, want_shutdown: bool = False, timeout_s: float | None = None) -> HeartbeatResult:
        """One BrokerHeartbeat; raises ControllerUnavailable when the quorum does not answer."""
        command = HeartbeatCmd(
            self.node_id, self.broker_epoch, self._broker_image().offset, want_shutdown=want_shutdown
        )
        result = await self._submit(command, timeout_s)
        if not isinstance(result, HeartbeatResult):
            return HeartbeatResult(ErrorCode.unknown_server_error)
        return self._note(result)

    async def session_heartbeat(self) -> HeartbeatResult:
        """One heartbeat answered by the active controller from memory; when it has this broker
        fenced (not shutting down), a heartbeat through the log follows (it unfences a caught-up
        broker). Raises ControllerUnavailable when no controller answers."""
        result = self._note(
            await self._send_heartbeat(self.node_id, self.broker_epoch, self._broker_image().offset)
        )
        if result.error == ErrorCode.none and result.is_fenced and not result.should_shutdown:
            return await self.heartbeat()
        return result

    def _note(self, result: HeartbeatResult) -> HeartbeatResult:
        if result.error == ErrorCode.none:
            if self.fenced != result.is_fenced:
                logger.info("broker %d is now %s", self.node_id, "fenced" if result.is_fenced else "unfenced")
            self.fenced = result.is_fenced
        return result

    async def wait_unfenced(self, stop: asyncio.Event | None = None) -> None:
        """Heartbeat until the controller unfences this broker (it has caught up with the
        metadata log), as Kafka's broker does before it starts serving."""
        while True:
            if stop is not None and stop.is_set():
                raise asyncio.CancelledError("stopped while waiting to be unfenced")
            try:
                result = await self.heartbeat()
            except ControllerUnavailable:
                await asyncio.sleep(0.1)
                continue
            if result.error == ErrorCode.stale_broker_epoch:
                await self.register_broker(self._endpoints, self._rack, stop)
                continue
            if result.error == ErrorCode.none and not result.is_fenced:
                return
            await asyncio.sleep(min(self.heartbeat_interval_s, 0.1))

    async def controlled_shutdown(self, timeout_s: float = 5.0) -> bool:
        """Ask the controller to move this broker's leaderships away (fencing it); True when it
        confirmed within ``timeout_s``."""
        self._shutting_down = True
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                result = await self.heartbeat(
                    want_shutdown=True,
                    timeout_s=max(0.1, min(self.request_timeout_s, deadline - time.monotonic())),
                )
            except ControllerUnavailable:
                continue
            if result.should_shutdown or result.error == ErrorCode.stale_broker_epoch:
                logger.info("controlled shutdown of broker %d done: leaderships moved", self.node_id)
                return True
        logger.warning(
            "controlled shutdown of broker %d not confirmed within %.1f s", self.node_id, timeout_s
        )
        return False

    async def _heartbeat_loop(self) -> None:
        while not self._shutting_down:
            await asyncio.sleep(self.heartbeat_interval_s)
            if self._shutting_down:
                return
            try:
                result = await self.session_heartbeat()
            except ControllerUnavailable as exc:
                logger.debug("heartbeat of broker %d failed: %s", self.node_id, exc)
                continue
            except Exception:  # noqa: BLE001 - keep heartbeating
                logger.exception("heartbeat failed")
                continue
            if result.error == ErrorCode.stale_broker_epoch and not self._shutting_down:
                logger.warning(
                    "broker %d was fenced out (stale broker epoch): registering again", self.node_id
                )
                with contextlib.suppress(ControllerUnavailable):
                    await self.register_broker(self._endpoints, self._rack)
