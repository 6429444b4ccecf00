"""Kafka's RecordBatch v2 layout (KIP-98, ``DefaultRecordBatch`` / ``DefaultRecord``): the byte
offsets of the batch header's fields, its attribute bits and the framing sizes, defined once. The
pure-Python codecs (:mod:`~spark_kafkalite.protocol.record_batch`,
:mod:`~spark_kafkalite.protocol.record_encode`) use them as they are; the compiled ones
(``_record_encode.pyx``) copy them into C variables when they are imported.

Header, big-endian: baseOffset int64 @0, batchLength int32 @8 (the bytes after it), partition
leader epoch int32 @12, magic int8 @16, CRC-32C uint32 @17 (over attributes..end), attributes
int16 @21, lastOffsetDelta int32 @23, baseTimestamp int64 @27, maxTimestamp int64 @35, producerId
int64 @43, producerEpoch int16 @51, baseSequence int32 @53, records count int32 @57, records @61.
"""

from __future__ import annotations

import struct

__all__ = [
    "HEADER",
    "LENGTH_OFFSET",
    "PARTITION_LEADER_EPOCH_OFFSET",
    "MAGIC_OFFSET",
    "CRC_OFFSET",
    "ATTRIBUTES_OFFSET",
    "LAST_OFFSET_DELTA_OFFSET",
    "BASE_TIMESTAMP_OFFSET",
    "MAX_TIMESTAMP_OFFSET",
    "PRODUCER_ID_OFFSET",
    "PRODUCER_EPOCH_OFFSET",
    "BASE_SEQUENCE_OFFSET",
    "RECORDS_COUNT_OFFSET",
    "RECORD_BATCH_OVERHEAD",
    "LOG_OVERHEAD",
    "MAGIC_V2",
    "ATTR_COMPRESSION_MASK",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
    "MAX_RECORD_OVERHEAD",
    "batch_attributes",
]

HEADER = struct.Struct(">qiibIhiqqqhii")
"""The 61-byte header, field by field (``BatchHeader``'s order)."""

LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
"""Also where the CRC-32C's range starts (attributes..end)."""
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORD_BATCH_OVERHEAD = 61
"""The header's size: where the records start (Java ``RECORD_BATCH_OVERHEAD``)."""
LOG_OVERHEAD = 12
"""baseOffset + batchLength: the bytes of a batch that ``batchLength`` does not count."""
MAGIC_V2 = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08
"""Set: LogAppendTime; clear: CreateTime."""
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40
"""KIP-534: baseTimestamp holds the delete horizon of a cleaned batch."""

MAX_RECORD_OVERHEAD = 21
"""Upper bound of one record's framing (length, attributes, timestamp and offset deltas,
key/value lengths, header count varints): Java ``DefaultRecord.MAX_RECORD_OVERHEAD``."""


def batch_attributes(compression_type: int, timestamp_type: int, is_transactional: bool) -> int:
    """The attributes int16 of a batch with the codec id ``compression_type`` (0-4), timestamp
    type 0 (CreateTime) or 1 (LogAppendTime) and the transactional bit."""
    attributes = compression_type & ATTR_COMPRESSION_MASK
    if timestamp_type:
        attributes |= ATTR_TIMESTAMP_TYPE
    if is_transactional:
        attributes |= ATTR_TRANSACTIONAL
    return attributes
