"""One record-decoding corpus run against both implementations (issue #10): the compiled
``_record_decode`` and its pure-Python reference ``record_decode``. Covers hypothesis round trips,
batches written by kafka-python's independent encoder, all 4 codecs, control batches, compacted
offset holes, headers, null keys/values, LogAppendTime, and corrupt input; and the Arrow column
builder against the list decoder."""

from __future__ import annotations

import importlib
import struct
from pathlib import Path

import crc32c
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

from spark_kafkalite.protocol import record_decode as pure_module
from spark_kafkalite.protocol.errors import CorruptRecordError
from spark_kafkalite.protocol.record_batch import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    RECORD_BATCH_OVERHEAD,
    compress,
    iter_batch_headers,
    read_header,
    records_section,
    validate_batch,
)
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from spark_kafkalite.protocol.record_columns import to_arrow_arrays
from tests.unit._hypothesis_budget import examples


def _native_module():  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module("spark_kafkalite.protocol._record_decode")
    except ImportError as exc:  # .ci/run fails separately when the extension was not built
        pytest.skip(f"native extension not built: {exc}")


@pytest.fixture(params=["native", "pure"])
def impl(request):  # type: ignore[no-untyped-def]
    return _native_module() if request.param == "native" else pure_module


def _decode(impl, raw: bytes, pos: int = 0):  # type: ignore[no-untyped-def]
    header = validate_batch(raw, pos, strict_counts=False)
    data, start, end = records_section(raw, pos, header)
    return impl.decode_records(
        data,
        start,
        end,
        header.records_count,
        header.base_offset,
        header.base_timestamp,
        header.max_timestamp,
        header.timestamp_type == 1,
    )


def _columns(impl, raw: bytes, include_headers: bool = True, min_offset: int = -1, max_records: int = 2**40):  # type: ignore[no-untyped-def]
    builder = impl.ColumnBuilder(include_headers)
    for pos, header in iter_batch_headers(raw):
        if header.is_control:
            continue
        data, start, end = records_section(raw, pos, header)
        builder.append(
            data,
            start,
            end,
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp,
            header.timestamp_type == 1,
            header.timestamp_type,
            min_offset,
            max_records,
        )
    arrays = to_arrow_arrays(builder.finish())
    for a in arrays.values():
        a.validate(full=True)
    return arrays


