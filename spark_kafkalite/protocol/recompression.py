"""A produced RecordBatch v2 rebuilt with another codec, as Kafka's leader does when a topic's
``compression.type`` differs from the batch's (``LogValidator.validateMessagesAndAssignOffsetsCompressed``
-> ``buildRecordsAndAssignOffsets``): the records are decompressed, appended again to a new
batch (``MemoryRecordsBuilder.appendWithOffset``: offset deltas 0..n-1, attributes 0, timestamp
deltas from the first record's timestamp, which becomes the ``baseTimestamp``; key, value and
headers unchanged) and the batch is compressed with the target codec and level, its CRC-32C
computed anew.

The new batch keeps the producer id, epoch, base sequence and transactional bit (idempotence and
transactions see the same batch), has CreateTime (the only ``message.timestamp.type`` topics have
here) and a max timestamp recomputed from the records. Its base offset and partition leader epoch
are the original's (0 and -1 from a client): the log patches both when it appends, as for any
batch. The per-record part runs in the compiled ``_record_rebuild`` when built (its pure-Python
twin otherwise, through :mod:`spark_kafkalite.protocol.native`); the codecs release the GIL.
"""

from __future__ import annotations

from spark_kafkalite.protocol.compression import COMPRESSION_NONE, iter_decompressed
from spark_kafkalite.protocol.native import RECORD_REBUILD, load_twin
from spark_kafkalite.protocol.record_batch import BatchHeader
from spark_kafkalite.protocol.record_batch_writer import seal_batch
from spark_kafkalite.protocol.record_layout import ATTR_TRANSACTIONAL, RECORD_BATCH_OVERHEAD

__all__ = ["rebuild_batch", "IMPLEMENTATION"]

_impl = load_twin(RECORD_REBUILD)
_rebuild_records = _impl.rebuild_records
IMPLEMENTATION: str = _impl.IMPLEMENTATION
"""``"native"`` or ``"pure-python"``: which twin rebuilds the records."""


Buffer = bytes | bytearray | memoryview


def rebuild_batch(
    batch: Buffer,
    header: BatchHeader,
    compression_type: int,
    level: int | None,
    *,
    max_uncompressed_bytes: int,
) -> bytes:
    """The client batch ``batch`` (one whole RecordBatch v2 whose CRC, counts and record framing
    were checked; ``header`` is its header) rebuilt with codec ``compression_type`` (0-4) at
    ``level`` (None: the codec's default; see :func:`~spark_kafkalite.protocol.compression.compress`).
    A compressed batch is decompressed streaming and may inflate to at most
    ``max_uncompressed_bytes``.

    Raises:
        MessageTooLargeError: the records decompress to more than ``max_uncompressed_bytes``.
        CorruptRecordError: undecompressable payload or malformed records.
        UnsupportedCompressionTypeError: a codec's library is missing.
    """
    end = header.size_bytes
    data: Buffer
    if header.compression_type == COMPRESSION_NONE:
        data, start = batch, RECORD_BATCH_OVERHEAD
    else:
        payload = memoryview(batch)[RECORD_BATCH_OVERHEAD:end]
        data = b"".join(iter_decompressed(payload, header.compression_type, max_uncompressed_bytes))
        start, end = 0, len(data)
    records, first_timestamp, max_timestamp = _rebuild_records(
        data,
        start,
        end,
        header.records_count,
        header.base_timestamp,
        header.max_timestamp,
        header.timestamp_type == 1,
    )
    return seal_batch(
        records,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=compression_type | (header.attributes & ATTR_TRANSACTIONAL),
        last_offset_delta=header.records_count - 1,
        base_timestamp=first_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=header.records_count,
        level=level,
    )
