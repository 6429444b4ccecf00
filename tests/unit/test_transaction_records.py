"""``__transaction_state`` key/value codec (Kafka's TransactionLogKey / TransactionLogValue)."""

from __future__ import annotations

import struct

import pytest

from spark_kafkalite.protocol.transaction_records import (
    TransactionLogValue,
    TransactionRecordFormatError,
    decode_transaction_log_key,
    decode_transaction_log_value,
    encode_transaction_log_key,
    encode_transaction_log_value,
)


def test_key_layout_and_round_trip() -> None:
    key = encode_transaction_log_key("tx-1")
    assert key == b"\x00\x00\x00\x04tx-1"
    assert decode_transaction_log_key(key) == "tx-1"
    assert decode_transaction_log_key(b"\x00\x07\x00\x01x") is None  # unknown key version: skipped
    with pytest.raises(TransactionRecordFormatError):
        decode_transaction_log_key(b"\x00\x00\x00\x09ab")


def test_value_v0_layout_matches_kafka_schema() -> None:
    value = TransactionLogValue(7, 3, 60000, 1, (("t", (0, 2)), ("u", (1,))), 1000, 900)
    raw = encode_transaction_log_value(value)
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 2)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">h", 1)
        + b"u"
        + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 1000, 900)
    )
    assert raw == expected
    assert decode_transaction_log_value(raw) == value


def test_empty_state_has_null_partitions() -> None:
    raw = encode_transaction_log_value(TransactionLogValue(7, 0, 60000, 0, (), 5, -1))
    assert raw[2 + 8 + 2 + 4 + 1 :][:4] == b"\xff\xff\xff\xff"
    assert decode_transaction_log_value(raw).partitions == ()
    with pytest.raises(ValueError, match="Empty"):
        encode_transaction_log_value(TransactionLogValue(7, 0, 60000, 0, (("t", (0,)),), 5, -1))


def test_value_v1_flexible_with_tagged_fields() -> None:
    raw = (
        struct.pack(">hqhib", 1, 9, 4, 30000, 4)
        + bytes([2])  # compact array of 1 partition set
        + bytes([2])
        + b"t"
        + bytes([3])
        + struct.pack(">ii", 0, 1)
        + bytes([0])  # entry tags
        + struct.pack(">qq", 2000, 1500)
        + bytes([4])  # 4 tagged fields: previous pid, next pid, client version, unknown tag 9
        + bytes([0, 8])
        + struct.pack(">q", 8)
        + bytes([1, 8])
        + struct.pack(">q", 10)
        + bytes([2, 2])
        + struct.pack(">h", 2)
        + bytes([9, 1, 0xAA])
    )
    value = decode_transaction_log_value(raw)
    assert value == TransactionLogValue(9, 4, 30000, 4, (("t", (0, 1)),), 2000, 1500, 8, 10, 2)


@pytest.mark.parametrize(
    "raw",
    [
        struct.pack(">h", 2) + b"\x00" * 40,  # unknown version
        struct.pack(">hqhib", 0, 1, 0, 1000, 9) + struct.pack(">i", -1) + b"\x00" * 16,  # unknown state
        encode_transaction_log_value(TransactionLogValue(1, 0, 1000, 1, (("t", (0,)),), 1, 1))[:-3],
        struct.pack(">hqhib", 0, 1, 0, 1000, 1) + struct.pack(">i", 1_000_000),  # huge array count
    ],
)
def test_bad_values_raise_format_error(raw: bytes) -> None:
    with pytest.raises(TransactionRecordFormatError):
        decode_transaction_log_value(raw)