def _encode_with_deltas(records, offset_deltas, base_offset=0, attributes=0, codec=COMPRESSION_NONE):  # type: ignore[no-untyped-def]
    """A batch whose records have the given offset deltas (as after log compaction: holes)."""

    def varint(out: bytearray, v: int) -> None:
        v = (v << 1) ^ (v >> 63)
        while v > 0x7F:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)

    body = bytearray()
    base_ts = min(r[2] for r in records)
    for (key, value, ts, headers), delta in zip(records, offset_deltas, strict=True):
        rec = bytearray([0])
        varint(rec, ts - base_ts)
        varint(rec, delta)
        for field in (key, value):
            if field is None:
                varint(rec, -1)
            else:
                varint(rec, len(field))
                rec += field
        varint(rec, len(headers))
        for hk, hv in headers:
            varint(rec, len(hk.encode()))
            rec += hk.encode()
            if hv is None:
                varint(rec, -1)
            else:
                varint(rec, len(hv))
                rec += hv
        varint(body, len(rec))
        body += rec
    payload = compress(bytes(body), codec)
    total = RECORD_BATCH_OVERHEAD + len(payload)
    out = bytearray(total)
    struct.pack_into(
        ">qiibIhiqqqhii",
        out,
        0,
        base_offset,
        total - 12,
        0,
        2,
        0,
        attributes | codec,
        offset_deltas[-1],
        base_ts,
        max(r[2] for r in records),
        -1,
        -1,
        -1,
        len(records),
    )
    out[RECORD_BATCH_OVERHEAD:] = payload
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
record = st.tuples(
    maybe_bytes,
    maybe_bytes,
    st.integers(min_value=0, max_value=2**41),
    st.lists(st.tuples(st.text(max_size=20), maybe_bytes), max_size=4),
)
CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(record, min_size=1, max_size=40), st.sampled_from(CODECS), st.integers(0, 2**40))
def test_round_trip_both_implementations(records: list, codec: int, base: int) -> None:
    raw = encode_batch(records, compression_type=codec, base_offset=base)
    expected = (
        [base + i for i in range(len(records))],
        [r[2] for r in records],
        [r[0] for r in records],
        [r[1] for r in records],
        [list(r[3]) for r in records],
    )
    for impl in (_native_module(), pure_module):
        assert _decode(impl, raw) == expected
        cols = _columns(impl, raw)
        assert cols["offset"].to_pylist() == expected[0]
        assert cols["key"].to_pylist() == expected[2]
        assert cols["value"].to_pylist() == expected[3]
        assert pc.cast(cols["timestamp"], pa.int64()).to_pylist() == [t * 1000 for t in expected[1]]
        assert cols["headers"].to_pylist() == [
            [{"key": k, "value": v} for k, v in hs] if hs else None for hs in expected[4]
        ]
        assert cols["timestampType"].to_pylist() == [0] * len(records)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_batches(impl, codec: str) -> None:  # type: ignore[no-untyped-def]
    """Batches built by kafka-python's independent DefaultRecordBatchBuilder."""
    codec_id = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec_id, is_transactional=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    rows = [
        (
            i,
            f"k{i}".encode() if i % 3 else None,
            b"v" * (i * 37 % 500) if i % 5 else None,
            1_700_000_000_000 + i,
        )
        for i in range(200)
    ]
    for offset, key, value, ts in rows:
        headers = [("h", b"x"), ("n", None)] if offset % 7 == 0 else []
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    raw = bytes(builder.build())
    offsets, timestamps, keys, values, headers = _decode(impl, raw)
    assert offsets == [r[0] for r in rows]
    assert keys == [r[1] for r in rows]
    assert values == [r[2] for r in rows]
    assert timestamps == [r[3] for r in rows]
    assert headers == [[("h", b"x"), ("n", None)] if o % 7 == 0 else [] for o in offsets]
    cols = _columns(impl, raw)
    assert cols["value"].to_pylist() == values
    assert cols["headers"].null_count == sum(1 for h in headers if not h)


def test_compacted_holes_and_min_offset(impl) -> None:  # type: ignore[no-untyped-def]
    records = [(b"k%d" % i, b"v%d" % i, 1000 + i, []) for i in range(5)]
    raw = _encode_with_deltas(records, [0, 3, 4, 9, 12], base_offset=100)
    assert _decode(impl, raw)[0] == [100, 103, 104, 109, 112]
    cols = _columns(impl, raw, min_offset=104, max_records=2)
    assert cols["offset"].to_pylist() == [104, 109]
    assert cols["key"].to_pylist() == [b"k2", b"k3"]


def test_log_append_time_uses_max_timestamp(impl) -> None:  # type: ignore[no-untyped-def]
    records = [(None, b"a", 5, []), (None, b"b", 9, [])]
    raw = _encode_with_deltas(records, [0, 1], attributes=0x08)
    assert _decode(impl, raw)[1] == [9, 9]
    cols = _columns(impl, raw)
    assert cols["timestampType"].to_pylist() == [1, 1]
    assert pc.cast(cols["timestamp"], pa.int64()).to_pylist() == [9000, 9000]


def test_control_batches_are_skipped_by_columns(impl) -> None:  # type: ignore[no-untyped-def]
    data = encode_batch([(b"k", b"v", 1, [])], base_offset=0)
    control = _encode_with_deltas([(b"\x00\x00\x00\x00", b"\x00" * 6, 2, [])], [0], 1, attributes=0x30)
    assert read_header(control).is_control
    cols = _columns(impl, data + control + encode_batch([(None, None, 3, [])], base_offset=2))
    assert cols["offset"].to_pylist() == [0, 2]
    assert cols["key"].to_pylist() == [b"k", None]
    assert cols["value"].to_pylist() == [b"v", None]


