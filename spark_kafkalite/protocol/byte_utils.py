"""Wire primitives shared by the hand-written codecs of the hot paths (``produce_request``,
``produce_response``, ``fetch_response_encode``, ``replica_fetch_codec``).

The compact strings and arrays of KIP-482 flexible versions (length + 1 as an unsigned varint
of :mod:`~spark_kafkalite.protocol.varint`, 0 for null). Every other message goes through kio;
these codecs exist only where kio's per-field cost or copies showed in profiles.
"""

from __future__ import annotations

from spark_kafkalite.protocol.varint import write_unsigned_varint

__all__ = [
    "FastPathMiss",
    "write_array_length",
    "write_compact_nullable_string",
    "write_compact_string",
]


class FastPathMiss(Exception):
    """A fast decoder met anything but a plain well-formed body (a truncation, a tagged
    field...; an oversized varint raises :class:`~spark_kafkalite.protocol.varint.VarintError`):
    the caller decodes through the bounded scan + kio instead, which gives every malformed body
    its exact error."""


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
