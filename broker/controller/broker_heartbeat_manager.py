"""Broker sessions and the active controller's periodic duties (Kafka's
``BrokerHeartbeatManager`` and ``QuorumController``'s ``maybeFenceStaleBroker`` /
``maybeBalancePartitionLeaders`` tasks) for the
:class:`~broker.controller.quorum_controller.QuorumController`.

Heartbeats reach every voter outside the Raft log
(:meth:`~broker.controller.quorum.MetadataQuorum.send_heartbeat`); each voter notes the last
contact of every broker, and the active controller answers them from its state machine. A new
active controller therefore keeps the clocks: a broker that died with the previous controller
is fenced one ``broker.session.timeout.ms`` after its last heartbeat, and every broker gets at
least half a session after the election. An expired broker is fenced with a ``FenceBrokerCmd``
(a log entry: its leaderships move, it leaves the ISRs).

Session clocks are written on the pysyncobj thread (heartbeats, executed commands) and read on
the event loop (plain dict and float assignments).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from broker.controller.broker_lifecycle_manager import ControllerUnavailable
from broker.controller.controller_commands import (
    ElectLeadersCmd,
    FenceBrokerCmd,
    HeartbeatCmd,
    MetadataStateMachine,
    RegisterBrokerCmd,
)
from broker.controller.election import Election
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["BrokerHeartbeatManager"]

logger = logging.getLogger(__name__)


class BrokerHeartbeatManager:
    """Broker session clocks, fencing and leader rebalancing (see the module docstring).

    Args:
        node_id: this controller node.
        quorum: the :class:`~broker.controller.quorum.MetadataQuorum` (``is_leader``, ``term``,
            ``image``, ``machine``).
        submit: ``await submit(command)``: propose a command and wait for its result (raises
            ``ControllerUnavailable``).
        session_timeout_s: ``broker.session.timeout.ms`` in seconds.
        auto_rebalance: ``auto.leader.rebalance.enable``; ``rebalance_interval_s`` /
            ``imbalance_percentage``: ``leader.imbalance.check.interval.seconds`` /
            ``leader.imbalance.per.broker.percentage``.

    Attributes:
        last_heartbeat: broker id -> monotonic time (s) of its last heartbeat heard here.
        leader_since: monotonic time this node became the active controller, or None.
        fence_after: no broker is fenced before this monotonic time (s): set on activation
            and after a stall of this process.
        fencing: broker id -> the epoch being fenced (one FenceBrokerCmd in flight each).
    """

    def __init__(
        self,
        node_id: int,
        quorum: Any,
        submit: Callable[[Any], Awaitable[Any]],
        *,
        session_timeout_s: float,
        auto_rebalance: bool = True,
        rebalance_interval_s: float = 300.0,
        imbalance_percentage: int = 10,
    ) -> None:
        self.node_id = node_id
        self.quorum = quorum
        self._submit = submit
        self.session_timeout_s = session_timeout_s
        self.auto_rebalance = auto_rebalance
        self.rebalance_interval_s = rebalance_interval_s
        self.imbalance_percentage = imbalance_percentage
        self.last_heartbeat: dict[int, float] = {}
        self.leader_since: float | None = None
        self.fence_after = 0.0
        self.fencing: dict[int, int] = {}

    def on_executed(self, command: Any) -> None:
        """A committed command was executed here (pysyncobj thread): a registration or a
        heartbeat that does not ask to shut down restarts that broker's session clock."""
        if isinstance(command, RegisterBrokerCmd) or (
            isinstance(command, HeartbeatCmd) and not command.want_shutdown
        ):
            self.last_heartbeat[command.node_id] = time.monotonic()

    def on_state_change(self, leader: bool) -> None:
        """This node became (``leader``) or stopped being the active controller."""
        if leader:
            # Every voter notes the heartbeats it receives (they reach all voters, outside the
            # log), so this node's clocks are current: keep them, and a broker that died with
            # the previous controller is fenced one session after its last heartbeat, not one
            # session after this election (Kafka's BrokerHeartbeatManager, which only the
            # active controller feeds, restarts every clock on activation; that costs a
            # failover the election time again). Brokers get at least half a session from now
            # to reach this controller.
            now = time.monotonic()
            self.leader_since = now
            self.fence_after = now + self.session_timeout_s / 2
            self.fencing.clear()
            logger.info("node %d is now the active controller (term %d)", self.node_id, self.quorum.term)
        else:
            self.leader_since = None
            logger.info("node %d is no longer the active controller", self.node_id)

    def answer_heartbeat(
        self, request: tuple[int, int, int], active: bool
    ) -> tuple[int, bool, bool, bool] | None:
        """A broker heartbeat at this voter (pysyncobj thread): the broker's session clock
        restarts when it is the registered incarnation; the active controller answers it from
        the state machine."""
        node_id, epoch, metadata_offset = request
        result = self.quorum.machine.heartbeat_state(node_id, epoch, metadata_offset)
        if result.error == ErrorCode.none:
            self.last_heartbeat[node_id] = time.monotonic()
        if not active:
            return None
        return int(result.error), result.is_caught_up, result.is_fenced, result.should_shutdown

    async def run(self) -> None:
        """The active controller's duties, every ``min(0.25 s, session / 4)`` while this node is
        the Raft leader: fence the brokers whose session expired, and every
        ``rebalance_interval_s`` (with ``auto_rebalance``) elect preferred leaders. A tick that
        comes more than half a session late (this process stalled) restarts the session clocks
        instead. Runs until cancelled."""
        tick = min(0.25, self.session_timeout_s / 4)
        last_rebalance = last_tick = time.monotonic()
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            stalled_s, last_tick = now - last_tick - tick, now
            if not self.quorum.is_leader or self.leader_since is None:
                last_rebalance = now
                continue
            if stalled_s > self.session_timeout_s / 2:
                # This process stalled (SIGSTOP, swap, an overloaded host): the brokers'
                # heartbeats of that time wait unread in its sockets, so a silence it measured
                # across its own stall says nothing about them. Restart the session clocks, as
                # on becoming the active controller, instead of fencing healthy brokers.
                logger.warning(
                    "active controller stalled %.1f s: restarting broker session timers", stalled_s
                )
                self.fence_after = now + self.session_timeout_s
                continue
            try:
                await self.fence_expired_brokers()
                if self.auto_rebalance and time.monotonic() - last_rebalance >= self.rebalance_interval_s:
                    last_rebalance = time.monotonic()
                    await self.rebalance_leaders()
            except ControllerUnavailable:
                continue
            except Exception:  # noqa: BLE001 - the controller keeps running
                logger.exception("active controller duties failed")

    async def fence_expired_brokers(self) -> None:
        """Fence (``FenceBrokerCmd``, one log entry each) every unfenced broker with no
        heartbeat for ``session_timeout_s`` (Kafka's ``QuorumController.maybeFenceStaleBroker``),
        unless this controller became active less than half a session ago.

        Raises:
            ControllerUnavailable: the fence was not committed in time.
        """
        now = time.monotonic()
        image = self.quorum.image
        since = self.leader_since or now
        for broker_id, registration in image.brokers.items():
            if registration.fenced:
                self.fencing.pop(broker_id, None)
                continue
            last = self.last_heartbeat.get(broker_id, since)
            if (
                now - last <= self.session_timeout_s
                or now < self.fence_after
                or self.fencing.get(broker_id) == registration.epoch
            ):
                continue
            self.fencing[broker_id] = registration.epoch
            logger.warning(
                "fencing broker %d (epoch %d): no heartbeat for %.1f s",
                broker_id,
                registration.epoch,
                now - last,
            )
            try:
                await self._submit(FenceBrokerCmd(broker_id, registration.epoch))
            finally:
                self.fencing.pop(broker_id, None)

    async def rebalance_leaders(self) -> None:
        """Preferred-leader election for the partitions of every broker that leads less than
        ``100 - imbalance_percentage`` % of the partitions it is preferred for (Kafka's
        ``auto.leader.rebalance.enable``, ``QuorumController.maybeBalancePartitionLeaders``).

        Raises:
            ControllerUnavailable: the election was not committed in time.
        """
        image = self.quorum.image
        candidates = MetadataStateMachine.imbalanced_partitions(image)
        if not candidates:
            return
        preferred_total: dict[int, int] = {}
        for topic in image.topics.values():
            for reg in topic.partitions.values():
                if reg.replicas:
                    preferred_total[reg.replicas[0]] = preferred_total.get(reg.replicas[0], 0) + 1
        by_broker: dict[int, list[tuple[str, int]]] = {}
        for name, index in candidates:
            candidate = image.partition(name, index)
            if candidate is None:  # candidates are listed from this image
                raise RuntimeError(f"partition {name}-{index} is not in the metadata image")
            by_broker.setdefault(candidate.replicas[0], []).append((name, index))
        wanted: list[tuple[str, int]] = []
        for broker, parts in by_broker.items():
            ratio = len(parts) / max(preferred_total.get(broker, 1), 1)
            if ratio * 100 > self.imbalance_percentage:
                wanted.extend(parts)
        if wanted:
            logger.info("auto preferred-leader election for %d partition(s)", len(wanted))
            await self._submit(ElectLeadersCmd(Election.PREFERRED, tuple(sorted(wanted))))
