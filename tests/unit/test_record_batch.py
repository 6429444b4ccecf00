"""RecordBatch v2: round trips (hypothesis), validation errors, and cross-checks against
kafka-python's independent implementation."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from spark_kafkalite.protocol.errors import CorruptRecordError, InvalidRecordError
from spark_kafkalite.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    assign_offsets,
    decode_batch,
    decode_batches,
    iter_batch_headers,
    read_header,
    validate_batch,
)
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from tests.unit._hypothesis_budget import examples

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=20), maybe_bytes)
record = st.tuples(
    maybe_bytes,
    maybe_bytes,
    st.integers(min_value=0, max_value=2**41),
    st.lists(header, max_size=4),
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(record, min_size=1, max_size=40), st.sampled_from([COMPRESSION_NONE, COMPRESSION_GZIP]))
def test_encode_decode_round_trip(records: list, codec: int) -> None:
    raw = encode_batch(records, compression_type=codec)
    header = validate_batch(raw)
    assert header.records_count == len(records)
    assert header.compression_type == codec
    decoded = decode_batch(raw)
    assert decoded.offsets == list(range(len(records)))
    assert decoded.keys == [r[0] for r in records]
    assert decoded.values == [r[1] for r in records]
    assert decoded.timestamps_ms == [r[2] for r in records]
    assert decoded.headers == [list(r[3]) for r in records]
    assert header.max_timestamp == max(r[2] for r in records)


@settings(max_examples=examples(50), deadline=None)
@given(st.lists(record, min_size=1, max_size=20), st.integers(0, 2**40), st.integers(0, 2**31 - 1))
def test_assign_offsets_keeps_crc_valid(records: list, base: int, epoch: int) -> None:
    raw = bytearray(encode_batch(records))
    assign_offsets(raw, base, epoch)
    header = validate_batch(raw)
    assert (header.base_offset, header.partition_leader_epoch) == (base, epoch)
    assert decode_batch(raw).offsets == [base + i for i in range(len(records))]


def test_our_batch_decodes_with_kafka_python() -> None:
    records = [(b"k%d" % i, b"value-%d" % i, 1_700_000_000_000 + i, [("h", b"x%d" % i)]) for i in range(50)]
    raw = encode_batch(records)
    theirs = list(DefaultRecordBatch(bytearray(raw)))
    assert [r.key for r in theirs] == [r[0] for r in records]
    assert [r.value for r in theirs] == [r[1] for r in records]
    assert [r.timestamp for r in theirs] == [r[2] for r in records]
    assert [list(r.headers) for r in theirs] == [r[3] for r in records]


def test_kafka_python_batch_decodes_with_ours() -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(30):
        builder.append(
            i,
            timestamp=1_600_000_000_123 + i,
            key=None if i % 3 == 0 else b"key%d" % i,
            value=b"v" * i,
            headers=[("a", b"1")] if i % 2 else [],
        )
    raw = bytes(builder.build())
    decoded = decode_batch(raw)
    assert decoded.keys == [None if i % 3 == 0 else b"key%d" % i for i in range(30)]
    assert decoded.values == [b"v" * i for i in range(30)]
    assert decoded.timestamps_ms == [1_600_000_000_123 + i for i in range(30)]
    assert decoded.headers == [[("a", b"1")] if i % 2 else [] for i in range(30)]


def _batch() -> bytearray:
    return bytearray(encode_batch([(b"k", b"v", 1000, []), (None, b"w", 1001, [])]))


def test_crc_mismatch_is_corrupt() -> None:
    raw = _batch()
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batch(raw)


def test_truncated_batch_is_corrupt() -> None:
    raw = _batch()
    with pytest.raises(CorruptRecordError, match="truncated"):
        validate_batch(raw[:-3])
    with pytest.raises(CorruptRecordError):
        read_header(raw[:30])


def test_wrong_magic_and_counts_are_invalid() -> None:
    raw = _batch()
    raw[16] = 1
    with pytest.raises(InvalidRecordError, match="magic"):
        validate_batch(raw)
    raw = _batch()
    struct.pack_into(">i", raw, 57, 5)  # records count (outside... inside CRC) -> fix CRC
    import crc32c

    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(InvalidRecordError, match="count"):
        validate_batch(raw)


def test_iter_headers_stops_at_partial_tail() -> None:
    a = encode_batch([(b"a", b"1", 1, [])])
    b = encode_batch([(b"b", b"2", 2, [])], base_offset=1)
    blob = a + b + b[:20]
    assert [pos for pos, _ in iter_batch_headers(blob)] == [0, len(a)]
    assert [d.values for d in decode_batches(blob)] == [[b"1"], [b"2"]]


def test_log_append_time_batches_use_max_timestamp() -> None:
    raw = encode_batch([(None, b"x", 5, []), (None, b"y", 9, [])], timestamp_type=1)
    assert decode_batch(raw).timestamps_ms == [9, 9]


def test_compacted_batch_with_offset_holes_decodes_but_fails_strict_validation() -> None:
    # A batch as the log cleaner leaves it: 3 records spanning offsets 0..5 (kafka-python builds it).
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset in (0, 2, 5):
        builder.append(offset, timestamp=1000 + offset, key=b"k%d" % offset, value=b"v", headers=[])
    raw = bytes(builder.build())
    header = validate_batch(raw, strict_counts=False)
    assert (header.records_count, header.last_offset_delta) == (3, 5)
    with pytest.raises(InvalidRecordError, match="count"):
        validate_batch(raw)  # what the broker requires of produced batches
    assert decode_batch(raw).offsets == [0, 2, 5]


def test_record_framing_accepts_every_valid_batch_and_rejects_damage() -> None:
    from spark_kafkalite.protocol.record_batch import validate_record_framing

    for codec in (COMPRESSION_NONE, COMPRESSION_GZIP, 2, 3, 4):
        raw = encode_batch(
            [(b"k", b"v" * 300, 1, [("h", None)]), (None, None, 2, [])], compression_type=codec
        )
        validate_record_framing(raw, validate_batch(raw))
    raw = bytearray(encode_batch([(b"k", b"v", 1, []), (b"k2", b"v2", 2, [])]))
    raw[61] = 0x7F  # first record's length now runs past the batch
    with pytest.raises(CorruptRecordError):
        validate_record_framing(raw, read_header(raw))


def test_record_framing_rejects_a_length_varint_cut_by_the_batch_end() -> None:
    """A CRC-valid uncompressed batch whose last bytes start a length varint that never ends is
    CORRUPT_MESSAGE (CorruptRecordError), not an IndexError from the walk."""
    from spark_kafkalite.protocol.record_batch import validate_record_framing

    raw = bytearray(encode_batch([(b"k", b"v", 1, [])]))
    raw += b"\xff"  # a dangling varint continuation byte after the one record
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">i", raw, 57, 2)  # declare two records
    struct.pack_into(">i", raw, 23, 1)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptRecordError, match="ends inside a record length"):
        validate_record_framing(bytes(raw), validate_batch(bytes(raw)))
