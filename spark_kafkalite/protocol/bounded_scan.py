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
from collections.abc import Callable
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
from spark_kafkalite.protocol.varint import VarintError, read_unsigned_varint

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
    if not isinstance(kind, PrimitiveField):
        raise TypeError(f"no bounded reader for field kind {type(kind).__name__} ({name})")
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


# -- the scanner, composed per entity class -------------------------------------------------------
# One closure per variable-size field (string, bytes, array, struct), each skipping the run of
# fixed-size fields before it with one bounds check, chained by a per-class ``scan`` that ends with
# the tagged fields: plain code, built once per kio class (``class_cache``), no generated source.
# The scan runs on every request the broker decodes and every response the client decodes, so
# one-byte lengths and an empty tag section are read inline and nothing is allocated.

Scan = Callable[[Any, int, int, list[str]], int]
"""``scan(buf, pos, end, nulls) -> position after the entity``; appends the dotted path of each
null non-nullable array to ``nulls``; raises ``_Truncated`` / ``VarintError`` past ``end``."""


def _tags(buf: Any, pos: int, end: int, nulls: list[str], tagged: dict[int, Scan], where: str) -> int:
    count, pos = read_unsigned_varint(buf, pos, end)
    if count > end - pos:
        raise _Truncated(f"{where}: {count} tagged fields, {end - pos} bytes left")
    for _ in range(count):
        tag, pos = read_unsigned_varint(buf, pos, end)
        size, pos = read_unsigned_varint(buf, pos, end)
        if size > end - pos:
            raise _Truncated(f"{where}: tagged field {tag} claims {size} bytes, {end - pos} left")
        scan = tagged.get(tag)
        if scan is not None:
            stop = pos + size
            if scan(buf, pos, stop, nulls) != stop:
                raise _Truncated(f"{where}: tagged field {tag} does not fill its {size} bytes")
        pos += size
    return pos


def _read_length(buf: Any, pos: int, end: int, width: int, what: str) -> tuple[int, int]:
    """A length or count at ``pos``: compact (unsigned varint - 1, ``width`` 0), int16 or int32;
    returns ``(value, position after it)``."""
    if width == 0:
        if pos >= end:
            raise _Truncated(f"truncated length of {what}")
        n = buf[pos]
        if n < 0x80:
            return n - 1, pos + 1
        n, pos = read_unsigned_varint(buf, pos, end)
        return n - 1, pos
    if pos + width > end:
        raise _Truncated(f"truncated length of {what}")
    return (_I16 if width == 2 else _I32).unpack_from(buf, pos)[0], pos + width


