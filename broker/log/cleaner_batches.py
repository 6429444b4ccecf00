"""Rewriting one RecordBatch v2 with a subset of its records, as the log cleaner does (Kafka's
``MemoryRecords.filterTo`` building a batch with ``MemoryRecordsBuilder``), and the header-only
batch it keeps when none of a producer's last batch's records stays
(``DefaultRecordBatch.writeEmptyHeader``).

The rewritten batch keeps the original base offset, partition leader epoch, attributes
(compression codec, timestamp type, transactional bit), producer id / epoch and base sequence,
and every retained record keeps its offset delta, so offsets are preserved and the batch may
have holes (``records_count <= last_offset_delta + 1``). ``last_offset_delta`` stays the
original one, so the producer's last sequence survives (``MemoryRecordsBuilder
.overrideLastOffset``). Records are recompressed with the batch's own codec, written by
``record_batch.append_record`` / ``seal_batch`` (what ``encode_batch`` uses). For LogAppendTime
batches the max timestamp is kept; for CreateTime it is recomputed from the retained records.
A delete horizon (KIP-534) goes into the base timestamp with attribute bit 6, the records'
timestamp deltas relative to it, so every record keeps its timestamp; a batch that already has
one keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_kafkalite.protocol.record_batch import (
    ATTR_DELETE_HORIZON,
    BatchHeader,
    DecodedBatch,
    append_record,
    seal_batch,
)

__all__ = ["rewrite_batch", "empty_batch"]


def rewrite_batch(decoded: DecodedBatch, keep: Sequence[int], delete_horizon_ms: int | None = None) -> bytes:
    """The batch ``decoded`` reduced to the records at indices ``keep`` (ascending, non-empty),
    with ``delete_horizon_ms`` (ms since the epoch) stored as its delete horizon when given.

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
