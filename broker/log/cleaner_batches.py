"""Rewriting one RecordBatch v2 with a subset of its records, as the log cleaner does (Kafka's
``MemoryRecords.filterTo`` building a batch with ``MemoryRecordsBuilder``), and the header-only
batch it keeps when none of a producer's last batch's records stays
(``DefaultRecordBatch.writeEmptyHeader``).

The rewritten batch keeps the original base offset, partition leader epoch, attributes
(compression codec, timestamp type, transactional bit), producer id / epoch and base sequence,
and every retained record keeps its offset delta, so offsets are preserved and the batch may
have holes (``records_count <= last_offset_delta + 1``). ``last_offset_delta`` stays the
original one, so the producer's last sequence survives (``MemoryRecordsBuilder
.overrideLastOffset``). Records are recompressed with the batch's own codec (Kafka's
``MemoryRecords.buildRetainedRecordsInto``: ``originalBatch.compressionType()``), at the level the
caller gives, written by ``record_batch_writer.append_record`` / ``seal_batch`` (what ``encode_batch`` uses). For LogAppendTime
batches the max timestamp is kept; for CreateTime it is recomputed from the retained records.
A delete horizon (KIP-534) goes into the base timestamp with attribute bit 6, the records'
timestamp deltas relative to it, so every record keeps its timestamp; a batch that already has
one keeps it.

The delete horizon (Kafka's ``RecordBatch.deleteHorizonMs``, KIP-534) is one per batch and
serves both what it delays: the tombstones (null-value records) of a data batch and the marker of
a control batch whose transaction is gone. The first cleaning pass that keeps such a batch
stamps it with now + ``delete.retention.ms`` (:func:`needs_delete_horizon`, Kafka's
``MemoryRecords.filterTo``); a later pass at or past that time (:func:`delete_horizon_passed`)
drops them. Only RecordBatch v2 has the field; this broker stores no other format, so Kafka's
pre-KIP-534 rule for magic < 2 (tombstones of a segment last modified more than
``delete.retention.ms`` before the last cleaned segment go) has nothing to apply to.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_kafkalite.protocol.record_batch import ATTR_DELETE_HORIZON, BatchHeader, DecodedBatch
from spark_kafkalite.protocol.record_batch_writer import append_record, seal_batch

__all__ = ["delete_horizon_passed", "empty_batch", "needs_delete_horizon", "rewrite_batch"]


def delete_horizon_passed(header: BatchHeader, now_ms: int) -> bool:
    """True when the batch ``header`` carries a delete horizon and ``now_ms`` (ms since the
    epoch) has reached it: its tombstones may go (Kafka's ``Cleaner.shouldRetainRecord``), and
    its marker if the transaction is gone (``checkBatchRetention``). False without a horizon."""
    horizon = header.delete_horizon_ms
    return horizon is not None and horizon <= now_ms


def needs_delete_horizon(decoded: DecodedBatch, keep: Sequence[int], marker_for_empty_txn: bool) -> bool:
    """True when the batch ``decoded``, kept with its records at indices ``keep``, must be
    rewritten with a delete horizon: it has none yet and a kept record is a tombstone or it is a
    marker whose transaction is gone (``marker_for_empty_txn``; Kafka's
    ``MemoryRecords.filterTo`` ``needToSetDeleteHorizon``)."""
    if decoded.header.delete_horizon_ms is not None:
        return False
    return marker_for_empty_txn or any(decoded.values[i] is None for i in keep)


def rewrite_batch(
    decoded: DecodedBatch,
    keep: Sequence[int],
    delete_horizon_ms: int | None = None,
    level: int | None = None,
) -> bytes:
    """The batch ``decoded`` reduced to the records at indices ``keep`` (ascending, non-empty),
    with ``delete_horizon_ms`` (ms since the epoch) stored as its delete horizon when given,
    compressed (with its own codec) at ``level`` (None: the codec's default).

    Raises:
        ValueError: ``keep`` is empty.
        UnsupportedCompressionTypeError: the batch's codec library is missing.
    """
    if not keep:
        raise ValueError("a rewritten batch needs at least one record")
    header = decoded.header
    base_offset = header.base_offset
    log_append_time = header.timestamp_type == 1
    attributes = header.attributes
    if delete_horizon_ms is None and header.delete_horizon_ms is not None:
        delete_horizon_ms = header.delete_horizon_ms
    if delete_horizon_ms is not None:
        attributes |= ATTR_DELETE_HORIZON
        base_ts = delete_horizon_ms
    else:
        base_ts = header.base_timestamp if log_append_time else decoded.timestamps_ms[keep[0]]
    max_ts = header.max_timestamp if log_append_time else max(decoded.timestamps_ms[i] for i in keep)
    body = bytearray()
    for i in keep:
        append_record(
            body,
            decoded.timestamps_ms[i] - base_ts if delete_horizon_ms is not None or not log_append_time else 0,
            decoded.offsets[i] - base_offset,
            decoded.keys[i],
            decoded.values[i],
            decoded.headers[i],
        )
    return seal_batch(
        body,
        base_offset=base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(keep),
        level=level,
    )


def empty_batch(header: BatchHeader) -> bytes:
    """The header-only batch (no record, ``records_count`` 0) that stands for the batch
    ``header`` once all its records are gone: same base offset, last offset delta, producer id,
    epoch, base sequence, partition leader epoch, timestamp type and transactional/control bits,
    no compression, base and max timestamp = its max timestamp (Kafka's
    ``DefaultRecordBatch.writeEmptyHeader``). Producer state replayed from it keeps the
    producer's epoch and last sequence."""
    return seal_batch(
        b"",
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes & ~ATTR_DELETE_HORIZON & ~header.compression_type,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=0,
    )
