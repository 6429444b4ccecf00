"""Producer id blocks on the controller side (Kafka's ``ProducerIdControlManager`` and
``ProducerIdsBlock``, KIP-730): the block size both controllers hand out, and the single-node
controller's persistence of the next block start.

:func:`allocate_block_in_file` keeps the start of the next block (written atomically and fsynced
before the block is handed out) in ``<first log dir>/producer-id-block``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from spark_kafkalite.atomic_file import write_atomically
from spark_kafkalite.protocol.errors import KafkaError

__all__ = ["PRODUCER_ID_BLOCK_FILE", "PRODUCER_ID_BLOCK_SIZE", "allocate_block_in_file"]

PRODUCER_ID_BLOCK_SIZE = 1000
"""Kafka's ``ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE``."""
PRODUCER_ID_BLOCK_FILE = "producer-id-block"
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
