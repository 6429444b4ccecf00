"""Loader of the compiled record extensions (issue #10): the native module when it was built and
imports, else the pure-Python reference with the same API.

``KAFKALITE_PURE_PYTHON=1`` forces the pure-Python fallback (CI runs the record-path tests both
ways). A native module that fails to import logs ONE warning naming the cause, then the fallback
is used; ``.ci/run`` checks :func:`native_status` (through :mod:`spark_kafkalite.native`) so a broken build cannot hide behind it.
``KAFKALITE_REQUIRE_NATIVE=1`` (also read by ``setup.py`` at build time) makes that failure an
``ImportError`` instead, in every process that inherits the environment (Spark's Python workers
too), so a run that must be native cannot silently fall back.

Extensions: ``_record_decode`` (records section -> lists / Arrow columns, twin of
:mod:`spark_kafkalite.protocol.record_decode`), ``_record_encode`` (records builder, murmur2,
Arrow rows -> record batches, twin of :mod:`spark_kafkalite.protocol.record_encode`, loaded by
:mod:`spark_kafkalite.protocol.record_encoding`), ``_record_rebuild`` (a produced batch's records
with fresh offsets for the leader's recompression, twin of
:mod:`spark_kafkalite.protocol.record_rebuild`, loaded by
:mod:`spark_kafkalite.protocol.recompression`). The client's modules load their own twins with
:func:`load_extension` (:mod:`spark_kafkalite.client.producer.native_extensions` lists them);
``python -m spark_kafkalite.native [--require]`` reports (or requires) every compiled module.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from types import ModuleType

__all__ = [
    "PURE_PYTHON_ENV",
    "REQUIRE_NATIVE_ENV",
    "pure_python_forced",
    "native_required",
    "load_extension",
    "native_status",
    "record_decode",
]

log = logging.getLogger(__name__)

PURE_PYTHON_ENV = "KAFKALITE_PURE_PYTHON"
REQUIRE_NATIVE_ENV = "KAFKALITE_REQUIRE_NATIVE"
_TRUE = ("1", "true", "yes", "on")

_failures: dict[str, str] = {}

EXTENSIONS: dict[str, str] = {
    "spark_kafkalite.protocol._record_decode": "spark_kafkalite.protocol.record_decode",
    "spark_kafkalite.protocol._record_encode": "spark_kafkalite.protocol.record_encode",
    "spark_kafkalite.protocol._record_rebuild": "spark_kafkalite.protocol.record_rebuild",
}
"""The protocol package's compiled modules and their pure-Python twins (setup.py builds the
``.pyx`` of each; the client's are in :mod:`spark_kafkalite.client.producer.native_extensions`,
:mod:`spark_kafkalite.native` checks both)."""


def pure_python_forced() -> bool:
    """True when ``KAFKALITE_PURE_PYTHON`` is set to a true value (1, true, yes)."""
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() in _TRUE


def native_required() -> bool:
    """True when ``KAFKALITE_REQUIRE_NATIVE`` is set to a true value (1, true, yes)."""
    return os.environ.get(REQUIRE_NATIVE_ENV, "").strip().lower() in _TRUE


def load_extension(native_name: str, fallback_name: str) -> ModuleType:
    """Import ``native_name`` (a compiled module) or, when forced or when it cannot be imported,
    ``fallback_name`` (its pure-Python twin). The first failed native import logs one warning
    naming its cause; later failures (the same broken build) log at debug level.

    Raises ImportError when the native module cannot be imported and ``KAFKALITE_REQUIRE_NATIVE``
    is set (``KAFKALITE_PURE_PYTHON`` still wins: forcing the twin is not a failure)."""
    if not pure_python_forced():
        try:
            return importlib.import_module(native_name)
        except ImportError as exc:
            if native_required():
                raise ImportError(
                    f"native extension {native_name} is not available ({type(exc).__name__}: {exc}) "
                    f"and {REQUIRE_NATIVE_ENV} is set"
                ) from exc
            if native_name not in _failures:
                _failures[native_name] = f"{type(exc).__name__}: {exc}"
                (log.debug if len(_failures) > 1 else log.warning)(
                    "native extension %s is not available (%s); using the pure-Python fallback %s "
                    "(slower). Reinstall with a C compiler to build it.",
                    native_name,
                    _failures[native_name],
                    fallback_name,
                )
    return importlib.import_module(fallback_name)


record_decode = load_extension(
    "spark_kafkalite.protocol._record_decode", EXTENSIONS["spark_kafkalite.protocol._record_decode"]
)
"""``decode_records`` and ``ColumnBuilder``: native when built, else pure Python."""


def native_status(extensions: Mapping[str, str] = EXTENSIONS) -> dict[str, str]:
    """Per native module of ``extensions`` (native name -> twin): ``"native"`` when it imports
    (whatever ``KAFKALITE_PURE_PYTHON`` says), else the import failure."""
    status = {}
    for name in extensions:
        try:
            importlib.import_module(name)
            status[name] = "native"
        except ImportError as exc:
            status[name] = f"NOT BUILT ({type(exc).__name__}: {exc})"
    return status
