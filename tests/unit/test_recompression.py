"""The leader's recompression to a topic's ``compression.type`` (issue #26 item 2).

One corpus runs against both twins of the record rebuild, the compiled ``_record_rebuild`` and its
pure-Python reference ``record_rebuild``: hypothesis records in every source codec, batches
written by librdkafka (tests/data/golden) and by kafka-python, LogAppendTime batches, sections
large enough for the native twin to release the GIL, and corrupt input (both twins raise the same
errors). The rebuilt records are compared byte for byte with what kafka-python's
``DefaultRecordBatchBuilder`` (a port of Java's ``MemoryRecordsBuilder``) writes for the same
records; then the produce path's decisions: which batches are rebuilt (Kafka's
``LogValidator`` in-place rule), which stay on the event loop, and ``max.message.bytes`` after
recompression. Compression levels (KIP-390) and the cleaner's level close the file.
"""

from __future__ import annotations

import importlib
import struct
from pathlib import Path
from types import ModuleType

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.apis import produce
from broker.log.cleaner_batches import rewrite_batch
from broker.log.log_config import LogConfig
from spark_kafkalite.protocol import record_rebuild as pure_module
from spark_kafkalite.protocol.compression import (
    COMPRESSION_LEVELS,
    compress,
    decompress,
    within_default_cost,
)
from spark_kafkalite.protocol.errors import CorruptRecordError, MessageTooLargeError
from spark_kafkalite.protocol.recompression import rebuild_batch
from spark_kafkalite.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    RECORD_BATCH_OVERHEAD,
    decode_batch,
    read_header,
    records_section,
    validate_batch,
)
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from tests.unit._hypothesis_budget import examples

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]
NAMES = ["none", "gzip", "snappy", "lz4", "zstd"]
GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"
TRANSACTIONAL = 0x10


def _native_module() -> ModuleType:
    try:
        return importlib.import_module("spark_kafkalite.protocol._record_rebuild")
    except ImportError as exc:  # .ci/run fails separately when the extension was not built
        pytest.skip(f"native extension not built: {exc}")


@pytest.fixture(params=["native", "pure"])
def impl(request: pytest.FixtureRequest) -> ModuleType:
    return _native_module() if request.param == "native" else pure_module


def _rebuild(impl: ModuleType, raw: bytes) -> tuple[bytes, int, int]:
    header = validate_batch(raw, strict_counts=False)
    data, start, end = records_section(raw, 0, header)
    return impl.rebuild_records(  # type: ignore[no-any-return]
        data,
        start,
        end,
        header.records_count,
        header.base_timestamp,
        header.max_timestamp,
        header.timestamp_type == 1,
    )


def _kafka_python_batch(
    records: list, *, producer: tuple[int, int, int] = (-1, -1, -1), txn: bool = False
) -> bytes:
    """The uncompressed batch kafka-python's builder (Java's ``MemoryRecordsBuilder`` rules:
    base timestamp = the first record's, offset deltas 0..n-1) writes for ``records``."""
    builder = DefaultRecordBatchBuilder(2, 0, int(txn), *producer, 1 << 24)
    for i, (key, value, ts, headers) in enumerate(records):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=list(headers)) is not None
    return bytes(builder.build())


def _without_epoch(batch: bytes) -> bytes:
    """Everything but the partition leader epoch (bytes 12-15, outside the CRC; the log sets it)."""
    return batch[:12] + batch[16:]


maybe_bytes = st.one_of(st.none(), st.binary(max_size=200))
record = st.tuples(
    maybe_bytes,
    maybe_bytes,
    st.integers(min_value=0, max_value=2**41),  # timestamps in any order: deltas may be negative
    st.lists(st.tuples(st.text(max_size=10), maybe_bytes), max_size=3),
)


# -- the records: both twins, against kafka-python's builder ----------------------------------


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(record, min_size=1, max_size=30), st.sampled_from(CODECS))
def test_rebuilt_records_are_kafka_pythons_bytes(records: list, codec: int) -> None:
    """Any source batch (our encoder stores the minimum timestamp as its base, so deltas differ
    from Kafka's builder) rebuilds to exactly the records kafka-python's builder writes, in both
    twins, with the first record's timestamp as base and the max timestamp."""
    raw = encode_batch(records, compression_type=codec)
    expected = _kafka_python_batch(records)
    for impl in (_native_module(), pure_module):
        section, first_ts, max_ts = _rebuild(impl, raw)
        assert section == expected[RECORD_BATCH_OVERHEAD:]
        assert first_ts == records[0][2]
        assert max_ts == max(r[2] for r in records)


