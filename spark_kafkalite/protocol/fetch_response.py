"""FetchResponse decoding whose record sets are views of the received frame, not copies.

Why: kio decodes a ``records`` field (Kafka's ``FetchResponse.json`` ``Records``, type
``records``) into a new ``bytes``: for a columnar reader fetching 8 MiB per response that copy
was ~20% of the read task's Python time. Kafka's Java client does not copy either:
``ByteBufferAccessor.readRecords`` wraps a slice of the receive buffer
(``MemoryRecords.readableRecords(buffer.slice())``).

How (:func:`decode_fetch_response`): the frame is first bounded by
:func:`~spark_kafkalite.protocol.bounded_scan.scan_entity` as every response is (issue #14:
no length or count may exceed the bytes left), then walked along the same kio schema to find
each partition's ``records`` field. kio decodes a copy of the frame in which every non-empty
record set is replaced by an empty one (only the small metadata is copied), and each
partition's ``records`` is then set to a read-only ``memoryview`` slice of the frame. Null and
empty record sets stay what kio makes of them (``None``, ``b""``); every other field
(``aborted_transactions``, ``preferred_read_replica``, KIP-482 tagged fields such as
``diverging_epoch`` / ``current_leader`` / ``snapshot_id``, error codes) is kio's own decode.

Lifetime: a slice holds the frame's buffer export, so a connection that reuses its large
receive buffer (``Connection._frame_buffer``: only when no view of it is alive) cannot
overwrite records still referenced by a response, a ``CompletedFetch`` or a decoder.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.bounded_scan import (
    OP_ARRAY_ENTITY,
    OP_ARRAY_FIXED,
    OP_ARRAY_STRING,
    OP_ENTITY,
    OP_FIXED,
    OP_STRING,
    scan_entity,
    schema_steps,
)
from spark_kafkalite.protocol.errors import InvalidRequestError
from spark_kafkalite.protocol.framing import (
    decode_response,
    decode_response_header,
    read_unsigned_varint,
    response_body_offset,
)

__all__ = ["decode_fetch_response", "records_spans"]

_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from
_RECORDS_FIELD = "records"
_EMPTY_COMPACT = b"\x01"  # compact nullable bytes of length 0 (uvarint length + 1)
_EMPTY_LEGACY = b"\x00\x00\x00\x00"  # int32 length 0


def _length(buf: Any, pos: int, width: int) -> tuple[int, int]:
    """A length or count: compact (uvarint - 1, KIP-482), int16 or int32; -1 is null."""
    if width == 0:
        n, pos = read_unsigned_varint(buf, pos)
        return n - 1, pos
    if width == 2:
        return _I16(buf, pos)[0], pos + 2
    return _I32(buf, pos)[0], pos + 4


def _walk(cls: type[Any], buf: Any, pos: int, spans: list[tuple[int, int, int]]) -> int:
    """Skip one ``cls`` entity at ``pos`` (already bounded by ``scan_entity``), appending
    ``(field start, data start, length)`` of each ``records`` field met, in wire order."""
    steps, _tagged, flexible = schema_steps(cls)
    for op, name, arg, nullable in steps:
        if op == OP_FIXED:
            pos += arg
        elif op == OP_STRING:
            n, data = _length(buf, pos, arg)
            if name == _RECORDS_FIELD:
                spans.append((pos, data, n))
            pos = data + max(n, 0)
        elif op == OP_ENTITY:
            if nullable:
                pos += 1
                if buf[pos - 1] == 1:
                    pos = _walk(arg, buf, pos, spans)
            else:
                pos = _walk(arg, buf, pos, spans)
        else:
            n, pos = _length(buf, pos, 0 if arg[1] else 4)
            if op == OP_ARRAY_FIXED:
                pos += max(n, 0) * arg[0]
            elif op == OP_ARRAY_STRING:
                for _ in range(n):
                    k, pos = _length(buf, pos, arg[0])
                    pos += max(k, 0)
            elif op == OP_ARRAY_ENTITY:
                for _ in range(n):
                    pos = _walk(arg[0], buf, pos, spans)
            else:  # the plan is built in this module: a new op must be walked here too
                raise RuntimeError(f"FetchResponse plan has unknown op {op}")
    if flexible:  # tagged fields (KIP-482): Fetch carries no records in them, skip by size
        count, pos = read_unsigned_varint(buf, pos)
        for _ in range(count):
            _tag, pos = read_unsigned_varint(buf, pos)
            size, pos = read_unsigned_varint(buf, pos)
            pos += size
    return pos


def records_spans(api_version: int, frame: bytes | bytearray | memoryview) -> list[tuple[int, int, int]]:
    """``(field start, data start, length)`` of every partition's ``records`` field of a
    FetchResponse frame (without size prefix), in wire order; length -1 for null.

    Raises:
        InvalidRequestError: the frame is malformed (bounded scan, issue #14).
    """
    cls = response_class(ApiKey.FETCH, api_version)
    decode_response_header(frame)
    pos = response_body_offset(cls, frame)
    end = scan_entity(cls, frame, pos)
    spans: list[tuple[int, int, int]] = []
    if _walk(cls, frame, pos, spans) != end:  # the scan and the walk read the same schema
        raise InvalidRequestError(f"FetchResponse v{api_version}: records fields could not be located")
    return spans


def decode_fetch_response(api_version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """Like ``decode_response(ApiKey.FETCH, api_version, frame)``, but each partition's
    ``records`` is a read-only ``memoryview`` of ``frame`` (no copy) when it is not empty.

    Raises:
        UnsupportedVersionError: kio has no schema for this Fetch version.
        InvalidRequestError: the response is malformed.
    """
    spans = records_spans(api_version, frame)
    filled = [span for span in spans if span[2] > 0]
    if not filled:
        return decode_response(ApiKey.FETCH, api_version, frame)
    view = memoryview(frame)
    if not view.readonly:
        view = view.toreadonly()
    empty = _EMPTY_COMPACT if response_class(ApiKey.FETCH, api_version).__flexible__ else _EMPTY_LEGACY
    pieces: list[Any] = []
    prev = 0
    for field, data, n in filled:
        pieces.append(view[prev:field])
        pieces.append(empty)
        prev = data + n
    pieces.append(view[prev:])
    correlation_id, response = decode_response(ApiKey.FETCH, api_version, b"".join(pieces))
    it = iter(spans)
    topics = []
    for topic in response.responses:
        parts = []
        for pd in topic.partitions:
            span = next(it, None)
            if span is None:
                raise InvalidRequestError(
                    f"FetchResponse v{api_version}: more partitions than records fields"
                )
            _field, data, n = span
            parts.append(dataclasses.replace(pd, records=view[data : data + n]) if n > 0 else pd)
        topics.append(dataclasses.replace(topic, partitions=tuple(parts)))
    if next(it, None) is not None:
        raise InvalidRequestError(f"FetchResponse v{api_version}: fewer partitions than records fields")
    return correlation_id, dataclasses.replace(response, responses=tuple(topics))
