"""Reading and writing Kafka's schema types outside a request/response frame: the opaque blobs
that Kafka defines with its message-generator JSON schemas but carries as bytes
(``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment`` inside JoinGroup and SyncGroup,
the ``__consumer_offsets`` keys and values of ``GroupCoordinatorRecordSerde``).

Classic versions use an ``int16`` string length, an ``int32`` bytes length and array count
(``-1`` = null); flexible versions (KIP-482) use unsigned varints holding ``length + 1`` and end
structs with tagged fields. Pure, no I/O.
"""

from __future__ import annotations

import struct
import uuid
from typing import Literal, overload

from spark_kafkalite.protocol.varint import VarintError, read_unsigned_varint

__all__ = ["SchemaReader", "write_string", "write_bytes", "I8", "I16", "I32", "I64"]

I8 = struct.Struct(">b")
I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")


def write_string(out: bytearray, value: str | None) -> None:
    """Append a classic (``int16`` length) string; ``None`` is written as null (-1).

    Raises:
        ValueError: the UTF-8 encoding is longer than 32767 bytes.
    """
    if value is None:
        out += I16.pack(-1)
        return
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long")
    out += I16.pack(len(data))
    out += data


def write_bytes(out: bytearray, value: bytes | None) -> None:
    """Append classic (``int32`` length) bytes; ``None`` is written as null (-1)."""
    if value is None:
        out += I32.pack(-1)
        return
    out += I32.pack(len(value))
    out += value


class SchemaReader:
    """Reads schema fields from ``buf`` in order; every malformed input raises ``error``.

    ``what`` names the structure in error messages; ``flexible`` switches strings, bytes and
    arrays to the compact (varint) encoding and enables :meth:`skip_tags`; ``pos`` is where
    reading starts (e.g. after a request header).
    """

    __slots__ = ("buf", "pos", "what", "error", "flexible")

    def __init__(
        self,
        buf: bytes | bytearray | memoryview,
        what: str,
        error: type[Exception] = ValueError,
        flexible: bool = False,
        pos: int = 0,
    ) -> None:
        self.buf = memoryview(buf)
        self.pos = pos
        self.what = what
        self.error = error
        self.flexible = flexible

    def _need(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise self.error(f"{self.what} is truncated at byte {self.pos} (needs {n} more)")

    def _take(self, n: int) -> bytes:
        self._need(n)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return raw

    def i8(self) -> int:
        self._need(1)
        value: int = I8.unpack_from(self.buf, self.pos)[0]
        self.pos += 1
        return value

    def i16(self) -> int:
        self._need(2)
        value: int = I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return value

    def i32(self) -> int:
        self._need(4)
        value: int = I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return value

    def i64(self) -> int:
        self._need(8)
        value: int = I64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return value

    def uvarint(self) -> int:
        try:
            value, self.pos = read_unsigned_varint(self.buf, self.pos, len(self.buf))
        except VarintError as exc:
            raise self.error(f"{self.what} at byte {self.pos}: {exc}") from None
        return value

    def _length(self, classic: struct.Struct) -> int:
        if self.flexible:
            return self.uvarint() - 1
        self._need(classic.size)
        value: int = classic.unpack_from(self.buf, self.pos)[0]
        self.pos += classic.size
        return value

    @overload
    def string(self, nullable: Literal[False] = False) -> str: ...

    @overload
    def string(self, nullable: Literal[True]) -> str | None: ...

    def string(self, nullable: bool = False) -> str | None:
        """A classic (int16-length) string; ``None`` only for a null in a ``nullable`` field.

        Raises:
            the reader's ``error``: truncated data, invalid UTF-8, or a null where not nullable.
        """
        n = self._length(I16)
        if n < 0:
            if nullable:
                return None
            raise self.error(f"{self.what}: null string in a non-nullable field")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"{self.what}: invalid UTF-8 string") from exc

    def nullable_bytes(self) -> bytes | None:
        n = self._length(I32)
        if n < 0:
            return None
        return self._take(n)

    def count(self) -> int:
        """An array's element count (non-nullable arrays; every element takes at least a byte)."""
        n = self._length(I32)
        if n < 0:
            raise self.error(f"{self.what}: null array in a non-nullable field")
        if n > len(self.buf) - self.pos:
            raise self.error(f"{self.what}: array of {n} elements exceeds the data")
        return n

    def uuid(self) -> uuid.UUID:
        """A 16-byte UUID (Kafka's ``uuid`` type)."""
        return uuid.UUID(bytes=self._take(16))

    def skip_bytes(self, n: int) -> None:
        """Skip ``n`` bytes (e.g. an unknown tagged field's value)."""
        self._take(n)

    def skip_tags(self) -> None:
        """Skip a tagged-field section (flexible versions only; a no-op otherwise)."""
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)