@pytest.mark.parametrize("source", NAMES)
def test_librdkafka_batches_rebuild_to_every_codec(impl: ModuleType, source: str) -> None:
    """Batches written by librdkafka in each codec, rebuilt to each codec: a valid batch (CRC
    computed anew) in the target codec whose records decode to the same, and to exactly
    kafka-python's bytes when the target is none."""
    raw = (GOLDEN / f"librdkafka-{source}.bin").read_bytes()
    original = decode_batch(raw)
    records = list(zip(original.keys, original.values, original.timestamps_ms, original.headers, strict=True))
    section, _first, _max = _rebuild(impl, raw)
    assert section == _kafka_python_batch(records)[RECORD_BATCH_OVERHEAD:]
    header = read_header(raw)
    for target in CODECS:
        rebuilt = rebuild_batch(raw, header, target, None, max_uncompressed_bytes=1 << 20)
        new = validate_batch(rebuilt)
        assert new.compression_type == target and new.size_bytes == len(rebuilt)
        assert new.records_count == new.last_offset_delta + 1 == len(records)
        again = decode_batch(rebuilt)
        assert (again.keys, again.values, again.timestamps_ms, again.headers) == (
            original.keys,
            original.values,
            original.timestamps_ms,
            original.headers,
        )
        if target == COMPRESSION_NONE:
            assert _without_epoch(rebuilt) == _without_epoch(_kafka_python_batch(records))


@pytest.mark.parametrize("target", CODECS)
def test_rebuilt_batch_keeps_producer_fields_and_transaction_bit(target: int) -> None:
    records = [(b"k%d" % i, b"v" * (i * 30), 1_700_000_000_000 - i, [("h", b"%d" % i)]) for i in range(40)]
    raw = encode_batch(
        records, compression_type=COMPRESSION_LZ4, producer_id=42, producer_epoch=3, base_sequence=17,
        is_transactional=True,
    )  # fmt: skip
    rebuilt = rebuild_batch(raw, read_header(raw), target, None, max_uncompressed_bytes=1 << 20)
    new = validate_batch(rebuilt)
    assert (new.producer_id, new.producer_epoch, new.base_sequence) == (42, 3, 17)
    assert new.attributes == target | TRANSACTIONAL  # CreateTime, not control
    assert (new.base_timestamp, new.max_timestamp) == (records[0][2], records[0][2])
    assert (new.base_offset, new.partition_leader_epoch) == (0, -1)  # the log assigns both
    expected = _kafka_python_batch(records, producer=(42, 3, 17), txn=True)
    decompressed = (
        decompress(rebuilt[RECORD_BATCH_OVERHEAD:], target) if target else rebuilt[RECORD_BATCH_OVERHEAD:]
    )
    assert decompressed == expected[RECORD_BATCH_OVERHEAD:]


def test_log_append_time_records_take_the_max_timestamp(impl: ModuleType) -> None:
    """A client batch flagged LogAppendTime: every record's timestamp is the batch's max
    (``DefaultRecord.timestamp``), which the rebuilt CreateTime batch stores per record."""
    raw = bytearray(encode_batch([(b"a", b"1", 5, []), (b"b", b"2", 9, [])]))
    struct.pack_into(">h", raw, 21, 0x08)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    section, first_ts, max_ts = _rebuild(impl, bytes(raw))
    assert (first_ts, max_ts) == (9, 9)
    assert section == _kafka_python_batch([(b"a", b"1", 9, []), (b"b", b"2", 9, [])])[RECORD_BATCH_OVERHEAD:]
    rebuilt = rebuild_batch(
        bytes(raw), read_header(raw), COMPRESSION_ZSTD, None, max_uncompressed_bytes=1 << 20
    )
    assert read_header(rebuilt).timestamp_type == 0 and decode_batch(rebuilt).timestamps_ms == [9, 9]


def test_large_section_native_equals_pure() -> None:
    """Past 256 KiB the native twin runs without the GIL: same bytes as the pure twin."""
    records = [
        (b"key-%06d" % i, bytes([i % 251]) * (i % 200), 1_000 + (i * 7919) % 5000, []) for i in range(4000)
    ]
    raw = encode_batch(records, compression_type=COMPRESSION_ZSTD)
    assert read_header(raw).size_bytes < 1 << 18 < len(records_section(raw, 0, read_header(raw))[0])
    native = _rebuild(_native_module(), raw)
    assert native == _rebuild(pure_module, raw)
    assert native[0] == _kafka_python_batch(records)[RECORD_BATCH_OVERHEAD:]


# -- corrupt input: both twins raise the same ---------------------------------------------------


