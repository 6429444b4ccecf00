"""Batching of ISR changes into one controller command (Kafka's ``AlterPartitionManager``).

A partition leader asks the controller for every ISR expansion or shrink with AlterPartition
(KIP-497). Kafka's broker does not send one request per partition: its ``AlterPartitionManager``
queues the changes and keeps at most one AlterPartition request in flight, carrying every change
queued since the previous one. After a broker restarts, each of its thousands of partitions
needs one ISR expansion at about the same time; one Raft entry per partition would make the
controller's cost follow the partition count of the cluster instead of the number of rounds.

:class:`AlterPartitionManager` does the same over the Raft quorum: :meth:`submit` queues one
:class:`~broker.controller.controller_commands.AlterPartitionCmd`; a single sender task proposes
the queued ones as one :class:`~broker.controller.controller_commands.AlterPartitionsCmd` (at
most :data:`MAX_BATCH` per entry), and each caller gets its own partition's result. The state
machine checks every item on its own (partition-epoch compare-and-set, leader epoch, broker
epoch), exactly as it checks a single AlterPartition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from broker.controller.broker_lifecycle_manager import ControllerUnavailable
from broker.controller.controller_commands import AlterPartitionCmd, AlterPartitionsCmd, Command
from broker.controller.metadata_image import PartitionRegistration
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["AlterPartitionManager", "MAX_BATCH"]

logger = logging.getLogger(__name__)

MAX_BATCH = 500
"""Most partitions in one Raft entry (an AlterPartitionCmd pickles to ~200 bytes)."""

AlterResult = tuple[ErrorCode, PartitionRegistration | None]


class AlterPartitionManager:
    """Queues AlterPartition items and proposes them in batches, one batch in flight.

    Args:
        submit: ``await submit(command)`` -> the committed command's result; raises
            :class:`ControllerUnavailable` when the quorum does not answer in time.

    Attributes:
        batches_sent: Raft entries proposed so far (a count for tests and benchmarks).
    """

    def __init__(self, submit: Callable[[Command], Awaitable[Any]]) -> None:
        self._submit = submit
        self._queue: list[tuple[AlterPartitionCmd, asyncio.Future[AlterResult]]] = []
        self._sender: asyncio.Task[None] | None = None
        self.batches_sent = 0

    async def submit(self, item: AlterPartitionCmd) -> AlterResult:
        """Queue ``item``; returns its (error code, new registration or None) once the batch
        carrying it was committed, NOT_CONTROLLER when the quorum did not answer."""
        future: asyncio.Future[AlterResult] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._sender is None or self._sender.done():
            # started on the next loop iteration: every change queued until then joins the batch
            self._sender = asyncio.create_task(self._send_queued(), name="alter-partition-manager")
        return await future

    async def _send_queued(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            items = tuple(item for item, _ in batch)
            self.batches_sent += 1
            try:
                result = await self._submit(AlterPartitionsCmd(items))
            except ControllerUnavailable:
                result = ErrorCode.not_controller
            except Exception:  # noqa: BLE001 - the callers retry; the sender must go on
                logger.exception("AlterPartition batch of %d failed", len(items))
                result = ErrorCode.unknown_server_error
            for index, (_, future) in enumerate(batch):
                if future.done():
                    continue
                if isinstance(result, ErrorCode):
                    future.set_result((result, None))
                else:
                    future.set_result(result[index])
