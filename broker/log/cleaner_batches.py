"""Rewriting one RecordBatch v2 with a subset of its records, as the log cleaner does (Kafka's
``MemoryRecords.filterTo`` building a batch with ``MemoryRecordsBuilder``).

The rewritten batch keeps the original base offset, partition leader epoch, attributes
(compression codec, timestamp type, transactional bit), producer id / epoch and base sequence,
and every retained record keeps its offset delta, so offsets are preserved and the batch may
have holes (``records_count <= last_offset_delta + 1``). ``last_offset_delta`` becomes the last
retained record's delta. Records are recompressed with the batch's own codec, written by
``record_batch.append_record`` / ``seal_batch`` (what ``encode_batch`` uses). For LogAppendTime
batches the max timestamp is kept; for CreateTime it is recomputed from the retained records.
"""

from __future__ import annotations

from collections.abc import Sequence

from spark_kafkalite.protocol.record_batch import DecodedBatch, append_record, seal_batch

__all__ = ["rewrite_batch"]


def rewrite_batch(decoded: DecodedBatch, keep: Sequence[int]) -> bytes:
    """The batch ``decoded`` reduced to the records at indices ``keep`` (ascending, non-empty).

    Raises:
        ValueError: ``keep`` is empty.
        UnsupportedCompressionTypeError: the batch's codec library is missing.
    """
    if not keep:
        raise ValueError("a rewritten batch needs at least one record")
    header = decoded.header
    base_offset = header.base_offset
    log_append_time = header.timestamp_type == 1
    first_ts = decoded.timestamps_ms[keep[0]]
    base_ts = header.base_timestamp if log_append_time else first_ts
    max_ts = header.max_timestamp if log_append_time else max(decoded.timestamps_ms[i] for i in keep)
    body = bytearray()
    for i in keep:
        append_record(
            body,
            0 if log_append_time else decoded.timestamps_ms[i] - base_ts,
            decoded.offsets[i] - base_offset,
            decoded.keys[i],
            decoded.values[i],
            decoded.headers[i],
        )
    return seal_batch(
        body,
        base_offset=base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes,
        last_offset_delta=decoded.offsets[keep[-1]] - base_offset,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(keep),
    )