def _fixed_step(size: int, what: str) -> Scan:
    def fixed(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
        pos += size
        if pos > end:
            raise _Truncated(f"truncated {what}")
        return pos

    return fixed


def _skip_string(n: int, pos: int, end: int, nullable: bool, what: str) -> int:
    """The position after a string / bytes field of length ``n`` starting at ``pos``."""
    if n < 0:
        if nullable and n == -1:
            return pos
        raise _Truncated(f"invalid length {n} of {what}")
    if n > end - pos:
        raise _Truncated(f"{what} claims {n} bytes, {end - pos} left")
    return pos + n


# Each step below first skips ``skip`` bytes of fixed-size fields before its own field (named
# ``skip_what`` when they are cut short), so that a run of fixed fields costs no call of its own.


def _string_step(width: int, nullable: bool, what: str, skip: int, skip_what: str) -> Scan:
    if width == 0:

        def compact_string(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
            pos += skip
            if pos < end:
                n = buf[pos]
                if n < 0x80:  # a one-byte length: the common case
                    n -= 1
                    pos += 1
                    if 0 <= n <= end - pos:
                        return pos + n
                    return _skip_string(n, pos, end, nullable, what)
            elif pos > end:
                raise _Truncated(f"truncated {skip_what}")
            else:
                raise _Truncated(f"truncated length of {what}")
            n, pos = read_unsigned_varint(buf, pos, end)  # a longer length (records, mostly)
            n -= 1
            if 0 <= n <= end - pos:
                return pos + n
            return _skip_string(n, pos, end, nullable, what)

        return compact_string

    unpack = (_I16 if width == 2 else _I32).unpack_from

    def string(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
        pos += skip
        if pos + width > end:
            raise _Truncated(f"truncated {skip_what}" if pos > end else f"truncated length of {what}")
        n = unpack(buf, pos)[0]
        pos += width
        if 0 <= n <= end - pos:
            return pos + n
        return _skip_string(n, pos, end, nullable, what)

    return string


def _entity_step(child: Scan, nullable: bool, what: str, skip: int, skip_what: str) -> Scan:
    if not nullable:
        if not skip:
            return child

        def entity(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
            pos += skip
            if pos > end:
                raise _Truncated(f"truncated {skip_what}")
            return child(buf, pos, end, nulls)

        return entity

    def nullable_entity(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
        pos += skip
        if pos >= end:
            raise _Truncated(f"truncated {skip_what}" if pos > end else f"truncated {what}")
        marker = buf[pos]
        if marker == 1:
            return child(buf, pos + 1, end, nulls)
        if marker != 0xFF:
            raise _Truncated(f"invalid null marker of {what}")
        return pos + 1

    return nullable_entity


def _array_step(op: int, arg: Any, nullable: bool, what: str, skip: int, skip_what: str) -> Scan:
    compact = bool(arg[1])
    if op == _ARRAY_FIXED:
        element_bytes = arg[0]
        element: Scan | None = None
    elif op == _ARRAY_STRING:
        element_bytes = arg[0] or 1
        element = _string_step(arg[0], False, what + "[]", 0, "")
    else:
        element_bytes = max(min_entity_bytes(arg[0]), 1)
        element = _scanner(arg[0])

    def array(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
        pos += skip
        if compact and pos < end and buf[pos] < 0x80:  # a one-byte count: the common case
            n = buf[pos] - 1
            pos += 1
        else:
            if pos > end:
                raise _Truncated(f"truncated {skip_what}")
            n, pos = _read_length(buf, pos, end, 0 if compact else 4, what)
        if n < 0:
            if n != -1:
                raise _Truncated(f"invalid count {n} of {what}")
            if not nullable:
                nulls.append(what)
            return pos
        if n * element_bytes > end - pos:
            raise _Truncated(f"{what}: {n} elements, {end - pos} bytes left")
        if element is None:
            return pos + n * element_bytes
        for _ in range(n):
            pos = element(buf, pos, end, nulls)
        return pos

    return array


def _steps_scanner(where: str, steps: tuple[tuple[Any, ...], ...]) -> tuple[tuple[Scan, ...], int, str]:
    """The step closures of ``steps`` in wire order, each fixed-size run folded into the step
    after it; returns ``(steps, trailing fixed bytes, name of the first trailing field)``."""
    out: list[Scan] = []
    fixed = 0
    fixed_what = ""
    for op, name, arg, nullable in steps:
        if op == _FIXED:
            fixed_what = fixed_what or f"{where}.{name}"
            fixed += arg
            continue
        what = f"{where}.{name}"
        if op == _STRING:
            out.append(_string_step(arg, nullable, what, fixed, fixed_what))
        elif op == _ENTITY:
            out.append(_entity_step(_scanner(arg), nullable, what, fixed, fixed_what))
        else:
            out.append(_array_step(op, arg, nullable, what, fixed, fixed_what))
        fixed, fixed_what = 0, ""
    return tuple(out), fixed, fixed_what


def _chain(where: str, steps: tuple[tuple[Any, ...], ...]) -> Scan:
    """The scan of ``steps`` with nothing after them (a non-flexible entity, a tagged field)."""
    ops, tail, tail_what = _steps_scanner(where, steps)
    if tail:
        ops = (*ops, _fixed_step(tail, tail_what))
    if not ops:
        return _no_fields
    if len(ops) == 1:
        return ops[0]

    def scan(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
        for op in ops:
            pos = op(buf, pos, end, nulls)
        return pos

    return scan


@class_cache
def _scanner(cls: type[Any]) -> Scan:
    """The ``scan(buf, pos, end, nulls) -> end position`` of one ``cls`` entity."""
    steps, tagged, flexible = _program(cls)
    where = cls.__name__
    if not flexible:
        return _chain(where, steps)
    tag_scanners = {tag: _chain(f"{where}.{step[1]}", (step,)) for tag, step in tagged.items()}
    ops, tail, tail_what = _steps_scanner(where, steps)
    # After the fields: the tagged fields (KIP-482), most often none (a single 0 byte).
    if not ops:

        def scan_fixed(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
            pos += tail
            if pos > end:
                raise _Truncated(f"truncated {tail_what}")
            if pos < end and buf[pos] == 0:
                return pos + 1
            return _tags(buf, pos, end, nulls, tag_scanners, where)

        return scan_fixed

    if len(ops) == 1:
        only = ops[0]

        def scan_one(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
            pos = only(buf, pos, end, nulls) + tail
            if pos > end:
                raise _Truncated(f"truncated {tail_what}")
            if pos < end and buf[pos] == 0:
                return pos + 1
            return _tags(buf, pos, end, nulls, tag_scanners, where)

        return scan_one

    if len(ops) == 2:  # e.g. a Fetch response partition: aborted transactions, then records
        first, second = ops

        def scan_two(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
            pos = second(buf, first(buf, pos, end, nulls), end, nulls) + tail
            if pos > end:
                raise _Truncated(f"truncated {tail_what}")
            if pos < end and buf[pos] == 0:
                return pos + 1
            return _tags(buf, pos, end, nulls, tag_scanners, where)

        return scan_two

    def scan(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
        for op in ops:
            pos = op(buf, pos, end, nulls)
        pos += tail
        if pos > end:
            raise _Truncated(f"truncated {tail_what}")
        if pos < end and buf[pos] == 0:
            return pos + 1
        return _tags(buf, pos, end, nulls, tag_scanners, where)

    return scan


def _no_fields(buf: Any, pos: int, end: int, nulls: list[str]) -> int:
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
    nulls: list[str] = []
    try:
        end = _scanner(cls)(buf, offset, len(buf), nulls)
    except (_Truncated, VarintError) as exc:
        raise InvalidRequestError(f"malformed {cls.__name__} v{cls.__version__}: {exc}") from None
    if nulls:
        raise NullInNonNullableFieldError(
            f"{cls.__name__} v{cls.__version__}: non-nullable field(s) {', '.join(nulls)} serialized as null",
            nulls,
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