def _outcome(impl: ModuleType, data: bytes, count: int) -> object:
    try:
        return impl.rebuild_records(data, 0, len(data), count, 1000, 2000, False)
    except CorruptRecordError as exc:
        return f"CorruptRecordError: {exc}"


@settings(max_examples=examples(150), deadline=None)
@given(
    data=st.binary(max_size=40)
    | st.lists(st.sampled_from([0, 1, 2, 3, 4, 0x0A, 0x7F, 0x80, 0xFF])).map(bytes),
    count=st.integers(0, 4),
)
def test_native_matches_pure_on_any_bytes(data: bytes, count: int) -> None:
    assert _outcome(_native_module(), data, count) == _outcome(pure_module, data, count)


@pytest.mark.parametrize(
    ("mutate", "count_delta", "message"),
    [
        (lambda s: s, 1, "holds 3 records, its header declares 4"),
        (lambda s: s + b"\x00", 0, "1 trailing bytes"),
        (lambda s: s[:-1], 0, "ends inside a record"),
        (lambda s: b"\x00" + s[1:], 0, "invalid length 0"),
        (lambda s: s[:4] + b"\x03" + s[5:], 0, "negative key length -2"),  # key length varint
    ],
)
def test_corrupt_sections_raise(impl: ModuleType, mutate, count_delta: int, message: str) -> None:  # type: ignore[no-untyped-def]
    good = encode_batch([(b"k", b"v", 1, [])] * 3)  # records of 8 bytes: len, attr, ts, off, key...
    section = mutate(good[RECORD_BATCH_OVERHEAD:])
    with pytest.raises(CorruptRecordError, match=message):
        impl.rebuild_records(section, 0, len(section), 3 + count_delta, 1, 1, False)


def test_decompression_stops_at_the_bound() -> None:
    raw = encode_batch([(None, bytes(100_000), 1, [])], compression_type=COMPRESSION_GZIP)
    with pytest.raises(MessageTooLargeError):
        rebuild_batch(raw, read_header(raw), COMPRESSION_ZSTD, None, max_uncompressed_bytes=50_000)


# -- the produce path's decisions -------------------------------------------------------------


def _limits(compression_type: str, max_message_bytes: int = 1 << 20, **levels: int) -> produce._BatchLimits:
    config = LogConfig(compression_type=compression_type, **levels)
    return produce._BatchLimits(
        max_message_bytes, 9, 2**63 - 1, 2**63 - 1, 1 << 26, False, config.compression
    )


TP = ("t", 0)


@pytest.mark.parametrize(
    ("topic", "source", "rebuilt"),
    [
        ("producer", COMPRESSION_LZ4, False),  # producer never rebuilds
        ("producer", COMPRESSION_NONE, False),
        ("lz4", COMPRESSION_LZ4, False),  # same codec: in place, whatever the level
        ("uncompressed", COMPRESSION_NONE, False),  # none -> none: in place
        ("zstd", COMPRESSION_LZ4, True),
        ("gzip", COMPRESSION_NONE, True),
        ("uncompressed", COMPRESSION_SNAPPY, True),
    ],
)
def test_which_batches_are_rebuilt(topic: str, source: int, rebuilt: bool) -> None:
    raw = encode_batch(
        [(b"k%d" % i, b"value" * 20, 1000 + i, []) for i in range(20)], compression_type=source
    )
    limits = _limits(topic, compression_lz4_level=12)
    assert limits.rebuilds(raw) is rebuilt
    header, batch = limits.check(raw, 1 << 26, TP)
    if rebuilt:
        assert batch != raw and header.compression_type == limits.compression[0]  # type: ignore[index]
        assert decode_batch(batch).values == decode_batch(raw).values
    else:
        assert batch is raw and header == read_header(raw)


@pytest.mark.parametrize("topic", ["producer", "zstd"])
@pytest.mark.parametrize("codec", [COMPRESSION_NONE, COMPRESSION_LZ4])
def test_bad_framing_and_bombs_are_refused_whether_rebuilt_or_not(topic: str, codec: int) -> None:
    """A batch to rebuild skips the separate framing walk (the rebuild checks the records while it
    decompresses them once): the same errors as for a batch stored as sent."""
    raw = bytearray(encode_batch([(b"k", b"v" * 50, 1, [])] * 3, compression_type=codec))
    struct.pack_into(">i", raw, 23, 3)  # lastOffsetDelta 3 and recordsCount 4: declares 4 records
    struct.pack_into(">i", raw, 57, 4)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(CorruptRecordError):
        _limits(topic).check(bytes(raw), 1 << 26, TP)
    bomb = encode_batch([(None, bytes(200_000), 1, [])], compression_type=COMPRESSION_LZ4)
    with pytest.raises(MessageTooLargeError):
        _limits(topic).check(bomb, 100_000, TP)


