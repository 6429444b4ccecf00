"""A bounded pre-scan of a Kafka message body, run before kio's native decoder sees it.

Why: kio's native (Rust) decoder sizes its vectors from the array count on the wire before it
reads any element, so one request whose count is 0xFFFFFFFE (a 93-byte Fetch v12, a 54-byte
ListOffsets v7) makes it allocate tens of gigabytes and abort the whole process (Rust OOM,
SIGABRT): a remote crash of the broker, and of our client if a broker answers so.

What: walk the message schema (the kio entity classes, i.e. Kafka's ``*Request.json`` /
``*Response.json`` schemas) over the bytes without building anything, and check that every
length and count fits in the bytes left: an array of ``n`` elements needs at least
``n * min_element_bytes`` more bytes, a string or bytes field of length ``n`` needs ``n``
bytes, a tagged field (KIP-482) lies wholly inside the bytes its size names. This is Kafka's
own rule: ``ByteBufferAccessor`` / the generated ``read`` methods throw
``RuntimeException("Tried to allocate a collection of size N, but there are only M bytes
remaining.")`` before allocating. Only a body that passes the scan reaches kio, so kio can never
be asked for more than the frame holds.

Nulls: Kafka's generated readers reject a null (-1 / 0 compact) count for a non-nullable
array (``"non-nullable field X was serialized as null"``). kio returns ``None`` there, which a
handler then iterates. The scan records such fields (path and all) and, when the rest of the
body is well-formed, raises :class:`NullInNonNullableFieldError` so the broker can answer
``INVALID_REQUEST`` (after :func:`replace_null_arrays`) instead of failing in a handler.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from spark_kafkalite.protocol.class_cache import class_cache
from spark_kafkalite.protocol.errors import InvalidRequestError

__all__ = [
    "scan_entity",
    "NullInNonNullableFieldError",
    "replace_null_arrays",
    "min_entity_bytes",
    "schema_steps",
]

_FIXED_BYTES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# Opcodes of a compiled schema step: (op, name, arg, nullable)
_FIXED = 0  # arg = byte count
_STRING = 1  # arg = length prefix width: 0 compact, 2 int16 (string), 4 int32 (bytes)
_ARRAY_FIXED = 2  # arg = (element bytes, compact)
_ARRAY_STRING = 3  # arg = (length prefix width, compact)
_ARRAY_ENTITY = 4  # arg = (entity class, compact)
_ENTITY = 5  # arg = entity class


class NullInNonNullableFieldError(InvalidRequestError):
    """A null array where the schema does not allow one (Kafka: ``non-nullable field ... was
    serialized as null``). The rest of the body was within bounds, so kio may decode it.

    Attributes:
        fields: dotted paths of the offending fields.
    """

    def __init__(self, message: str, fields: list[str]) -> None:
        super().__init__(message)
        self.fields = fields


class _Truncated(Exception):
    pass


def _read_uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise _Truncated("truncated unsigned varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _Truncated("unsigned varint longer than 5 bytes")


def _field_step(field: dataclasses.Field[Any], flexible: bool, is_tag: bool) -> tuple[Any, ...]:
    name = field.name
    nullable = False if is_tag else is_optional(field)
    kind = classify_field(field)
    if isinstance(kind, EntityField):
        return (_ENTITY, name, kind.type_, nullable)
    if isinstance(kind, EntityTupleField):
        return (_ARRAY_ENTITY, name, (kind.type_, flexible), nullable)
    kafka_type = get_schema_field_type(field)
    fixed = _FIXED_BYTES.get(kafka_type)
    if isinstance(kind, PrimitiveTupleField):
        if fixed is not None:
            return (_ARRAY_FIXED, name, (fixed, flexible), nullable)
        width = 0 if flexible else (2 if kafka_type == "string" else 4)
        return (_ARRAY_STRING, name, (width, flexible), nullable)
    assert isinstance(kind, PrimitiveField)
    if fixed is not None:
        return (_FIXED, name, fixed, False)
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"no bounded reader for kafka_type {kafka_type!r} ({name})")
    width = 0 if flexible else (2 if kafka_type == "string" else 4)
    return (_STRING, name, width, nullable)


@class_cache
def _program(cls: type[Any]) -> tuple[tuple[tuple[Any, ...], ...], dict[int, tuple[Any, ...]], bool]:
    flexible = bool(cls.__flexible__)
    steps = []
    tagged: dict[int, tuple[Any, ...]] = {}
    for field in dataclasses.fields(cls):
        tag = get_field_tag(field)
        if tag is None:
            steps.append(_field_step(field, flexible, False))
        else:
            tagged[int(tag)] = _field_step(field, flexible, True)
    return tuple(steps), tagged, flexible


@class_cache
def min_entity_bytes(cls: type[Any]) -> int:
    """The fewest bytes one ``cls`` entity occupies on the wire (all arrays and strings empty
    or null, no tagged fields)."""
    steps, _tagged, flexible = _program(cls)
    total = 1 if flexible else 0
    for op, _name, arg, nullable in steps:
        if op == _FIXED:
            total += arg
        elif op == _STRING:
            total += arg or 1
        elif op == _ENTITY:
            total += 1 if nullable else min_entity_bytes(arg)
        else:
            total += 1 if arg[1] else 4
    return total


class _Scan:
    __slots__ = ("buf", "nulls")

    def __init__(self, buf: Any) -> None:
        self.buf = buf
        self.nulls: list[str] = []

    def _count(self, pos: int, end: int, compact: bool) -> tuple[int, int]:
        """An array count: -1 = null."""
        if compact:
            n, pos = _read_uvarint(self.buf, pos, end)
            return n - 1, pos
        if pos + 4 > end:
            raise _Truncated("truncated array length")
        return _I32.unpack_from(self.buf, pos)[0], pos + 4

    def _string(self, pos: int, end: int, width: int, nullable: bool, path: str) -> int:
        if width == 0:
            n, pos = _read_uvarint(self.buf, pos, end)
            n -= 1
        elif width == 2:
            if pos + 2 > end:
                raise _Truncated(f"truncated length of {path}")
            n = _I16.unpack_from(self.buf, pos)[0]
            pos += 2
        else:
            if pos + 4 > end:
                raise _Truncated(f"truncated length of {path}")
            n = _I32.unpack_from(self.buf, pos)[0]
            pos += 4
        if n < 0:
            if n != -1 or not nullable:
                raise _Truncated(f"invalid length {n} of {path}")
            return pos
        if n > end - pos:
            raise _Truncated(f"{path} claims {n} bytes, {end - pos} left")
        return pos + n

    def entity(self, cls: type[Any], pos: int, end: int, path: str) -> int:
        steps, tagged, flexible = _program(cls)
        for step in steps:
            pos = self.step(step, pos, end, path)
        if flexible:
            count, pos = _read_uvarint(self.buf, pos, end)
            if count > end - pos:
                raise _Truncated(f"{path}: {count} tagged fields, {end - pos} bytes left")
            for _ in range(count):
                tag, pos = _read_uvarint(self.buf, pos, end)
                size, pos = _read_uvarint(self.buf, pos, end)
                if size > end - pos:
                    raise _Truncated(f"{path}: tagged field {tag} claims {size} bytes, {end - pos} left")
                tagged_step = tagged.get(tag)
                if tagged_step is not None:
                    stop = pos + size
                    if self.step(tagged_step, pos, stop, path) != stop:
                        raise _Truncated(f"{path}: tagged field {tag} does not fill its {size} bytes")
                pos += size
        return pos

    def step(self, step: tuple[Any, ...], pos: int, end: int, path: str) -> int:
        op, name, arg, nullable = step
        if op == _FIXED:
            pos += arg
            if pos > end:
                raise _Truncated(f"truncated {path}.{name}")
            return pos
        if op == _STRING:
            return self._string(pos, end, arg, nullable, f"{path}.{name}")
        if op == _ENTITY:
            if nullable:
                if pos >= end:
                    raise _Truncated(f"truncated {path}.{name}")
                marker = self.buf[pos]
                pos += 1
                if marker == 0xFF:
                    return pos
                if marker != 1:
                    raise _Truncated(f"invalid null marker {marker} of {path}.{name}")
            return self.entity(arg, pos, end, f"{path}.{name}")
        # arrays
        count, pos = self._count(pos, end, arg[1])
        if count < 0:
            if count != -1:
                raise _Truncated(f"invalid count {count} of {path}.{name}")
            if not nullable:
                self.nulls.append(f"{path}.{name}")
            return pos
        left = end - pos
        if op == _ARRAY_FIXED:
            size = count * arg[0]
            if size > left:
                raise _Truncated(f"{path}.{name}: {count} elements need {size} bytes, {left} left")
            return pos + size
        if op == _ARRAY_STRING:
            if count * (1 if arg[0] == 0 else arg[0]) > left:
                raise _Truncated(f"{path}.{name}: {count} strings, {left} bytes left")
            sub = f"{path}.{name}[]"
            for _ in range(count):
                pos = self._string(pos, end, arg[0], False, sub)
            return pos
        cls = arg[0]
        if count * max(min_entity_bytes(cls), 1) > left:
            raise _Truncated(f"{path}.{name}: {count} elements, {left} bytes left")
        sub = f"{path}.{name}[]"
        for _ in range(count):
            pos = self.entity(cls, pos, end, sub)
        return pos


def schema_steps(cls: type[Any]) -> tuple[tuple[tuple[Any, ...], ...], dict[int, tuple[Any, ...]], bool]:
    """The compiled wire schema of ``cls``: (steps, tagged steps by tag, flexible). A step is
    ``(op, field name, arg, nullable)`` with ``op`` one of the ``OP_*`` constants (used by the
    structure-aware fuzzer in ``bench/fuzz`` to write bodies of this shape)."""
    return _program(cls)


OP_FIXED, OP_STRING, OP_ARRAY_FIXED, OP_ARRAY_STRING, OP_ARRAY_ENTITY, OP_ENTITY = (
    _FIXED,
    _STRING,
    _ARRAY_FIXED,
    _ARRAY_STRING,
    _ARRAY_ENTITY,
    _ENTITY,
)


def scan_entity(cls: type[Any], buf: bytes | bytearray | memoryview, offset: int) -> int:
    """Walk one ``cls`` entity at ``offset`` without decoding it; returns its end offset.

    Raises:
        InvalidRequestError: a length or count exceeds the bytes left, a varint is malformed,
            or a tagged field overruns its size.
        NullInNonNullableFieldError: the body is in bounds but a non-nullable array is null.
    """
    scan = _Scan(buf)
    try:
        end = scan.entity(cls, offset, len(buf), cls.__name__)
    except _Truncated as exc:
        raise InvalidRequestError(f"malformed {cls.__name__} v{cls.__version__}: {exc}") from None
    if scan.nulls:
        raise NullInNonNullableFieldError(
            f"{cls.__name__} v{cls.__version__}: non-nullable field(s) {', '.join(scan.nulls)} "
            "serialized as null",
            scan.nulls,
        )
    return end


def replace_null_arrays(entity: Any) -> Any:
    """``entity`` with every null in a non-nullable array field replaced by an empty tuple, so
    an error response can be built from a request kio decoded with such nulls."""
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        kind = classify_field(field)
        if kind.is_array:
            if value is None:
                if not is_optional(field):
                    changes[field.name] = ()
            elif isinstance(kind, EntityTupleField):
                items = tuple(replace_null_arrays(item) for item in value)
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changes[field.name] = items
        elif isinstance(kind, EntityField) and value is not None:
            new = replace_null_arrays(value)
            if new is not value:
                changes[field.name] = new
    return dataclasses.replace(entity, **changes) if changes else entity
