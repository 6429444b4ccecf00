"""Kafka wire framing: a 4-byte big-endian size prefix, a request/response header, a body.

Request header v1: api_key int16, api_version int16, correlation_id int32, client_id nullable
string (int16 length). Header v2 (flexible request versions) adds a tagged-field section.
Response header v0 is the correlation id; v1 (flexible responses) adds tagged fields, except that
ApiVersions responses always use header v0 (KIP-511). Bodies are kio entities.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader, entity_writer

from spark_kafkalite.protocol import varint
from spark_kafkalite.protocol.api_keys import ApiKey, request_class, response_class
from spark_kafkalite.protocol.bounded_scan import (
    NullInNonNullableFieldError,
    replace_null_arrays,
    scan_entity,
)
from spark_kafkalite.protocol.class_cache import class_cache
from spark_kafkalite.protocol.describe_transactions_response import decode_describe_transactions_response
from spark_kafkalite.protocol.errors import InvalidRequestError, UnsupportedVersionError

__all__ = [
    "RequestHeaderInfo",
    "decode_request_header",
    "decode_request_body",
    "decode_request_body_with_nulls",
    "encode_request",
    "encode_response",
    "encode_response_chunks",
    "FrameChunks",
    "decode_response",
    "decode_response_header",
    "response_body_offset",
    "read_unsigned_varint",
    "SIZE_PREFIX",
]

SIZE_PREFIX = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


@dataclass(frozen=True, slots=True)
class RequestHeaderInfo:
    """A parsed request header. ``header_version`` is 1 or 2 (0 is never used by modern clients)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def read_unsigned_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; returns (value, new position).

    Raises:
        InvalidRequestError: the buffer ends inside the varint or it is longer than 5 bytes.
    """
    try:
        return varint.read_unsigned_varint(buf, pos, len(buf))
    except varint.VarintError as exc:
        raise InvalidRequestError(str(exc)) from None


def _skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    count, pos = read_unsigned_varint(buf, pos)
    for _ in range(count):
        _tag, pos = read_unsigned_varint(buf, pos)
        size, pos = read_unsigned_varint(buf, pos)
        pos += size
        if pos > len(buf):
            raise InvalidRequestError("truncated tagged field")
    return pos


def _is_flexible_request(api_key: int, api_version: int) -> bool | None:
    """True/False when kio knows the schema, None when it does not."""
    try:
        return bool(request_class(api_key, api_version).__flexible__)
    except UnsupportedVersionError:
        return None


def decode_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeaderInfo, int]:
    """Parse the request header of ``frame`` (a frame without its size prefix).

    Returns the header and the offset of the body. For versions kio has no schema for (unknown
    key or version) the header is parsed as v1, which is enough to answer or close the connection.

    Raises:
        InvalidRequestError: the frame is too short or malformed.
    """
    if len(frame) < _HEADER_FIXED.size:
        raise InvalidRequestError(f"request frame of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id, client_id_len = _HEADER_FIXED.unpack_from(frame, 0)
    pos = _HEADER_FIXED.size
    client_id: str | None = None
    if client_id_len >= 0:
        end = pos + client_id_len
        if end > len(frame):
            raise InvalidRequestError("truncated client_id in request header")
        try:
            client_id = bytes(frame[pos:end]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequestError("client_id is not valid UTF-8") from exc
        pos = end
    elif client_id_len != -1:
        raise InvalidRequestError(f"invalid client_id length {client_id_len}")
    header_version = 1
    if _is_flexible_request(api_key, api_version):
        header_version = 2
        pos = _skip_tagged_fields(frame, pos)
    return RequestHeaderInfo(api_key, api_version, correlation_id, client_id, header_version), pos


@class_cache
def _reader(cls: type[Any]) -> Any:
    return entity_reader(cls)


@class_cache
def _writer(cls: type[Any]) -> Any:
    return entity_writer(cls)


def _read_entity(
    cls: type[Any], frame: bytes | bytearray | memoryview, offset: int, *, allow_nulls: bool = False
) -> Any:
    """Decode ``cls`` at ``offset`` with kio, after :func:`scan_entity` has bounded every length
    and count by the bytes left (kio's native decoder would abort the process on a huge count).
    ``allow_nulls``: decode even when the only fault is a null non-nullable array."""
    try:
        scan_entity(cls, frame, offset)
    except NullInNonNullableFieldError:
        if not allow_nulls:
            raise
    try:
        entity, _size = _reader(cls)(frame, offset)
    except KeyError as exc:  # kio raises KeyError on unknown tagged fields
        raise InvalidRequestError(f"cannot parse {cls.__name__}: {exc}") from exc
    except Exception as exc:  # SerialError, ValueError, TypeError, OverflowError, UnicodeDecodeError...
        raise InvalidRequestError(f"cannot parse {cls.__name__} v{cls.__version__}: {exc!r}") from exc
    except BaseException as exc:  # pyo3's PanicException derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        raise InvalidRequestError(f"cannot parse {cls.__name__} v{cls.__version__}: {exc!r}") from None
    return entity


def decode_request_body(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview, offset: int
) -> Any:
    """Decode the request body at ``offset`` into its kio entity.

    Raises:
        UnsupportedVersionError: kio has no schema for (api_key, api_version).
        InvalidRequestError: the body is malformed or truncated.
    """
    return _read_entity(request_class(api_key, api_version), frame, offset)


def decode_request_body_with_nulls(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview, offset: int
) -> Any:
    """Decode a body that :func:`decode_request_body` refused only for nulls in non-nullable
    arrays (:class:`NullInNonNullableFieldError`); those nulls become empty arrays, so the
    request can be answered with an error response built from it."""
    entity = _read_entity(request_class(api_key, api_version), frame, offset, allow_nulls=True)
    return replace_null_arrays(entity)


def _write_client_id(out: io.BytesIO, client_id: str | None) -> None:
    if client_id is None:
        out.write(struct.pack(">h", -1))
    else:
        raw = client_id.encode("utf-8")
        out.write(struct.pack(">h", len(raw)))
        out.write(raw)


def encode_request(entity: Any, correlation_id: int, client_id: str | None) -> bytes:
    """Encode a kio request entity as a full frame (size prefix, header v1 or v2, body)."""
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    out.write(struct.pack(">hhi", entity.__api_key__, entity.__version__, correlation_id))
    _write_client_id(out, client_id)
    if entity.__flexible__:
        out.write(b"\x00")  # empty tagged fields (header v2)
    _writer(type(entity))(out, entity)
    data = out.getbuffer()
    SIZE_PREFIX.pack_into(data, 0, len(data) - 4)
    del data  # release the export: getvalue() then hands over BytesIO's own buffer, no copy
    # (a ProduceRequest carries up to max.request.size of records; copying them again into a
    # fresh bytes cost ~0.6 ms per 256 KB request, page faults included)
    return out.getvalue()


def _response_header_version(cls: type[Any]) -> int:
    if cls.__api_key__ == ApiKey.API_VERSIONS:
        return 0
    return 1 if cls.__flexible__ else 0


def encode_response(entity: Any, correlation_id: int) -> bytes:
    """Encode a kio response entity as a full frame with the header version its schema requires."""
    chunks = encode_response_chunks(entity, correlation_id)
    return bytes(chunks[0]) if len(chunks) == 1 else b"".join(chunks)


FrameChunks = list[bytes | bytearray | memoryview]
"""A frame as consecutive buffers (written in order; their concatenation is the frame)."""

_BY_REFERENCE_MIN_BYTES = 64 * 1024
"""Writes at least this large (record sets of Fetch responses) are kept by reference."""


class _ChunkWriter:
    """kio ``Writable`` collecting a frame as chunks: small writes are appended to a bytearray,
    large ones (record sets) are kept by reference, never copied (Kafka sends a FetchResponse's
    ``FileRecords`` the same way, next to the encoded fields)."""

    __slots__ = ("chunks", "small")

    def __init__(self) -> None:
        self.chunks: FrameChunks = []
        self.small = bytearray()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        n = len(data)
        if n >= _BY_REFERENCE_MIN_BYTES:
            if self.small:
                self.chunks.append(self.small)
                self.small = bytearray()
            self.chunks.append(data)
        else:
            self.small += data
        return n

    def finish(self) -> FrameChunks:
        if self.small or not self.chunks:
            self.chunks.append(self.small)
        return self.chunks


def encode_response_chunks(entity: Any, correlation_id: int) -> FrameChunks:
    """:func:`encode_response` as chunks whose concatenation is the frame: record sets of at
    least 64 KiB are the caller's own buffers, not copies (the broker writes the chunks one
    after the other). The first chunk is a bytearray holding the size prefix."""
    out = _ChunkWriter()
    out.small += struct.pack(">ii", 0, correlation_id)
    if _response_header_version(type(entity)) == 1:
        out.small += b"\x00"
    _writer(type(entity))(out, entity)
    chunks = out.finish()
    size = sum(len(c) for c in chunks) - 4
    SIZE_PREFIX.pack_into(chunks[0], 0, size)
    return chunks


def decode_response_header(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response frame (without size prefix)."""
    if len(frame) < 4:
        raise InvalidRequestError("response frame shorter than its header")
    return int(struct.unpack_from(">i", frame, 0)[0])


def decode_response(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """Decode a response frame (without size prefix) into (correlation_id, kio entity).
    DescribeTransactions v0 is read by hand (a :class:`DescribeTransactionsResponseData`: kio
    refuses the ``-1`` start time Kafka sends, see
    :mod:`spark_kafkalite.protocol.describe_transactions_response`).

    Raises:
        UnsupportedVersionError: kio has no schema for (api_key, api_version).
        InvalidRequestError: the response is malformed.
    """
    cls = response_class(api_key, api_version)
    correlation_id = decode_response_header(frame)
    if api_key == ApiKey.DESCRIBE_TRANSACTIONS and api_version == 0:
        return correlation_id, decode_describe_transactions_response(frame, response_body_offset(cls, frame))
    return correlation_id, _read_entity(cls, frame, response_body_offset(cls, frame))


def response_body_offset(cls: type[Any], frame: bytes | bytearray | memoryview) -> int:
    """Where the body of a ``cls`` response frame (without size prefix) starts: after the
    correlation id and, for response header v1 (flexible versions, KIP-482), its tagged fields."""
    pos = 4
    if _response_header_version(cls) == 1:
        pos = _skip_tagged_fields(frame, pos)
    return pos
