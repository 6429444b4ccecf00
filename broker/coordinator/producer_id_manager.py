"""Producer id allocation (Kafka's ``ProducerIdManager`` / ``RPCProducerIdManager``, KIP-730).

The broker hands out producer ids from blocks of
:data:`~broker.controller.producer_id_block.PRODUCER_ID_BLOCK_SIZE` (1000) obtained
from the controller (``controller.allocate_producer_ids(broker_id, broker_epoch)``, Kafka's
AllocateProducerIds); the controller guarantees that blocks never overlap, across brokers and
restarts. When 90% of the current block is used the next one is prefetched. If no id is
available (the controller cannot be reached) ``generate_producer_id`` raises
``CoordinatorLoadInProgressError``, which clients retry (as Kafka does).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from spark_kafkalite.protocol.errors import CoordinatorLoadInProgressError, KafkaError

__all__ = ["ProducerIdManager"]

logger = logging.getLogger(__name__)

_PREFETCH_FRACTION = 0.9


class ProducerIdManager:
    """Hands out producer ids on one broker (see module docstring).

    Args:
        controller: has ``async allocate_producer_ids(broker_id, broker_epoch) -> (first, count)``.
        broker_id: this broker's node id.
        broker_epoch: callable returning this broker's current epoch (-1 when unknown).
    """

    def __init__(self, controller: Any, broker_id: int, broker_epoch: Any = None) -> None:
        self._controller = controller
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch or (lambda: -1)
        self._next_id = 0
        self._block_end = 0  # exclusive
        self._block_size = 0
        self._fetching: asyncio.Task[tuple[int, int]] | None = None
        self._lock = asyncio.Lock()

    async def _fetch_block(self) -> tuple[int, int]:
        first, count = await self._controller.allocate_producer_ids(self._broker_id, self._broker_epoch())
        if count <= 0 or first < 0:
            raise KafkaError(f"controller returned an invalid producer id block ({first}, {count})")
        logger.info("broker %d got producer id block [%d, %d)", self._broker_id, first, first + count)
        return first, count

    def _maybe_prefetch(self) -> None:
        used = self._block_size - (self._block_end - self._next_id)
        if self._fetching is None and self._block_size and used >= self._block_size * _PREFETCH_FRACTION:
            self._fetching = asyncio.get_running_loop().create_task(self._fetch_block())

    async def generate_producer_id(self) -> int:
        """The next unused producer id.

        Raises:
            CoordinatorLoadInProgressError: no block could be obtained from the controller.
        """
        async with self._lock:
            if self._next_id >= self._block_end:
                await self._install_next_block()
            pid = self._next_id
            self._next_id += 1
            self._maybe_prefetch()
            return pid

    async def _install_next_block(self) -> None:
        task = self._fetching  # the prefetched block, if one was requested
        self._fetching = None
        try:
            first, count = await task if task is not None else await self._fetch_block()
        except Exception as exc:  # noqa: BLE001 - controller unreachable, disk error, ...
            logger.warning("cannot allocate a producer id block: %s", exc)
            raise CoordinatorLoadInProgressError(f"producer id block not available yet: {exc}") from exc
        self._next_id, self._block_end, self._block_size = first, first + count, count
