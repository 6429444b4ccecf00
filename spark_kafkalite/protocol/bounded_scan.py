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


# -- the scanner, generated per entity class ------------------------------------------------------
# A straight-line Python function per kio class (consecutive fixed-size fields merged, one-byte
# varints inlined) walks the bytes ~5x faster than an interpreter over the steps: the scan runs
# on every request the broker decodes and every response the client decodes.


def _tags(buf: Any, pos: int, end: int, nulls: list[str], tagged: dict[int, Any], where: str) -> int:
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


class _Gen:
    """Python source for the scan of a list of steps."""

    def __init__(self, where: str, env: dict[str, Any]) -> None:
        self.where = where
        self.env = env
        self.lines: list[str] = []
        self.var = 0

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def fresh(self) -> str:
        self.var += 1
        return f"v{self.var}"

    def _length(self, ind: int, width: int, var: str, what: str) -> None:
        """Read a length/count into ``var``: compact (uvarint - 1), int16 or int32."""
        if width == 0:
            self.emit(ind, "if pos >= end:")
            self.emit(ind + 1, f"raise _T('truncated length of {what}')")
            self.emit(ind, f"{var} = buf[pos]")
            self.emit(ind, f"if {var} < 0x80:")
            self.emit(ind + 1, "pos += 1")
            self.emit(ind, "else:")
            self.emit(ind + 1, f"{var}, pos = _uv(buf, pos, end)")
            self.emit(ind, f"{var} -= 1")
        else:
            unpack = "_i16" if width == 2 else "_i32"
            self.emit(ind, f"if pos + {width} > end:")
            self.emit(ind + 1, f"raise _T('truncated length of {what}')")
            self.emit(ind, f"{var} = {unpack}(buf, pos)[0]")
            self.emit(ind, f"pos += {width}")

    def string(self, ind: int, width: int, nullable: bool, what: str) -> None:
        n = self.fresh()
        self._length(ind, width, n, what)
        self.emit(ind, f"if {n} < 0:")
        if nullable:
            self.emit(ind + 1, f"if {n} != -1:")
            self.emit(ind + 2, f"raise _T('invalid length ' + str({n}) + ' of {what}')")
        else:
            self.emit(ind + 1, f"raise _T('invalid length ' + str({n}) + ' of {what}')")
        self.emit(ind, f"elif {n} > end - pos:")
        self.emit(ind + 1, f"raise _T('{what} claims ' + str({n}) + ' bytes, ' + str(end - pos) + ' left')")
        self.emit(ind, "else:")
        self.emit(ind + 1, f"pos += {n}")

    def steps(self, ind: int, steps: tuple[tuple[Any, ...], ...]) -> None:
        fixed = 0
        fixed_name = ""
        for op, name, arg, nullable in (*steps, (None, "", None, False)):
            if op == _FIXED:
                fixed_name = fixed_name or name
                fixed += arg
                continue
            what = f"{self.where}.{fixed_name}"
            if fixed:
                self.emit(ind, f"pos += {fixed}")
                self.emit(ind, "if pos > end:")
                self.emit(ind + 1, f"raise _T('truncated {what}')")
                fixed, fixed_name = 0, ""
            if op is None:
                break
            what = f"{self.where}.{name}"
            if op == _STRING:
                self.string(ind, arg, nullable, what)
            elif op == _ENTITY:
                child = self.child(arg)
                if nullable:
                    self.emit(ind, "if pos >= end:")
                    self.emit(ind + 1, f"raise _T('truncated {what}')")
                    self.emit(ind, "pos += 1")
                    self.emit(ind, "if buf[pos - 1] == 1:")
                    self.emit(ind + 1, f"pos = {child}(buf, pos, end, nulls)")
                    self.emit(ind, "elif buf[pos - 1] != 0xFF:")
                    self.emit(ind + 1, f"raise _T('invalid null marker of {what}')")
                else:
                    self.emit(ind, f"pos = {child}(buf, pos, end, nulls)")
            else:
                self.array(ind, op, arg, nullable, what)

    def array(self, ind: int, op: int, arg: Any, nullable: bool, what: str) -> None:
        n = self.fresh()
        self._length(ind, 0 if arg[1] else 4, n, what)
        self.emit(ind, f"if {n} < 0:")
        self.emit(ind + 1, f"if {n} != -1:")
        self.emit(ind + 2, f"raise _T('invalid count ' + str({n}) + ' of {what}')")
        if not nullable:
            self.emit(ind + 1, f"nulls.append('{what}')")
        self.emit(ind, "else:")
        left = f"str({n}) + ' elements, ' + str(end - pos) + ' bytes left'"
        if op == _ARRAY_FIXED:
            self.emit(ind + 1, f"if {n} * {arg[0]} > end - pos:")
            self.emit(ind + 2, f"raise _T('{what}: ' + {left})")
            self.emit(ind + 1, f"pos += {n} * {arg[0]}")
        elif op == _ARRAY_STRING:
            self.emit(ind + 1, f"if {n} * {arg[0] or 1} > end - pos:")
            self.emit(ind + 2, f"raise _T('{what}: ' + {left})")
            self.emit(ind + 1, f"for _ in range({n}):")
            self.string(ind + 2, arg[0], False, what + "[]")
        else:
            cls = arg[0]
            child = self.child(cls)
            self.emit(ind + 1, f"if {n} * {max(min_entity_bytes(cls), 1)} > end - pos:")
            self.emit(ind + 2, f"raise _T('{what}: ' + {left})")
            self.emit(ind + 1, f"for _ in range({n}):")
            self.emit(ind + 2, f"pos = {child}(buf, pos, end, nulls)")

    def child(self, cls: type[Any]) -> str:
        name = f"_scan_{id(cls)}"
        self.env[name] = _scanner(cls)
        return name


def _compile(name: str, gen: _Gen) -> Any:
    source = (
        f"def {name}(buf, pos, end, nulls):\n" + "\n".join(gen.lines or ["    pass"]) + "\n    return pos\n"
    )
    namespace = dict(gen.env)
    exec(compile(source, f"<bounded_scan {name}>", "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace[name]


def _base_env() -> dict[str, Any]:
    return {"_T": _Truncated, "_uv": read_unsigned_varint, "_i16": _I16.unpack_from, "_i32": _I32.unpack_from}


@class_cache
def _scanner(cls: type[Any]) -> Any:
    """The generated ``scan(buf, pos, end, nulls) -> end position`` for one ``cls`` entity."""
    steps, tagged, flexible = _program(cls)
    where = cls.__name__
    env = _base_env()
    gen = _Gen(where, env)
    gen.steps(1, steps)
    if flexible:
        tag_scanners = {}
        for tag, step in tagged.items():
            tag_gen = _Gen(f"{where}.{step[1]}", _base_env())
            tag_gen.steps(1, (step,))
            tag_scanners[tag] = _compile(f"_tag_{tag}", tag_gen)
        env["_tagged"] = tag_scanners
        env["_tags"] = _tags
        gen.emit(1, "if pos < end and buf[pos] == 0:")
        gen.emit(2, "pos += 1")
        gen.emit(1, "else:")
        gen.emit(2, f"pos = _tags(buf, pos, end, nulls, _tagged, '{where}')")
    return _compile(f"scan_{where}", gen)


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
