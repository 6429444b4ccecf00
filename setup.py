"""Builds the optional Cython extensions of the record hot paths (issue #10); everything else is
in pyproject.toml. Every ``spark_kafkalite/protocol/_*.pyx`` and
``spark_kafkalite/client/producer/_*.pyx`` is compiled. Without a C compiler (or
Cython) the install still succeeds, pure-Python, and says so once; ``KAFKALITE_REQUIRE_NATIVE=1``
turns that into an error (``.ci/run`` also checks the built module after installing)."""

from __future__ import annotations

import glob
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

_REQUIRE = os.environ.get("KAFKALITE_REQUIRE_NATIVE", "").strip().lower() in ("1", "true", "yes")
_warned = False


def _say_pure_python(reason: str) -> None:
    global _warned
    if _REQUIRE:
        raise SystemExit(f"spark-kafkalite: native extensions could not be built: {reason}")
    if not _warned:
        _warned = True
        print(
            f"WARNING: spark-kafkalite native extensions not built ({reason}); "
            "installing the pure-Python fallback (slower record decoding/encoding).",
            file=sys.stderr,
        )


class OptionalBuildExt(build_ext):
    """build_ext that falls back to pure Python when compiling fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler/setup failure means "no native"
            _say_pure_python(f"{type(exc).__name__}: {exc}")

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            _say_pure_python(f"{ext.name}: {type(exc).__name__}: {exc}")


def _extensions() -> list:
    sources = sorted(
        glob.glob("spark_kafkalite/protocol/_*.pyx") + glob.glob("spark_kafkalite/client/producer/_*.pyx")
    )
    if not sources:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as exc:
        _say_pure_python(f"Cython is not installed: {exc}")
        return []
    try:
        return cythonize(sources, compiler_directives={"language_level": "3"}, quiet=True)
    except Exception as exc:  # noqa: BLE001
        _say_pure_python(f"cythonize failed: {type(exc).__name__}: {exc}")
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
