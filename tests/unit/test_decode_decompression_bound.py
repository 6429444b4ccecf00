"""Readers bound the inflated size of a compressed batch (issue #14 item 1, client side): the
one decompression point (``records_section``) serves ``decode_batch`` and the native columnar
``append_batch``, and refuses a compression bomb with a CorruptRecordError naming the limit."""

from __future__ import annotations

import pytest

from spark_kafkalite.protocol.errors import CorruptRecordError, KafkaError
from spark_kafkalite.protocol.record_batch import (
    MAX_UNCOMPRESSED_RECORDS_BYTES,
    decode_batch,
    read_header,
    records_section,
)
from spark_kafkalite.protocol.record_batch_writer import encode_batch
from spark_kafkalite.protocol.record_columns import append_batch, new_builder

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _batch(value_bytes: int, codec: int) -> bytes:
    return encode_batch([(b"k", bytes(value_bytes), 1000, [])], compression_type=codec)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_a_batch_within_the_limit_decodes(codec: int) -> None:
    batch = _batch(100_000, codec)
    header = read_header(batch, 0)
    data, start, end = records_section(batch, 0, header, max_uncompressed_bytes=200_000)
    assert 100_000 < end - start < 200_000
    assert decode_batch(batch).values == [bytes(100_000)]


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_records_section_refuses_more_than_the_limit(codec: int) -> None:
    batch = _batch(300_000, codec)
    with pytest.raises(CorruptRecordError, match="more than 200000 bytes.*compression bomb"):
        records_section(batch, 0, read_header(batch, 0), max_uncompressed_bytes=200_000)


@pytest.mark.parametrize("codec", [1, 3, 4], ids=["gzip", "lz4", "zstd"])
def test_both_decode_paths_refuse_a_bomb_past_the_default_limit(codec: int) -> None:
    bomb = _batch(MAX_UNCOMPRESSED_RECORDS_BYTES + (1 << 20), codec)
    assert len(bomb) < 1 << 20  # a few KB on the wire
    with pytest.raises(CorruptRecordError, match=f"more than {MAX_UNCOMPRESSED_RECORDS_BYTES} bytes"):
        decode_batch(bomb)
    with pytest.raises(KafkaError, match="compression bomb"):
        append_batch(new_builder(), bomb, 0)
