"""Record encoding (issue #10 items 3-4): one corpus run against the compiled ``_record_encode``
and its pure-Python twin ``record_encode``. Native and pure must produce the same bytes; every
batch is decoded by our decoder and by kafka-python's ``DefaultRecordBatch`` (an independent
implementation), with all 4 codecs, headers, null keys and values; murmur2 is checked against
Kafka's ``UtilsTest.testMurmur2`` vectors and kafka-python's implementation."""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from kafka.record.default_records import DefaultRecordBatch

from spark_kafkalite.protocol import record_encode as pure
from spark_kafkalite.protocol.record_batch import decode_batch, validate_batch
from tests.unit._hypothesis_budget import examples

try:
    native: ModuleType | None = importlib.import_module("spark_kafkalite.protocol._record_encode")
except ImportError:  # .ci/run fails when the extension is not built; here both paths run when present
    native = None

IMPLS = [pytest.param(pure, id="pure")] + [
    pytest.param(native, id="native", marks=pytest.mark.skipif(native is None, reason="not built"))
]
CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

# Kafka's UtilsTest.testMurmur2
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
header = st.tuples(st.text(max_size=10), maybe_bytes)
record = st.tuples(
    maybe_bytes, maybe_bytes, st.integers(0, 2**41), st.lists(header, max_size=3)
)  # key, value, timestamp_ms, headers


def kafka_python_decode(
    data: bytes,
) -> list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]]]]:
    batch = DefaultRecordBatch(bytearray(data))
    assert batch.validate_crc()
    return [(r.key, r.value, r.timestamp, list(r.headers)) for r in batch]


@pytest.mark.parametrize("impl", IMPLS)
def test_murmur2_matches_kafka_vectors(impl: ModuleType) -> None:
    for data, expected in KAFKA_MURMUR2.items():
        assert impl.murmur2(data) == expected


@pytest.mark.parametrize("impl", IMPLS)
@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=64))
def test_murmur2_matches_kafka_python(impl: ModuleType, data: bytes) -> None:
    assert impl.murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)


@pytest.mark.parametrize("impl", IMPLS)
def test_key_hashes_of_an_arrow_column(impl: ModuleType) -> None:
    keys = pa.array(["21", None, "foobar", ""]).slice(0, 4)
    assert list(impl.key_hashes(keys)) == [
        -973932308 & 0x7FFFFFFF,
        -1,
        -790332482 & 0x7FFFFFFF,
        pure.murmur2(b"") & 0x7FFFFFFF,
    ]
    sliced = pa.array([b"x", b"21", None]).slice(1)
    assert list(impl.key_hashes(sliced)) == [-973932308 & 0x7FFFFFFF, -1]


@pytest.mark.parametrize("impl", IMPLS)
@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(records=st.lists(record, min_size=1, max_size=20), codec=st.sampled_from(CODECS))
def test_builder_round_trip(impl: ModuleType, records: list, codec: int) -> None:
    builder = impl.MemoryRecordsBuilder()
    sizes = [builder.append(k, v, ts, hs) for k, v, ts, hs in records]
    assert builder.record_count == len(records) and builder.size_bytes == sum(sizes)
    data = builder.build(producer_id=7, producer_epoch=1, base_sequence=3, compression_type=codec)
    header = validate_batch(data)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 3)
    assert header.base_timestamp == records[0][2]
    assert header.max_timestamp == max(r[2] for r in records)
    decoded = decode_batch(data)
    expected = [(k, v, ts, [(hk, hv) for hk, hv in hs]) for k, v, ts, hs in records]
    assert (
        list(zip(decoded.keys, decoded.values, decoded.timestamps_ms, decoded.headers, strict=True))
        == expected
    )
    assert kafka_python_decode(data) == expected


@pytest.mark.skipif(native is None, reason="native extension not built")
@settings(max_examples=examples(60), deadline=None)
@given(records=st.lists(record, min_size=1, max_size=20), codec=st.sampled_from([0, 1, 3, 4]))
def test_builder_native_and_pure_bytes_are_equal(records: list, codec: int) -> None:
    # snappy is left out: both sides call the same codec, and xerial framing is deterministic,
    # but gzip/lz4/zstd are enough to show the header and records match byte for byte
    outputs = []
    for impl in (pure, native):
        builder = impl.MemoryRecordsBuilder()  # type: ignore[union-attr]
        for k, v, ts, hs in records:
            builder.append(k, v, ts, hs)
        outputs.append(builder.build(compression_type=codec))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("impl", IMPLS)
def test_builder_rejects_bad_header_types(impl: ModuleType) -> None:
    builder = impl.MemoryRecordsBuilder()
    with pytest.raises(TypeError):
        builder.append(None, b"v", 0, [(1, b"x")])
    with pytest.raises(TypeError):
        builder.append(None, b"v", 0, [("k", 5)])
    assert builder.record_count == 0
    builder.append(None, b"v", 0, [("k", "text"), ("b", bytearray(b"y"))])
    assert decode_batch(builder.build()).headers == [[("k", b"text"), ("b", b"y")]]


arrow_row = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),  # key
    st.one_of(st.none(), st.binary(max_size=200)),  # value
    st.one_of(st.none(), st.integers(-(10**15), 10**15)),  # timestamp µs
    st.one_of(
        st.none(),
        st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))), max_size=3),
    ),
)


