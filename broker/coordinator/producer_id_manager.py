"""Producer id allocation (Kafka's ``ProducerIdManager`` / ``RPCProducerIdManager``, KIP-730).

The broker hands out producer ids from blocks of :data:`PRODUCER_ID_BLOCK_SIZE` (1000) obtained
from the controller (``controller.allocate_producer_ids(broker_id, broker_epoch)``, Kafka's
AllocateProducerIds); the controller guarantees that blocks never overlap, across brokers and
restarts. When 90% of the current block is used the next one is prefetched. If no id is
available (the controller cannot be reached) ``generate_producer_id`` raises
``CoordinatorLoadInProgressError``, which clients retry (as Kafka does).

:func:`allocate_block_in_file` is the single-node controller's persistence: the start of the
next block is kept (written atomically and fsynced before the block is handed out) in
``<first log dir>/producer-id-block``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from pathlib import Path
from typing import Any

from broker.atomic_file import write_atomically
from spark_kafkalite.protocol.errors import CoordinatorLoadInProgressError, KafkaError

__all__ = [
    "PRODUCER_ID_BLOCK_SIZE",
    "PRODUCER_ID_BLOCK_FILE",
    "ProducerIdManager",
    "allocate_block_in_file",
]

logger = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000
PRODUCER_ID_BLOCK_FILE = "producer-id-block"
_PREFETCH_FRACTION = 0.9
_MAX_PRODUCER_ID = 2**63 - 1

_memory_lock = threading.Lock()
_memory_next: dict[int, int] = {}


def allocate_block_in_file(path: Path | None, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
    """Reserve ``(first_producer_id, count)`` persisted in ``path`` (JSON
    ``{"version": 1, "next_block_start": N}``), fsynced before returning. ``path=None`` keeps the
    counter in memory only (ids then repeat after a restart; tests only).

    Raises:
        OSError: the file cannot be written.
        KafkaError: the file is corrupt, or the id space is exhausted.
    """
    if path is None:
        with _memory_lock:
            start = _memory_next.get(0, 0)
            _memory_next[0] = start + block_size
        return start, block_size
    start = 0
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raw = None
    if raw is not None:
        try:
            data = json.loads(raw)
            start = int(data["next_block_start"])
        except (ValueError, KeyError, TypeError) as exc:
            raise KafkaError(f"corrupt producer id block file {path}: {exc}") from exc
    if start > _MAX_PRODUCER_ID - block_size:
        raise KafkaError("producer id space exhausted")
    write_atomically(path, json.dumps({"version": 1, "next_block_start": start + block_size}))
    return start, block_size


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