def test_small_rebuilds_stay_on_the_loop_large_or_slow_ones_go_to_a_worker() -> None:
    small = encode_batch([(b"k", b"v" * 100, 1, [])] * 50, compression_type=COMPRESSION_LZ4)  # 5 KB
    large = encode_batch([(b"k", b"v" * 100, 1, [])] * 400, compression_type=COMPRESSION_LZ4)  # 44 KB
    assert len(large) < produce.INLINE_RECOMPRESS_BYTES  # small on the wire, large decompressed
    on_loop = produce._check_on_loop(small, _limits("zstd"), TP)
    assert on_loop is not None and on_loop[0].compression_type == COMPRESSION_ZSTD
    assert produce._check_on_loop(large, _limits("zstd"), TP) is None
    assert produce._check_on_loop(small, _limits("zstd", compression_zstd_level=19), TP) is None
    assert produce._check_on_loop(small, _limits("gzip", compression_gzip_level=9), TP) is None
    assert produce._check_on_loop(large, _limits("producer"), TP) is not None  # nothing to rebuild
    [worker] = produce._check_on_worker([(large, _limits("zstd", compression_zstd_level=19), TP)])
    assert not isinstance(worker, Exception) and worker[0].compression_type == COMPRESSION_ZSTD


def test_a_batch_that_outgrows_max_message_bytes_is_refused() -> None:
    """Kafka re-checks the size after a rebuild (``UnifiedLog.append``): incompressible records
    sent uncompressed grow a little when gzipped."""
    import os

    raw = encode_batch([(None, os.urandom(2000), 1, [])])
    limits = _limits("gzip", max_message_bytes=len(raw))
    with pytest.raises(MessageTooLargeError, match="after recompression"):
        limits.check(raw, 1 << 26, TP)
    [result] = produce._check_on_worker([(raw, limits, TP)])
    assert isinstance(result, MessageTooLargeError)


# -- levels (KIP-390) and the cleaner ---------------------------------------------------------


@pytest.mark.parametrize("codec", [COMPRESSION_GZIP, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_every_level_round_trips(codec: int) -> None:
    data = b"".join(b"record %d of a compressible batch; " % i for i in range(500))
    low, high, default = COMPRESSION_LEVELS[codec]
    outputs = {}
    for level in sorted({low, max(low, 1), default, high}):
        outputs[level] = compress(data, codec, level)
        assert decompress(outputs[level], codec) == data
    assert compress(data, codec) == outputs[default]
    assert outputs[max(low, 1)] != outputs[high]  # the level is applied


def test_levels_within_the_default_cost() -> None:
    assert within_default_cost(COMPRESSION_GZIP, -1) and within_default_cost(COMPRESSION_GZIP, 6)
    assert not within_default_cost(COMPRESSION_GZIP, 7)
    assert within_default_cost(COMPRESSION_LZ4, 9) and within_default_cost(COMPRESSION_LZ4, 1)
    assert not within_default_cost(COMPRESSION_LZ4, 10)
    assert within_default_cost(COMPRESSION_ZSTD, -5) and not within_default_cost(COMPRESSION_ZSTD, 4)
    assert within_default_cost(COMPRESSION_SNAPPY, None) and within_default_cost(COMPRESSION_NONE, None)


def test_cleaner_compresses_at_the_topic_level_of_the_batch_codec() -> None:
    """A rewritten batch keeps its own codec (Kafka's ``buildRetainedRecordsInto``), at the topic's
    level when that codec is the topic's ``compression.type`` and the default level otherwise."""
    records = [(b"k%d" % i, b"value %d " % i * 40, 1000 + i, []) for i in range(60)]
    decoded = decode_batch(encode_batch(records, compression_type=COMPRESSION_GZIP))
    keep = list(range(0, 60, 2))
    by_level = {}
    for config in (
        LogConfig(compression_type="gzip", compression_gzip_level=1),
        LogConfig(compression_type="gzip", compression_gzip_level=9),
        LogConfig(compression_type="zstd", compression_gzip_level=1),
    ):
        level = config.level_for(COMPRESSION_GZIP)
        rewritten = rewrite_batch(decoded, keep, level=level)
        assert read_header(rewritten).compression_type == COMPRESSION_GZIP
        assert decode_batch(rewritten).keys == [records[i][0] for i in keep]
        by_level[level] = len(rewritten)
    assert set(by_level) == {1, 9, None}
    assert by_level[9] < by_level[1]
    assert LogConfig(compression_type="producer").level_for(COMPRESSION_GZIP) is None
