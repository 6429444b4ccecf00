"""Structure-aware Kafka wire generation for the fuzzers: bodies written from kio's schema of any
API and version (``schema_steps``), mostly well-formed so they reach the handlers, with a
``hostility`` share of out-of-range counts, lengths, nulls and boundary integers; RecordBatch v2
values with valid CRC-32C (fields mutated before the CRC is computed, so validation beyond the
CRC is exercised); and byte-level mutations of whole frames.

Everything is driven by one ``random.Random`` so a run is reproduced by its seed.
"""

from __future__ import annotations

import random
import struct
import time
from typing import Any

import crc32c

from spark_kafkalite.protocol.api_keys import request_class, response_class
from spark_kafkalite.protocol.bounded_scan import (
    OP_ARRAY_ENTITY,
    OP_ARRAY_FIXED,
    OP_ARRAY_STRING,
    OP_ENTITY,
    OP_FIXED,
    OP_STRING,
    schema_steps,
)
from spark_kafkalite.protocol.errors import UnsupportedVersionError
from spark_kafkalite.protocol.record_batch_writer import encode_batch

__all__ = ["WireGen", "mutate", "request_versions", "TOPICS", "GROUPS"]

TOPICS = ("fuzz-a", "fuzz-b", "__consumer_offsets")
GROUPS = ("fuzz-g", "g2", "")
_BOUNDARY = {
    1: (0, 1, -1, 127, -128),
    2: (0, 1, -1, 32767, -32768),
    4: (0, 1, -1, 2147483647, -2147483648, 0x7FFFFFF0),
    8: (0, 1, -1, 2**63 - 1, -(2**63)),
}
_PACK = {1: ">b", 2: ">h", 4: ">i", 8: ">q"}
_SMALL_NAMES = ("partition", "index", "epoch", "count", "num", "replica", "node", "broker", "acks")
_TIME_NAMES = ("timeout", "wait", "ms", "time", "delay")


def request_versions(api_key: int) -> list[int]:
    """Every request version kio has a schema for."""
    out = []
    for v in range(0, 20):
        try:
            request_class(api_key, v)
        except UnsupportedVersionError:
            continue
        out.append(v)
    return out


