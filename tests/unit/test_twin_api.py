"""Every compiled module and its pure-Python twin export the same API: the same ``__all__``, and
for each name the same kind (class, function, other) and, for functions, methods and
constructors, the same parameters (names, kinds, defaults; annotations are the pure twin's only).
Every ``.pyx`` in the source tree must be a twin of :data:`spark_kafkalite.native.TWINS`, the one
registry :func:`spark_kafkalite.protocol.native.load_twin` selects from.

The compiled modules are built with ``binding=True`` (Cython functions carry their signatures)
and ``embedsignature=True``: a ``cdef class`` constructor is a slot wrapper without a signature,
so its ``__init__`` has a docstring whose first line Cython writes as the signature. A ``cdef
class`` without an ``__init__`` of its own (``__cinit__`` only) must construct with no argument,
as its twin does."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import types
from pathlib import Path
from typing import Any

import pytest

from spark_kafkalite.native import TWINS
from spark_kafkalite.protocol.native import Twin

ROOT = Path(__file__).resolve().parents[2]
TWIN_USAGE = ROOT / ".ci" / "twin_usage.py"

Params = list[tuple[str, str, Any]]
_NO_DEFAULT = "<none>"


def _params(signature: inspect.Signature) -> Params:
    return [
        (p.name, p.kind.name, _NO_DEFAULT if p.default is inspect.Parameter.empty else p.default)
        for p in signature.parameters.values()
    ]


def _params_from_text(text: str) -> Params:
    """Parameters of a signature line Cython embedded (``__init__(self, a, b: int = 0)``)."""
    args = ast.parse(f"def f{text[text.index('(') :]}: pass").body[0].args  # type: ignore[attr-defined]
    positional = args.posonlyargs + args.args
    defaults = [_NO_DEFAULT] * (len(positional) - len(args.defaults)) + [
        ast.literal_eval(d) for d in args.defaults
    ]
    out: Params = [(a.arg, "POSITIONAL_ONLY", d) for a, d in zip(args.posonlyargs, defaults, strict=False)]
    out += [
        (a.arg, "POSITIONAL_OR_KEYWORD", d)
        for a, d in zip(args.args, defaults[len(args.posonlyargs) :], strict=True)
    ]
    if args.vararg:
        out.append((args.vararg.arg, "VAR_POSITIONAL", _NO_DEFAULT))
    out += [
        (a.arg, "KEYWORD_ONLY", _NO_DEFAULT if d is None else ast.literal_eval(d))
        for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    if args.kwarg:
        out.append((args.kwarg.arg, "VAR_KEYWORD", _NO_DEFAULT))
    return out


def _constructor(cls: type) -> Params | None:
    """The parameters of ``cls(...)`` (self excluded); None when a compiled class defines no
    ``__init__`` of its own."""
    init = vars(cls).get("__init__")
    if init is None or isinstance(init, types.WrapperDescriptorType):
        doc = (init.__doc__ or "") if init is not None else ""
        if not doc.startswith("__init__("):
            if init is not None:
                raise AssertionError(
                    f"{cls.__qualname__}.__init__ has no docstring: Cython embeds no signature"
                )
            for base in cls.__mro__[1:]:
                if "__init__" in vars(base) and base is not object:
                    return _constructor(base)
            return None
        return _params_from_text(doc.splitlines()[0])[1:]
    return _params(inspect.signature(cls))


def _kind(obj: Any) -> str:
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return type(obj).__name__


def _members(cls: type) -> dict[str, Any]:
    """Public attributes of ``cls`` that it or its project bases define (not ``object``'s or a
    builtin base's), with ``__len__``/``__iter__``/``__call__`` and the context manager methods."""
    names: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        if base.__module__ == "builtins":
            continue
        for name, value in vars(base).items():
            if not name.startswith("_") or name in (
                "__len__",
                "__iter__",
                "__call__",
                "__enter__",
                "__exit__",
            ):
                names[name] = value
    return names


def api_differences(compiled: types.ModuleType, pure: types.ModuleType) -> list[str]:
    """What differs between the public API of ``compiled`` and ``pure`` (empty when equal)."""
    out: list[str] = []
    names = {}
    for module in (compiled, pure):
        exported = getattr(module, "__all__", None)
        if exported is None:
            out.append(f"{module.__name__} has no __all__")
            return out
        names[module] = set(exported)
    for name in sorted(names[compiled] ^ names[pure]):
        where, missing = (compiled, pure) if name in names[compiled] else (pure, compiled)
        out.append(f"{name}: in {where.__name__}.__all__, missing from {missing.__name__}.__all__")
    for name in sorted(names[compiled] & names[pure]):
        a, b = getattr(compiled, name, None), getattr(pure, name, None)
        if a is None or b is None:
            out.append(f"{name}: in __all__ but not defined in {(compiled if a is None else pure).__name__}")
        elif _kind(a) != _kind(b):
            out.append(f"{name}: {_kind(a)} in {compiled.__name__}, {_kind(b)} in {pure.__name__}")
        elif inspect.isclass(a) and a is not b:
            out += _class_differences(name, a, b)
        elif _kind(a) == "function" and _params(inspect.signature(a)) != _params(inspect.signature(b)):
            out.append(f"{name}{inspect.signature(a)} != {name}{inspect.signature(b)}")
    return out


def _class_differences(name: str, compiled: type, pure: type) -> list[str]:
    out = []
    compiled_init, pure_init = _constructor(compiled), _params(inspect.signature(pure))
    if compiled_init is None:  # __cinit__ only: constructs with no argument
        compiled()
        compiled_init = []
    if compiled_init != pure_init:
        out.append(f"{name}(...): {compiled_init} != {pure_init}")
    a, b = _members(compiled), _members(pure)
    for member in sorted(set(a) ^ set(b)):
        out.append(f"{name}.{member}: only in {(compiled if member in a else pure).__module__}")
    for member in sorted(set(a) & set(b)):
        x, y = a[member], b[member]
        if callable(x) != callable(y):
            out.append(f"{name}.{member}: a method in one twin, an attribute in the other")
        elif isinstance(
            x, types.WrapperDescriptorType
        ):  # a C slot (__len__): its signature is the protocol's
            continue
        elif callable(x) and _params(inspect.signature(x)) != _params(inspect.signature(y)):
            out.append(f"{name}.{member}{inspect.signature(x)} != {inspect.signature(y)}")
    return out


def _compiled_or_skip(twin: Twin) -> types.ModuleType:
    try:
        return importlib.import_module(twin.compiled)
    except ImportError as exc:  # a pure-Python install; CI requires the build (.ci/run)
        pytest.skip(f"{twin.compiled} not built: {exc}")


@pytest.mark.parametrize("twin", TWINS, ids=lambda twin: twin.compiled.rsplit(".", 1)[-1])
def test_compiled_and_pure_twins_export_the_same_api(twin: Twin) -> None:
    compiled = _compiled_or_skip(twin)
    assert api_differences(compiled, importlib.import_module(twin.pure)) == []


def test_every_pyx_is_a_registered_twin() -> None:
    on_disk = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for top in ("spark_kafkalite", "broker")
        for path in (ROOT / top).rglob("*.pyx")
    }
    assert on_disk, "no .pyx found: the test looks in the wrong place"
    assert on_disk == {twin.compiled for twin in TWINS}


