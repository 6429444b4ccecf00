"""Appending to and reading ``__consumer_offsets`` partitions for the group coordinator.

One append path (contracts2.md "Groups"): :class:`ReplicaManagerAppender`,
``ReplicaManager.append_records(..., required_acks=-1, internal=True)`` (replicated, acks=all;
a single-node broker is the ISR-of-one case of the same path, as in Kafka's
``GroupMetadataManager.appendForGroup``).

Errors come back as Kafka error codes (ints), never exceptions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from broker.errors import error_code_for
from spark_kafkalite.protocol.control_records import ControlRecordType, control_record_type
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.record_batch import decode_batch, iter_batch_headers
from spark_kafkalite.protocol.record_batch_writer import encode_batch

__all__ = [
    "OffsetsAppender",
    "TransactionalAppender",
    "ReplicaManagerAppender",
    "read_partition",
    "read_partition_with_markers",
    "LoadedRecord",
    "LoadedMarker",
]

logger = logging.getLogger(__name__)

KeyValue = tuple[bytes, bytes | None]


class OffsetsAppender(Protocol):
    async def append(self, topic: str, partition: int, records: Sequence[KeyValue], timeout_ms: int) -> int:
        """Append ``records`` (key, value-or-None) as one batch; returns an error code (0 = ok)."""
        ...


class TransactionalAppender(Protocol):
    async def append_transactional(
        self,
        topic: str,
        partition: int,
        records: Sequence[KeyValue],
        producer_id: int,
        producer_epoch: int,
        timeout_ms: int,
    ) -> int:
        """Append ``records`` as one transactional batch of ``producer_id``/``producer_epoch``
        (the records count only once that transaction's COMMIT marker follows); error code."""
        ...


def _batch(records: Sequence[KeyValue], producer_id: int = -1, producer_epoch: int = -1) -> bytearray:
    now_ms = int(time.time() * 1000)
    return bytearray(
        encode_batch(
            [(key, value, now_ms, []) for key, value in records],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if producer_id >= 0 else -1,  # as Kafka's coordinators; no sequence checks
            is_transactional=producer_id >= 0,
        )
    )


class ReplicaManagerAppender:
    """Replicated path through ``ReplicaManager.append_records`` (acks=-1, internal topic)."""

    def __init__(self, replica_manager: Any) -> None:
        self.replica_manager = replica_manager

    async def append(self, topic: str, partition: int, records: Sequence[KeyValue], timeout_ms: int) -> int:
        return await self._append(topic, partition, _batch(records), timeout_ms)

    async def append_transactional(
        self,
        topic: str,
        partition: int,
        records: Sequence[KeyValue],
        producer_id: int,
        producer_epoch: int,
        timeout_ms: int,
    ) -> int:
        return await self._append(topic, partition, _batch(records, producer_id, producer_epoch), timeout_ms)

    async def _append(self, topic: str, partition: int, batch: bytearray, timeout_ms: int) -> int:
        try:
            results = await self.replica_manager.append_records(
                {(topic, partition): batch}, -1, timeout_ms, internal=True
            )
            return int(results[(topic, partition)].error_code)
        except Exception as exc:  # noqa: BLE001
            return int(error_code_for(exc, f"append to {topic}-{partition}"))


@dataclass(frozen=True, slots=True)
class LoadedRecord:
    """A keyed record; ``producer_id`` >= 0 when it is part of a transaction."""

    key: bytes
    value: bytes | None
    producer_id: int


@dataclass(frozen=True, slots=True)
class LoadedMarker:
    """A transaction marker (control batch) of ``producer_id``."""

    producer_id: int
    committed: bool


async def read_partition_with_markers(
    log: Any, chunk_bytes: int = 4 * 1024 * 1024
) -> AsyncIterator[LoadedRecord | LoadedMarker]:
    """Every keyed record of ``log`` from its start, in log order, with transactional records
    tagged by their producer id and the COMMIT / ABORT markers that end them (Kafka's
    ``GroupMetadataManager.doLoadGroupsAndOffsets``); other control batches are skipped. Yields
    to the event loop between chunks.

    The log end offset is read again before every chunk, as Kafka's load loop does
    (``while (currOffset < logEndOffset)``): records and markers appended while the reader is
    paused are read too. The iteration ends right after the check that found the reader caught
    up, with no await after it, so a caller that acts on the end of the iteration without
    awaiting (installs what it loaded) has seen everything appended before it acts.
    """
    offset = log.log_start_offset
    while offset < (end := log.log_end_offset):
        info = log.read(offset, chunk_bytes, max_offset=end)
        if not info.records:
            break
        buf = info.records
        next_offset = offset
        for pos, header in iter_batch_headers(buf):
            next_offset = max(next_offset, header.next_offset)
            if header.next_offset <= offset:
                continue
            if header.is_control:
                kind = control_record_type(buf, pos, header)
                if kind in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
                    yield LoadedMarker(header.producer_id, kind == ControlRecordType.COMMIT)
                continue
            batch = decode_batch(buf, pos)
            pid = header.producer_id if header.is_transactional else -1
            for rec_offset, key, value in zip(batch.offsets, batch.keys, batch.values, strict=True):
                if rec_offset < offset or key is None:
                    continue
                yield LoadedRecord(key, value, pid)
        if next_offset <= offset:
            logger.warning("%s: no progress loading at offset %d", log, offset)
            break
        offset = next_offset
        await asyncio.sleep(0)


async def read_partition(
    log: Any, chunk_bytes: int = 4 * 1024 * 1024
) -> AsyncIterator[tuple[bytes, bytes | None]]:
    """Every (key, value) of ``log`` from its start until it is caught up with its log end
    offset (read again before every chunk), skipping control batches and keyless records; the
    records of :func:`read_partition_with_markers` without their producer ids."""
    async for item in read_partition_with_markers(log, chunk_bytes):
        if isinstance(item, LoadedRecord):
            yield item.key, item.value


def storage_error_to_coordinator_error(code: int) -> int:
    """Kafka's mapping of append errors for group/offset writes (``GroupMetadataManager``):
    partition gone / not enough replicas / timeout -> COORDINATOR_NOT_AVAILABLE; not leader ->
    NOT_COORDINATOR; too large -> UNKNOWN_SERVER_ERROR; others unchanged."""
    if code in (
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
    ):
        return int(ErrorCode.coordinator_not_available)
    if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return int(ErrorCode.not_coordinator)
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return int(ErrorCode.unknown_server_error)
    return code
