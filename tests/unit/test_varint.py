"""The one varint codec of the protocol package against Kafka's ByteUtils byte patterns."""

from __future__ import annotations

import pytest

from spark_kafkalite.protocol.varint import (
    VarintError,
    read_unsigned_varint,
    read_varint,
    read_varint32,
    unsigned_varint_bytes,
    varint_size,
    write_varint,
)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**31 - 1, b"\xff\xff\xff\xff\x07"),
    ],
)
def test_unsigned_varint_round_trip(value: int, wire: bytes) -> None:
    assert unsigned_varint_bytes(value) == wire
    assert read_unsigned_varint(b"\xee" + wire + b"\xee", 1, len(wire) + 1) == (value, len(wire) + 1)


@pytest.mark.parametrize(
    ("wire", "message"), [(b"\x80", "truncated"), (b"\x80\x80\x80\x80\x80\x01", "longer")]
)
def test_unsigned_varint_errors(wire: bytes, message: str) -> None:
    with pytest.raises(VarintError, match=message):
        read_unsigned_varint(wire, 0, len(wire))


@pytest.mark.parametrize("value", [0, -1, 1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_zigzag_round_trip(value: int) -> None:
    out = bytearray()
    write_varint(out, value)
    assert len(out) == varint_size(value)
    assert read_varint(bytes(out), 0) == (value, len(out))
    if -(2**31) <= value < 2**31:
        assert read_varint32(bytes(out), 0) == (value, len(out))


def test_zigzag_too_long() -> None:
    with pytest.raises(VarintError):
        read_varint(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(VarintError):
        read_varint32(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(IndexError):
        read_varint(b"\x80", 0)
