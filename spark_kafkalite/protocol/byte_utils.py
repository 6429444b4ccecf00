"""Wire primitives shared by the hand-written codecs of the hot paths (``produce_request``,
``produce_response``, ``fetch_response_encode``, ``replica_fetch_codec``).

Kafka's ``org.apache.kafka.common.utils.ByteUtils`` (``writeUnsignedVarint`` /
``readUnsignedVarint``) and the compact strings of KIP-482 flexible versions (length + 1 as an
unsigned varint, 0 for null). Every other message goes through kio; these codecs exist only where
kio's per-field cost or copies showed in profiles.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "FastPathMiss",
    "read_unsigned_varint_fast",
    "write_array_length",
    "write_compact_nullable_string",
    "write_compact_string",
    "write_unsigned_varint",
]


class FastPathMiss(Exception):
    """A fast decoder met anything but a plain well-formed body (a truncation, an oversized
    varint, a tagged field...): the caller decodes through the bounded scan + kio instead, which
    gives every malformed body its exact error."""


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (>= 0) as an unsigned varint (ByteUtils.writeUnsignedVarint)."""
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_array_length(out: bytearray, count: int, flexible: bool) -> None:
    """Append an array's element count: KIP-482 compact (count + 1 as an unsigned varint) in a
    flexible version, a big-endian int32 before it."""
    if flexible:
        write_unsigned_varint(out, count + 1)
    else:
        out += count.to_bytes(4, "big", signed=True)


def write_compact_string(out: bytearray, value: str) -> None:
    """Append a KIP-482 compact string: UTF-8 length + 1 as an unsigned varint, then the bytes."""
    data = value.encode()
    write_unsigned_varint(out, len(data) + 1)
    out += data


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    """As :func:`write_compact_string`, with ``None`` written as length 0."""
    if value is None:
        out.append(0)
        return
    write_compact_string(out, value)


def read_unsigned_varint_fast(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes (an int32, as ByteUtils.readUnsignedVarint)
    from ``buf[pos:end]``; returns ``(value, next position)``.

    Raises:
        FastPathMiss: the varint runs past ``end`` or over 5 bytes.
    """
    shift = result = 0
    while True:
        if pos >= end:
            raise FastPathMiss
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise FastPathMiss