def test_corrupt_records_raise_and_roll_back(impl) -> None:  # type: ignore[no-untyped-def]
    good = encode_batch([(b"key", b"value", 1, [("h", b"1")])] * 3)
    data, start, end = records_section(good, 0, read_header(good))
    args = (3, 0, 1, 1, False)
    with pytest.raises(CorruptRecordError):
        impl.decode_records(data, start, end - 2, *args)  # truncated
    with pytest.raises(CorruptRecordError):
        impl.decode_records(data + b"\x00", start, end + 1, *args)  # trailing byte
    bad_utf8 = bytearray(data)
    bad_utf8[bad_utf8.index(b"h\x02") if b"h\x02" in bad_utf8 else bad_utf8.rindex(b"h")] = 0xFF
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        impl.decode_records(bytes(bad_utf8), start, end, *args)
    builder = impl.ColumnBuilder(True)
    builder.append(data, start, end, *args, 0, -1, 100)
    with pytest.raises(CorruptRecordError):
        builder.append(data, start, end - 2, *args, 0, -1, 100)
    assert len(builder) == 3  # the failed batch left nothing behind
    cols = to_arrow_arrays(builder.finish())
    assert cols["key"].to_pylist() == [b"key"] * 3


def test_first_null_after_valid_batches_and_a_rolled_back_batch(impl) -> None:  # type: ignore[no-untyped-def]
    """Validity bitmaps are built lazily (native: from the first null on): nulls that first
    appear in a later batch, after 9+ valid rows (a bitmap byte boundary), and after a failed
    batch that had nulls and was rolled back, still land on the right rows."""
    builder = impl.ColumnBuilder(False)

    def append(raw: bytes, cut: int = 0) -> int:
        header = read_header(raw)
        data, start, end = records_section(raw, 0, header)
        args = (
            header.records_count,
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp,
            False,
            0,
        )
        return int(builder.append(data, start, end - cut, *args, -1, 2**40))

    first = [(b"k%d" % i, b"v%d" % i, i, []) for i in range(11)]
    with_nulls = [(None, b"x", 1, []), (b"y", None, 2, []), (b"z", b"w", 3, [])]
    assert append(encode_batch(first, base_offset=0)) == 11
    with pytest.raises(CorruptRecordError):
        append(encode_batch(with_nulls, base_offset=11), cut=2)  # truncated: rolled back
    assert append(encode_batch([(b"a", b"b", 4, [])], base_offset=11)) == 1
    assert append(encode_batch(with_nulls, base_offset=12)) == 3
    cols = to_arrow_arrays(builder.finish())
    assert cols["key"].to_pylist() == [r[0] for r in first] + [b"a", None, b"y", b"z"]
    assert cols["value"].to_pylist() == [r[1] for r in first] + [b"b", b"x", None, b"w"]
    assert (cols["key"].null_count, cols["value"].null_count) == (1, 1)


def test_builders_agree_on_large_mixed_input() -> None:
    native = _native_module()
    batches = b"".join(
        encode_batch(
            [
                (None if i % 4 == 0 else b"k" * (i % 13), b"v" * (i % 300), i, [("a", None)] * (i % 3))
                for i in range(n)
            ],
            base_offset=sum(range(n)),
            compression_type=CODECS[n % 5],
        )
        for n in range(1, 60)
    )
    for include_headers in (False, True):
        a = pa.RecordBatch.from_pydict(_columns(native, batches, include_headers))
        b = pa.RecordBatch.from_pydict(_columns(pure_module, batches, include_headers))
        assert a.equals(b)
        assert a.num_rows == sum(range(1, 60))


GOLDEN = Path(__file__).resolve().parent.parent / "data" / "golden"


