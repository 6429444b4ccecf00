"""Partition directory naming and the ``partition.metadata`` file (Kafka's
``PartitionMetadataFile``)::

    version: 0
    topic_id: <Kafka Uuid string: URL-safe base64, 22 chars>
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from spark_kafkalite.atomic_file import fsync_dir, fsync_written, write_atomically
from spark_kafkalite.protocol.errors import InconsistentTopicIdError

__all__ = [
    "PARTITION_METADATA_FILE",
    "topic_partition_dir_name",
    "parse_topic_partition_dir",
    "format_topic_id",
    "parse_topic_id",
    "read_partition_metadata",
    "write_partition_metadata",
    "create_partition_metadata",
    "load_or_write_topic_id",
]

logger = logging.getLogger(__name__)

PARTITION_METADATA_FILE = "partition.metadata"


def topic_partition_dir_name(topic: str, partition: int) -> str:
    """``my.topic-3`` for (``my.topic``, 3)."""
    return f"{topic}-{partition}"


def parse_topic_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) from a directory name, splitting on the LAST '-' (topic names may
    contain '-', '.' and '_'); None if the name is not a partition directory."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or (len(part) > 1 and part[0] == "0"):
        return None
    return topic, int(part)


def format_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def parse_topic_id(text: str) -> uuid.UUID:
    """Parse Kafka's base64url form or the canonical ``str(uuid)`` form.

    Raises:
        ValueError: neither form.
    """
    text = text.strip()
    if len(text) == 22:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    return uuid.UUID(text)


def read_partition_metadata(partition_dir: Path) -> uuid.UUID | None:
    """The topic id stored in ``partition_dir/partition.metadata`` (None if missing/unparseable)."""
    path = Path(partition_dir) / PARTITION_METADATA_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id" and value.strip():
            try:
                return parse_topic_id(value)
            except ValueError:
                logger.warning("%s: unparseable topic_id %r", path, value)
    return None


def create_partition_metadata(partition_dir: Path, topic_id: uuid.UUID, fsync: bool = True) -> Path:
    """Create ``partition.metadata`` in a directory just created empty (one write, no temporary
    file: there is no previous version to keep; a file torn by a power loss reads as no topic
    id, which the metadata then supplies, see :func:`read_partition_metadata`); returns its path.

    Raises:
        FileExistsError: the file exists.
    """
    path = partition_dir / PARTITION_METADATA_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        data = memoryview(_contents(topic_id))
        while data:
            data = data[os.write(fd, data) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if fsync:
        fsync_dir(partition_dir)
    return path


def _contents(topic_id: uuid.UUID) -> bytes:
    return f"version: 0\ntopic_id: {format_topic_id(topic_id)}\n".encode()


def write_partition_metadata(partition_dir: Path, topic_id: uuid.UUID, fsync: bool = True) -> Path:
    """Atomically (and with ``fsync``, durably) write ``partition.metadata`` (Kafka's
    ``PartitionMetadataFile``); returns its path."""
    path = Path(partition_dir) / PARTITION_METADATA_FILE
    write_atomically(path, _contents(topic_id), fsync=fsync)
    return path


def load_or_write_topic_id(
    partition_dir: Path,
    topic_id: uuid.UUID | None,
    write_later: Callable[[Callable[[], None]], None] | None = None,
    *,
    created: bool = False,
) -> uuid.UUID | None:
    """The partition's topic id: the one stored in ``partition.metadata``, else ``topic_id``,
    which is then written there (Kafka's ``UnifiedLog.initializeTopicId``). ``created``: the
    directory was just created empty, so nothing is read and the file is created in one write.
    With ``write_later`` the file is replaced at once and its fsync is handed to
    ``write_later(fn)`` (off the event loop); without it the write is fsynced at once.

    Raises:
        InconsistentTopicIdError: ``topic_id`` differs from the stored one (a stale directory).
    """
    stored = None if created else read_partition_metadata(partition_dir)
    if stored is not None and topic_id is not None and stored != topic_id:
        raise InconsistentTopicIdError(
            f"log {partition_dir} belongs to topic id {stored}, not {topic_id} (stale partition directory)"
        )
    if stored is None and topic_id is not None:
        write = create_partition_metadata if created else write_partition_metadata
        path = write(partition_dir, topic_id, fsync=write_later is None)
        if write_later is not None:
            write_later(functools.partial(fsync_written, path))
        stored = topic_id
    return stored