def test_the_pure_pass_tracer_follows_every_twin() -> None:
    """``.ci/twin_usage.py`` (which unit tests the pure-Python pass of CI must run) traces calls
    into the pure twins by file: its list must name every twin of the registry."""
    files = re.search(r"TWIN_FILES = \(([^)]*)\)", TWIN_USAGE.read_text())
    assert files is not None
    assert set(re.findall(r'"([^"]+)"', files.group(1))) == {
        twin.pure.replace(".", "/") + ".py" for twin in TWINS
    }


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)  # noqa: S102 - the checker's own test input
    return module


_PURE = """
__all__ = ["Builder", "encode", "LIMIT"]
LIMIT = 1
class Builder:
    def __init__(self, size, *, level=0): ...
    def append(self, key, value=None): ...
    @property
    def count(self): return 0
def encode(data, start=0): ...
"""


def test_the_check_names_a_missing_export_and_a_changed_signature() -> None:
    pure = _module("twin_pure", _PURE)
    assert api_differences(_module("twin_same", _PURE), pure) == []
    missing = _module("twin_missing", _PURE.replace('"encode", ', ""))
    assert api_differences(missing, pure) == [
        "encode: in twin_pure.__all__, missing from twin_missing.__all__"
    ]
    changed = _module(
        "twin_changed",
        _PURE.replace("def encode(data, start=0)", "def encode(data, start=1)")
        .replace("*, level=0", "level=0")
        .replace("def append(self, key, value=None)", "def append(self, key)")
        .replace("    @property\n    def count(self): return 0\n", "    def flush(self): ...\n"),
    )
    assert api_differences(changed, pure) == [
        "Builder(...): [('size', 'POSITIONAL_OR_KEYWORD', '<none>'), ('level', 'POSITIONAL_OR_KEYWORD', 0)]"
        " != [('size', 'POSITIONAL_OR_KEYWORD', '<none>'), ('level', 'KEYWORD_ONLY', 0)]",
        "Builder.count: only in twin_pure",
        "Builder.flush: only in twin_changed",
        "Builder.append(self, key) != (self, key, value=None)",
        "encode(data, start=1) != encode(data, start=0)",
    ]


def test_the_check_reads_a_compiled_constructor_from_its_embedded_signature() -> None:
    assert _params_from_text("__init__(self, size, *args, level: int = 0, **kwargs)")[1:] == [
        ("size", "POSITIONAL_OR_KEYWORD", _NO_DEFAULT),
        ("args", "VAR_POSITIONAL", _NO_DEFAULT),
        ("level", "KEYWORD_ONLY", 0),
        ("kwargs", "VAR_KEYWORD", _NO_DEFAULT),
    ]