def _uvarint(n: int) -> bytes:
    out = bytearray()
    n &= 0xFFFFFFFF
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class WireGen:
    """Writes wire bodies of kio entity classes.

    Args:
        rng: the seeded random source.
        hostility: probability that one field gets a hostile value (huge count or length,
            null in a non-nullable field, boundary integer, invalid UTF-8, unknown tag).
        host: the only host written into ``host`` fields (responses for the client fuzzer).
        port: the port written into ``port`` fields.
    """

    def __init__(
        self, rng: random.Random, hostility: float = 0.03, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.rng = rng
        self.hostility = hostility
        self.host = host
        self.port = port

    # -- values ----------------------------------------------------------------------------------
    def _hostile(self) -> bool:
        return self.rng.random() < self.hostility

    def _int(self, name: str, size: int) -> bytes:
        rng = self.rng
        if size == 16:  # uuid
            return bytes(16) if rng.random() < 0.5 else rng.randbytes(16)
        lname = name.lower()
        if self._hostile():
            value = rng.choice(_BOUNDARY[size])
        elif name == "port":
            value = self.port
        elif size == 1:
            value = rng.choice((0, 1, -1)) if "acks" in lname else rng.randint(0, 1)
        elif "error" in lname:
            value = rng.choice((0, 0, 0, 1, 3, 6, 15, 16, 27, 58, 74))
        elif any(t in lname for t in _TIME_NAMES):
            value = rng.choice((0, 0, 10, 100, -1))
        elif any(t in lname for t in _SMALL_NAMES):
            value = rng.choice((0, 0, 1, 2, -1))
        elif "offset" in lname or "sequence" in lname:
            value = rng.choice((0, 0, 1, 5, -1, -2, 1000))
        elif "bytes" in lname:
            value = rng.choice((0, 1, 1 << 20, 1 << 10))
        else:
            value = rng.choice((0, 0, 1, 2, -1, rng.randint(-1000, 100000)))
        if size == 8 and ("time" in lname or "timestamp" in lname) and value == 100000:
            value = int(time.time() * 1000)
        bits = size * 8
        value = (value + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))  # wrap into range
        return struct.pack(_PACK[size], value)

    def _text(self, name: str) -> bytes:
        rng = self.rng
        lname = name.lower()
        if lname == "host":
            return self.host.encode()
        if "topic" in lname or lname == "name":
            return rng.choice(TOPICS).encode()
        if "group" in lname:
            return rng.choice(GROUPS).encode()
        if "protocol_type" in lname:
            return b"consumer"
        roll = rng.random()
        if roll < 0.5:
            return b""
        if roll < 0.9:
            return bytes(rng.choice(b"abcxyz-._0123456789") for _ in range(rng.randint(1, 12)))
        if roll < 0.97 or not self._hostile():
            return "é\u263a".encode() * rng.randint(1, 3)
        return b"\xff\xfe\xc3"  # invalid UTF-8

    def record_batch(self) -> bytes:
        """A RecordBatch v2 (sometimes two), with some header fields set to odd values before
        the CRC-32C is computed, so it passes the CRC check and reaches later validation."""
        rng = self.rng
        now_ms = int(time.time() * 1000)
        records = [
            (rng.choice((None, b"k", rng.randbytes(4))), rng.randbytes(rng.randint(0, 40)), now_ms, [])
            for _ in range(rng.randint(1, 4))
        ]
        compression = rng.choice((0, 0, 0, 1, 2, 3, 4))
        idempotent = rng.random() < 0.3
        batch = bytearray(
            encode_batch(
                records,
                compression_type=compression,
                producer_id=rng.choice((0, 1, 5)) if idempotent else -1,
                producer_epoch=0 if idempotent else -1,
                base_sequence=rng.choice((0, 1, 7)) if idempotent else -1,
                is_transactional=rng.random() < 0.05,
            )
        )
        if self._hostile() or rng.random() < 0.1:
            field = rng.choice(
                (
                    (8, ">i", (0, 1, -1, 12, 2**31 - 1)),  # batch length (not under the CRC)
                    (16, ">b", (0, 1, 3)),  # magic
                    (21, ">h", (7, 0x10, 0x20, -1)),  # attributes
                    (23, ">i", (-1, 100, 2**31 - 1)),  # last offset delta
                    (57, ">i", (0, -1, 1000, 2**31 - 1)),  # record count
                )
            )
            pos, fmt, choices = field
            struct.pack_into(fmt, batch, pos, rng.choice(choices))
            if pos >= 21:
                struct.pack_into(">I", batch, 17, crc32c.crc32c(memoryview(batch)[21:]))
        if rng.random() < 0.05:
            batch = batch + bytes(batch)  # two batches in one partition's records
        return bytes(batch)

    # -- schema walk -------------------------------------------------------------------------------
    def _length(self, n: int, width: int, compact_nullable_null: bool = False) -> bytes:
        if width == 0:
            return _uvarint(0 if compact_nullable_null else n + 1)
        if compact_nullable_null:
            n = -1
        return struct.pack(">h" if width == 2 else ">i", n)

    def _string(self, name: str, width: int, nullable: bool) -> bytes:
        rng = self.rng
        if self._hostile():
            kind = rng.randrange(3)
            if kind == 0:  # null, allowed or not
                return self._length(0, width, True)
            huge = 0x7FFF if width == 2 else 0x7FFFFFF0
            return self._length(huge, width)  # a length far past the frame
        if nullable and rng.random() < 0.15:
            return self._length(0, width, True)
        raw = self._text(name)
        return self._length(len(raw), width) + raw

    def _count(self, n: int, compact: bool) -> bytes:
        return _uvarint(n + 1) if compact else struct.pack(">i", n)

    def _array_count(self, compact: bool, nullable: bool, depth: int) -> tuple[bytes, int]:
        rng = self.rng
        if self._hostile():
            kind = rng.randrange(3)
            if kind == 0:
                return (_uvarint(0) if compact else struct.pack(">i", -1)), 0  # null
            huge = rng.choice((0xFFFFFFFE, 0x7FFFFFFF, 100000))
            return (_uvarint(huge) if compact else struct.pack(">i", min(huge, 0x7FFFFFFF))), 0
        if nullable and rng.random() < 0.1:
            return (_uvarint(0) if compact else struct.pack(">i", -1)), 0
        n = rng.choice((0, 1, 1, 1, 2, 3)) if depth < 3 else rng.choice((0, 1))
        return self._count(n, compact), n

    def field(self, step: tuple[Any, ...], depth: int) -> bytes:
        op, name, arg, nullable = step
        if op == OP_FIXED:
            return self._int(name, arg)
        if op == OP_STRING:
            if name == "records":
                return self._records(arg, nullable)
            return self._string(name, arg, nullable)
        if op == OP_ENTITY:
            cls = arg
            if nullable:
                if self.rng.random() < 0.2:
                    return b"\xff"
                return b"\x01" + self.entity(cls, depth + 1)
            return self.entity(cls, depth + 1)
        compact = arg[1]
        head, n = self._array_count(compact, nullable, depth)
        parts = [head]
        for _ in range(n):
            if op == OP_ARRAY_FIXED:
                parts.append(self._int(name, arg[0]))
            elif op == OP_ARRAY_STRING:
                parts.append(self._string(name, arg[0], False))
            else:
                assert op == OP_ARRAY_ENTITY
                parts.append(self.entity(arg[0], depth + 1))
        return b"".join(parts)

    def _records(self, width: int, nullable: bool) -> bytes:
        if nullable and self.rng.random() < 0.1:
            return self._length(0, width, True)
        raw = self.record_batch() if self.rng.random() < 0.9 else b""
        return self._length(len(raw), width) + raw

    def entity(self, cls: type[Any], depth: int = 0) -> bytes:
        steps, tagged, flexible = schema_steps(cls)
        parts = [self.field(step, depth) for step in steps]
        if flexible:
            tags: list[bytes] = []
            rng = self.rng
            if tagged and rng.random() < 0.2:
                tag = rng.choice(sorted(tagged))
                value = self.field(tagged[tag], depth)
                tags.append(_uvarint(tag) + _uvarint(len(value)) + value)
            if self._hostile():
                value = rng.randbytes(rng.randint(0, 4))
                tags.append(_uvarint(rng.choice((99, 1000))) + _uvarint(len(value)) + value)
            parts.append(_uvarint(len(tags)) + b"".join(tags))
        return b"".join(parts)

    # -- frames ----------------------------------------------------------------------------------
    def request_frame(
        self, api_key: int, version: int, correlation_id: int, client_id: str = "fuzz"
    ) -> bytes:
        """A full request frame (size prefix, header v1/v2, generated body)."""
        cls = request_class(api_key, version)
        raw_id = client_id.encode()
        header = struct.pack(">hhih", api_key, version, correlation_id, len(raw_id)) + raw_id
        if cls.__flexible__:
            header += b"\x00"
        payload = header + self.entity(cls)
        return struct.pack(">i", len(payload)) + payload

    def response_body(self, api_key: int, version: int) -> bytes:
        """A response body (after the response header) for ``(api_key, version)``."""
        return self.entity(response_class(api_key, version))