def arrow_columns(rows: list, skip: int) -> tuple[pa.Array, ...]:
    """Arrow arrays of ``rows`` sliced by ``skip`` (non-zero array offsets, as Arrow slices have)."""
    pad = [(b"pad", b"pad", 0, [("p", b"p")])] * skip
    full = pad + rows
    keys = pa.array([r[0] for r in full], pa.binary()).slice(skip)
    values = pa.array([r[1] for r in full], pa.binary()).slice(skip)
    stamps = pa.array([r[2] for r in full], pa.timestamp("us", tz="UTC")).slice(skip)
    headers = pa.array(
        [None if r[3] is None else [{"key": k, "value": v} for k, v in r[3]] for r in full], HEADERS_TYPE
    ).slice(skip)
    return values, keys, stamps, headers


@pytest.mark.parametrize("impl", IMPLS)
@settings(
    max_examples=examples(50), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(arrow_row, min_size=1, max_size=40),
    skip=st.integers(0, 3),
    max_batch=st.integers(61 + 10, 2000),
    data=st.data(),
)
def test_encode_rows_from_arrow(
    impl: ModuleType, rows: list, skip: int, max_batch: int, data: st.DataObject
) -> None:
    values, keys, stamps, headers = arrow_columns(rows, skip)
    columns = impl.ArrowRecordColumns(values, keys, stamps, headers, default_timestamp_ms=555)
    picked = data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=60))
    builders = impl.encode_rows(columns, np.array(picked, dtype=np.int64), max_batch, 1 << 30)
    decoded = []
    for b in builders:
        batch = b.build(compression_type=0)
        assert b.record_count == 1 or len(batch) <= max_batch
        decoded += kafka_python_decode(batch)
    expected = [
        (
            rows[i][0],
            rows[i][1],
            555 if rows[i][2] is None else rows[i][2] // 1000,
            [(k, v) for k, v in rows[i][3] or []],
        )
        for i in picked
    ]
    assert decoded == expected


@pytest.mark.skipif(native is None, reason="native extension not built")
@settings(max_examples=examples(50), deadline=None)
@given(
    rows=st.lists(arrow_row, min_size=1, max_size=40), skip=st.integers(0, 3), codec=st.sampled_from(CODECS)
)
def test_encode_rows_native_and_pure_bytes_are_equal(rows: list, skip: int, codec: int) -> None:
    arrays = arrow_columns(rows, skip)
    order = np.arange(len(rows))[::-1].copy()
    outputs = []
    for impl in (pure, native):
        columns = impl.ArrowRecordColumns(*arrays, default_timestamp_ms=1)  # type: ignore[union-attr]
        builders = impl.encode_rows(columns, order, 500, 1 << 30)  # type: ignore[union-attr]
        outputs.append([b.build(compression_type=codec if codec != 2 else 0) for b in builders])
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize("impl", IMPLS)
def test_encode_rows_names_a_record_that_is_too_large(impl: ModuleType) -> None:
    values = pa.array([b"a", b"b" * 500, b"c"])
    columns = impl.ArrowRecordColumns(values)
    with pytest.raises(pure.RecordTooLargeError) as info:
        impl.encode_rows(columns, np.arange(3), 16384, 300)
    assert info.value.row == 1 and info.value.size_bytes > 500


@pytest.mark.parametrize("impl", IMPLS)
def test_string_columns_are_utf8_bytes(impl: ModuleType) -> None:
    columns = impl.ArrowRecordColumns(pa.array(["välue", None]), pa.array(["k", None]))
    (builder,) = impl.encode_rows(columns, np.arange(2), 16384, 1 << 20)
    decoded = decode_batch(builder.build())
    assert decoded.values == ["välue".encode(), None] and decoded.keys == [b"k", None]


@pytest.mark.parametrize("implementation", ["native", "pure"])
def test_append_now_stamps_wall_clock_create_time(implementation: str) -> None:
    """``append_now`` (KafkaProducer.send without a timestamp) stamps CreateTime with the
    wall clock in ms, the same way in both builders, and returns it."""
    import importlib
    import time

    name = (
        "spark_kafkalite.protocol._record_encode"
        if implementation == "native"
        else "spark_kafkalite.protocol.record_encode"
    )
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        pytest.skip(f"native extension not built: {exc}")
    builder = module.MemoryRecordsBuilder()
    before = time.time_ns() // 1_000_000
    first = builder.append_now(b"k", b"v")
    second = builder.append_now(None, b"w", [("h", b"x")])
    after = time.time_ns() // 1_000_000
    assert before <= first <= second <= after
    assert builder.record_count == 2
    assert builder.base_timestamp == first and builder.max_timestamp == second
    reference = module.MemoryRecordsBuilder()
    reference.append(b"k", b"v", first)
    reference.append(None, b"w", second, [("h", b"x")])
    assert builder.build() == reference.build()


@pytest.mark.parametrize("impl", IMPLS)
@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(arrow_row, min_size=1, max_size=40), skip=st.integers(0, 3), split=st.integers(0, 40))
def test_encode_rows_continues_an_open_builder(impl: ModuleType, rows: list, skip: int, split: int) -> None:
    """The sink keeps each partition's last builder open across Arrow batches: rows encoded in two
    calls (the second continuing the first call's last builder) give the same batches as one
    call over all rows, and every builder but the last is full."""
    arrays = arrow_columns(rows, skip)
    columns = impl.ArrowRecordColumns(*arrays, default_timestamp_ms=7)
    order = np.arange(len(rows))
    whole = [b.build() for b in impl.encode_rows(columns, order, 400, 1 << 30)]
    split = min(split, len(rows))
    first = impl.encode_rows(columns, order[:split], 400, 1 << 30)
    open_builder = first.pop() if first else None
    second = impl.encode_rows(columns, order[split:], 400, 1 << 30, open_builder)
    assert [b.build() for b in first + second] == whole