def _golden_expected() -> list[tuple[bytes | None, bytes | None, list, int]]:
    """The records tests/data/golden/make_golden.py produced."""
    out = []
    for i in range(30):
        key = None if i % 5 == 4 else f"k{i}".encode()
        value = None if i % 6 == 5 else f"v{i}".encode() * (i % 7 + 1)
        headers = [("h", str(i).encode()), ("n", None)] if i % 4 == 0 else []
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_librdkafka_golden_batches(impl, codec: str) -> None:  # type: ignore[no-untyped-def]
    """Batches written by librdkafka (confluent-kafka's producer), stored by the broker as sent."""
    raw = (GOLDEN / f"librdkafka-{codec}.bin").read_bytes()
    expected = _golden_expected()
    headers = [h for _pos, h in iter_batch_headers(raw)]
    assert [h.compression_type for h in headers] == [
        CODECS[["none", "gzip", "snappy", "lz4", "zstd"].index(codec)]
    ]
    offsets, timestamps, keys, values, hdrs = _decode(impl, raw)
    assert offsets == list(range(30))
    assert keys == [r[0] for r in expected]
    assert values == [r[1] for r in expected]
    assert hdrs == [r[2] for r in expected]
    assert timestamps == [r[3] for r in expected]
    cols = _columns(impl, raw)
    assert cols["key"].to_pylist() == keys
    assert cols["value"].to_pylist() == values
    assert cols["headers"].to_pylist() == [
        [{"key": k, "value": v} for k, v in h] if h else None for h in hdrs
    ]


def _walk(impl, data: bytes, p: int, limit: int, count: int):  # type: ignore[no-untyped-def]
    try:
        return impl.walk_records(data, p, limit, count)
    except IndexError:
        return "IndexError"
    except CorruptRecordError as exc:
        return f"CorruptRecordError: {exc}"


@settings(max_examples=examples(400), deadline=None)
@example(data=b"\x00\x00\x00" + b"\x80" * 9 + b"\x02", p=3, extra_limit=0, count=1)  # 10-byte varint
@given(
    data=st.binary(max_size=24) | st.lists(st.sampled_from([0, 1, 2, 4, 0x7F, 0x80, 0x81, 0xFF])).map(bytes),
    p=st.integers(0, 4),
    extra_limit=st.integers(-3, 3),
    count=st.integers(0, 6),
)
def test_walk_records_native_matches_pure(data: bytes, p: int, extra_limit: int, count: int) -> None:
    """The broker's record-framing walk (per record on the produce path) is native when built:
    same records seen, end position and errors (runs past the data, length <= 0, varint too long)
    as the pure-Python reference."""
    native = _native_module()
    limit = len(data) + extra_limit
    assert _walk(native, data, p, limit, count) == _walk(pure_module, data, p, limit, count)


@pytest.mark.parametrize(
    ("length_varint", "expected"),
    [
        (b"\x80\x80\x80\x80\x80\x01", "varint too long"),  # 6 bytes: a varlong, not a varint
        (b"\xfe\xff\xff\xff\x0f", None),  # 5 bytes: zig-zag 2**31 - 1, runs past the limit
        (b"\xfe\xff\xff\xff\x7f", None),  # bits above 32 dropped, as Java's int
    ],
)
def test_walk_records_reads_lengths_as_32_bit_varints(
    impl, length_varint: bytes, expected: str | None
) -> None:  # type: ignore[no-untyped-def]
    """A record length is a varint (Kafka's ``ByteUtils.readVarint``: at most 5 bytes, 32 bits)."""
    data = length_varint + b"x" * 8
    if expected is not None:
        with pytest.raises(CorruptRecordError, match=expected):
            impl.walk_records(data, 0, len(data), 1)
    else:
        assert impl.walk_records(data, 0, len(data), 1) == (1, 5 + 2**31 - 1)


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_walk_records_counts_real_batches(impl, codec: str) -> None:  # type: ignore[no-untyped-def]
    """Both walkers count every record of a kafka-python batch and end exactly at its end."""
    codec_id = {"none": 0, "gzip": 1, "lz4": 3}[codec]
    builder = DefaultRecordBatchBuilder(2, codec_id, False, -1, -1, -1, 1 << 20)
    for i in range(300):
        builder.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"v" * (i % 150), headers=[])
    raw = bytes(builder.build())
    header = validate_batch(raw)
    data, start, end = records_section(raw, 0, header)
    assert impl.walk_records(data, start, end, header.records_count) == (300, end)