def mutate(rng: random.Random, frame: bytes, keep_size_prefix: bool = False) -> bytes:
    """Byte-level mutations of a frame (after its 4-byte size): bit flips, interesting bytes,
    interesting 32-bit words, insertions, deletions, truncation, duplicated chunks. The size
    prefix is recomputed unless ``keep_size_prefix``."""
    body = bytearray(frame[4:])
    for _ in range(rng.choice((1, 1, 2, 3, 6))):
        if not body:
            body += rng.randbytes(rng.randint(1, 8))
        kind = rng.randrange(8)
        pos = rng.randrange(len(body))
        if kind == 0:
            body[pos] ^= 1 << rng.randrange(8)
        elif kind == 1:
            body[pos] = rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01, 0xFE))
        elif kind == 2:
            word = rng.choice(
                (b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x00\x00\x00\x00", b"\xff\xff\xff\x0f")
            )
            body[pos : pos + 4] = word
        elif kind == 3:
            body[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif kind == 4:
            del body[pos : pos + rng.randint(1, 16)]
        elif kind == 5:
            del body[pos:]
        elif kind == 6:
            end = min(len(body), pos + rng.randint(1, 32))
            body[pos:pos] = body[pos:end]
        else:
            body[pos] = rng.randrange(256)
    if keep_size_prefix:
        return frame[:4] + bytes(body)
    return struct.pack(">i", len(body)) + bytes(body)
