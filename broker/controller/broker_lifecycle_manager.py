"""The broker side of KIP-631 (Kafka's ``BrokerLifecycleManager``), a mixin of
:class:`~broker.controller.quorum_controller.QuorumController`.

* :meth:`register_broker` at startup (retries until a quorum answers; the answer is the broker
  epoch), then :meth:`wait_unfenced` (heartbeats until the controller unfences this broker, i.e.
  it has caught up with the metadata log) -- only then does the broker serve clients;
* a heartbeat every ``broker.heartbeat.interval.ms`` (a STALE_BROKER_EPOCH answer means this
  incarnation was fenced out: register again);
* :meth:`controlled_shutdown` on SIGTERM: a heartbeat with ``want_shutdown`` moves this broker's
  leaderships away (and fences it) before the process exits; bounded when the quorum is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from broker.controller.controller_commands import Command, HeartbeatCmd, HeartbeatResult, RegisterBrokerCmd
from broker.controller.metadata_image import MetadataImage
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError

__all__ = ["BrokerLifecycleManager", "ControllerUnavailable"]

logger = logging.getLogger(__name__)


class ControllerUnavailable(KafkaError):
    """The quorum did not commit a command in time (wire: NOT_CONTROLLER, retriable)."""

    error_code = ErrorCode.not_controller.value
    retriable = True


class BrokerLifecycleManager:
    """Registration, heartbeats and controlled shutdown of this broker (see the module docstring).
    The host class provides ``node_id``, ``_submit``, ``_broker_image``, ``request_timeout_s``,
    ``heartbeat_interval_s`` and ``_tasks``."""

    node_id: int
    request_timeout_s: float
    heartbeat_interval_s: float
    broker_epoch: int
    fenced: bool
    _broker_image: Callable[[], MetadataImage]
    _tasks: list[asyncio.Task[None]]
    _endpoints: dict[str, tuple[str, int]]
    _rack: str | None
    _shutting_down: bool

    async def _submit(self, command: Command, timeout_s: float | None = None) -> Any:  # pragma: no cover
        raise NotImplementedError

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
                code, epoch = await self._submit(command, timeout_s=max(self.request_timeout_s, 2.0))
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
        for task in self._tasks:
            if task.get_name() == "broker-heartbeat":
                task.cancel()
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
                result = await self.heartbeat()
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
