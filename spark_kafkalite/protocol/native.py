"""The one way a compiled module is chosen over its pure-Python twin (issue #10): a :class:`Twin`
names the pair, :func:`load_twin` returns the compiled module when it was built and imports, else
the pure-Python reference with the same API (same public names and signatures, checked by
``tests/unit/test_twin_api.py`` for every twin and every ``.pyx``).

``KAFKALITE_PURE_PYTHON=1`` forces the pure-Python twins (CI runs the record-path tests both ways).
A compiled module that fails to import logs ONE warning naming the cause, then its twin is used;
``.ci/run`` checks :func:`native_status` (through :mod:`spark_kafkalite.native`) so a broken build
cannot hide behind it. ``KAFKALITE_REQUIRE_NATIVE=1`` (also read by ``setup.py`` at build time)
makes that failure an ``ImportError`` instead, in every process that inherits the environment
(Spark's Python workers too), so a run that must be native cannot silently fall back.

The protocol's twins are :data:`RECORD_DECODE`, :data:`RECORD_ENCODE` and :data:`RECORD_REBUILD`
(:data:`TWINS`); the producer declares its own in
:mod:`spark_kafkalite.client.producer.native_extensions`, and :mod:`spark_kafkalite.native` lists
them all (``python -m spark_kafkalite.native [--require]``).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterable
from types import ModuleType
from typing import NamedTuple

__all__ = [
    "PURE_PYTHON_ENV",
    "REQUIRE_NATIVE_ENV",
    "RECORD_DECODE",
    "RECORD_ENCODE",
    "RECORD_REBUILD",
    "TWINS",
    "Twin",
    "load_twin",
    "native_required",
    "native_status",
    "pure_python_forced",
]

log = logging.getLogger(__name__)

PURE_PYTHON_ENV = "KAFKALITE_PURE_PYTHON"
REQUIRE_NATIVE_ENV = "KAFKALITE_REQUIRE_NATIVE"
_TRUE = ("1", "true", "yes", "on")

_failures: dict[str, str] = {}


class Twin(NamedTuple):
    """A compiled module (``compiled``: its dotted name; setup.py builds it from the ``.pyx`` of
    that name) and its pure-Python twin (``pure``), the reference and the fallback."""

    compiled: str
    pure: str


RECORD_DECODE = Twin("spark_kafkalite.protocol._record_decode", "spark_kafkalite.protocol.record_decode")
"""Records section -> lists (``decode_records``, ``walk_records``) or Arrow columns
(``ColumnBuilder``); used by :mod:`~spark_kafkalite.protocol.record_batch` and
:mod:`~spark_kafkalite.protocol.record_columns`."""
RECORD_ENCODE = Twin("spark_kafkalite.protocol._record_encode", "spark_kafkalite.protocol.record_encode")
"""Records builder, murmur2, Arrow rows -> record batches; used through
:mod:`~spark_kafkalite.protocol.record_encoding`."""
RECORD_REBUILD = Twin("spark_kafkalite.protocol._record_rebuild", "spark_kafkalite.protocol.record_rebuild")
"""A produced batch's records with fresh offsets (the leader's recompression); used by
:mod:`~spark_kafkalite.protocol.recompression`."""

TWINS: tuple[Twin, ...] = (RECORD_DECODE, RECORD_ENCODE, RECORD_REBUILD)
"""The protocol package's twins (the producer's are in
:mod:`spark_kafkalite.client.producer.native_extensions`; :mod:`spark_kafkalite.native` has both)."""


def pure_python_forced() -> bool:
    """True when ``KAFKALITE_PURE_PYTHON`` is set to a true value (1, true, yes, on)."""
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() in _TRUE


def native_required() -> bool:
    """True when ``KAFKALITE_REQUIRE_NATIVE`` is set to a true value (1, true, yes, on)."""
    return os.environ.get(REQUIRE_NATIVE_ENV, "").strip().lower() in _TRUE


def load_twin(twin: Twin) -> ModuleType:
    """The module to use of ``twin``: its compiled module or, when ``KAFKALITE_PURE_PYTHON`` forces
    it or the compiled module cannot be imported, its pure-Python twin. The first failed compiled
    import logs one warning naming its cause; later failures (the same broken build) log at debug
    level.

    Raises ImportError when the compiled module cannot be imported and ``KAFKALITE_REQUIRE_NATIVE``
    is set (``KAFKALITE_PURE_PYTHON`` still wins: forcing the twin is not a failure)."""
    if not pure_python_forced():
        try:
            return importlib.import_module(twin.compiled)
        except ImportError as exc:
            if native_required():
                raise ImportError(
                    f"native extension {twin.compiled} is not available ({type(exc).__name__}: {exc}) "
                    f"and {REQUIRE_NATIVE_ENV} is set"
                ) from exc
            if twin.compiled not in _failures:
                _failures[twin.compiled] = f"{type(exc).__name__}: {exc}"
                (log.debug if len(_failures) > 1 else log.warning)(
                    "native extension %s is not available (%s); using the pure-Python fallback %s "
                    "(slower). Reinstall with a C compiler to build it.",
                    twin.compiled,
                    _failures[twin.compiled],
                    twin.pure,
                )
    return importlib.import_module(twin.pure)


def native_status(twins: Iterable[Twin] = TWINS) -> dict[str, str]:
    """Per compiled module of ``twins``: ``"native"`` when it imports (whatever
    ``KAFKALITE_PURE_PYTHON`` says), else the import failure."""
    status = {}
    for twin in twins:
        try:
            importlib.import_module(twin.compiled)
            status[twin.compiled] = "native"
        except ImportError as exc:
            status[twin.compiled] = f"NOT BUILT ({type(exc).__name__}: {exc})"
    return status
