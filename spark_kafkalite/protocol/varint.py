"""The varint codec of the wire format, written once for every pure-Python codec (the compiled
record twins keep their own C loops).

Kafka's ``org.apache.kafka.common.utils.ByteUtils``: unsigned varints (``writeUnsignedVarint`` /
``readUnsignedVarint``, at most 5 bytes: the KIP-482 compact lengths, counts and tagged fields)
and zig-zag varints and varlongs (``writeVarlong`` / ``readVarlong`` / ``readVarint``: the
fields of a v2 record, KIP-98).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "VarintError",
    "read_unsigned_varint",
    "read_varint",
    "read_varint32",
    "unsigned_varint_bytes",
    "varint_size",
    "write_unsigned_varint",
    "write_varint",
]


class VarintError(ValueError):
    """A varint runs past the end of its buffer or over its longest length (5 bytes for an
    unsigned varint or a varint, 10 for a varlong). Each codec turns it into its own error."""


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (>= 0) as an unsigned varint (ByteUtils.writeUnsignedVarint)."""
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def unsigned_varint_bytes(value: int) -> bytes:
    """``value`` (>= 0) as the bytes of an unsigned varint."""
    out = bytearray()
    write_unsigned_varint(out, value)
    return bytes(out)


def read_unsigned_varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (an int32, ByteUtils.readUnsignedVarint) from
    ``buf[pos:end]``; returns ``(value, position after it)``.

    Raises:
        VarintError: the varint runs past ``end`` or over 5 bytes.
    """
    shift = result = 0
    while True:
        if pos >= end:
            raise VarintError("truncated unsigned varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise VarintError("unsigned varint longer than 5 bytes")


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (a signed int64) zig-zag encoded (ByteUtils.writeVarlong; an int32 gives
    the bytes of writeVarint)."""
    v = (value << 1) ^ (value >> 63)
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def varint_size(value: int) -> int:
    """Bytes :func:`write_varint` takes for ``value`` (ByteUtils.sizeOfVarlong)."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while v > 0x7F:
        v >>= 7
        n += 1
    return n


def read_varint(buf: Any, pos: int) -> tuple[int, int]:
    """A zig-zag varlong at ``pos`` (ByteUtils.readVarlong): ``(value, position after it)``.

    Raises:
        IndexError: the buffer ends inside the varint.
        VarintError: the varint is longer than 10 bytes.
    """
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos
    result = b & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise VarintError("varint too long in record")


def read_varint32(buf: Any, pos: int) -> tuple[int, int]:
    """A zig-zag *varint* at ``pos`` (32 bits, at most 5 bytes, the bits of the 5th byte above
    32 dropped: ByteUtils.readVarint, which ``DefaultRecord.readFrom`` uses for a record's
    length): ``(value, position after it)``.

    Raises:
        IndexError: the buffer ends inside the varint.
        VarintError: the varint is longer than 5 bytes.
    """
    result = 0
    for shift in range(0, 35, 7):
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            result &= 0xFFFFFFFF
            return (result >> 1) ^ -(result & 1), pos
    raise VarintError("varint too long in record")
