"""Kafka's offset checkpoint files (``OffsetCheckpointFile``): ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and ``replication-offset-checkpoint`` in each log dir.

Format (text)::

    0                      <- version
    2                      <- number of entries
    my-topic 0 1234        <- topic partition offset
    my-topic 1 99
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from spark_kafkalite.atomic_file import write_atomically

__all__ = [
    "read_offset_checkpoint",
    "write_offset_checkpoint",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "REPLICATION_OFFSET_CHECKPOINT_FILE",
]

logger = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
_VERSION = 0


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} from ``path``; empty if the file is missing or malformed
    (a malformed file is logged and ignored: the caller falls back to a full recovery)."""
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _VERSION:
            raise ValueError(f"unsupported version {lines[0]!r}")
        count = int(lines[1])
        result: dict[tuple[str, int], int] = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            result[(topic, int(partition))] = int(offset)
        if len(result) != count:
            raise ValueError(f"expected {count} entries, found {len(result)}")
        return result
    except (ValueError, IndexError) as exc:
        logger.warning("ignoring malformed checkpoint file %s: %s", path, exc)
        return {}


def write_offset_checkpoint(
    path: Path, offsets: Mapping[tuple[str, int], int], *, sync: bool = False
) -> None:
    """Atomically replace ``path`` (:func:`spark_kafkalite.atomic_file.write_atomically`); durably when
    ``sync``."""
    body = [str(_VERSION), str(len(offsets))]
    body += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    write_atomically(Path(path), "\n".join(body) + "\n", fsync=sync)
