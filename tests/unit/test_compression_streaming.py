"""Streaming decompression with a bounded output (compression bombs) and the chunked record
framing walk that validates compressed produce batches without inflating them whole."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafkalite.protocol.compression import compress, iter_decompressed
from spark_kafkalite.protocol.errors import CorruptRecordError, MessageTooLargeError
from spark_kafkalite.protocol.record_batch import (
    RECORD_BATCH_OVERHEAD,
    _RecordWalker,
    _walk_records,
    validate_batch,
    validate_record_framing,
)
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from tests.unit._hypothesis_budget import examples

CODECS = (1, 2, 3, 4)
DATA = b"".join(b"record %d of a compressible section; " % i for i in range(20000))


@pytest.mark.parametrize("codec", CODECS)
def test_iter_decompressed_round_trips_in_bounded_chunks(codec: int) -> None:
    chunks = list(iter_decompressed(compress(DATA, codec), codec, len(DATA)))
    assert b"".join(chunks) == DATA
    if codec in (1, 3):  # gzip / lz4 honour the chunk size exactly
        assert max(map(len, chunks)) <= 64 * 1024


@pytest.mark.parametrize("codec", CODECS)
def test_iter_decompressed_stops_at_the_limit(codec: int) -> None:
    with pytest.raises(MessageTooLargeError, match="kafkalite.message.max.uncompressed.bytes"):
        for _ in iter_decompressed(compress(DATA, codec), codec, len(DATA) - 1):
            pass


@pytest.mark.parametrize("codec", CODECS)
def test_iter_decompressed_rejects_truncated_streams(codec: int) -> None:
    packed = compress(DATA, codec)
    with pytest.raises(CorruptRecordError):
        for _ in iter_decompressed(packed[: len(packed) - 7], codec, 10 * len(DATA)):
            pass


def test_gzip_bomb_is_stopped_without_inflating_it() -> None:
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = b"".join(bomb.compress(b"\0" * (1 << 20)) for _ in range(16)) + bomb.flush()
    seen = 0
    with pytest.raises(MessageTooLargeError):
        for chunk in iter_decompressed(packed, 1, 4 << 20):
            seen += len(chunk)
    assert seen <= 4 << 20
    assert len(gzip.decompress(packed)) == 16 << 20  # the bomb is a valid gzip stream


@settings(max_examples=examples(200), deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=0, max_value=400), min_size=1, max_size=12),
    cut=st.integers(min_value=1, max_value=300),
    damage=st.sampled_from(["none", "truncate", "extra", "count+1", "count-1"]),
)
def test_chunked_walk_agrees_with_the_whole_walk(sizes: list[int], cut: int, damage: str) -> None:
    records = [(b"k", b"v" * size, i, []) for i, size in enumerate(sizes)]
    raw = encode_batch(records)
    section = raw[RECORD_BATCH_OVERHEAD:]
    count = len(sizes)
    if damage == "truncate":
        section = section[:-1]
    elif damage == "extra":
        section += b"\x02\x00"
    elif damage == "count+1":
        count += 1
    elif damage == "count-1":
        count -= 1

    def whole() -> tuple[int, int]:
        try:
            n, p = _walk_records(section, 0, len(section), count)
        except IndexError:
            return -1, -1
        return n, len(section) - p

    walker = _RecordWalker(count)
    for start in range(0, len(section), cut):
        walker.feed(section[start : start + cut])
    n, extra = walker.finish()
    expected_n, expected_extra = whole()
    ok = (n, extra) == (count, 0)
    assert ok == ((expected_n, expected_extra) == (count, 0))
    assert ok == (damage == "none")


@pytest.mark.parametrize("codec", CODECS)
def test_framing_of_a_compressed_batch_is_bounded(codec: int) -> None:
    raw = encode_batch([(None, b"\0" * (4 << 20), 1, [])], compression_type=codec)
    header = validate_batch(raw)
    validate_record_framing(raw, header, max_uncompressed_bytes=5 << 20)
    with pytest.raises(MessageTooLargeError):
        validate_record_framing(raw, header, max_uncompressed_bytes=1 << 20)
