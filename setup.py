"""Builds the optional Cython extensions of the record hot paths (issue #10); everything else is
in pyproject.toml. Every ``.pyx`` under ``spark_kafkalite/`` is compiled (each is a twin of
``spark_kafkalite.native.TWINS``; ``tests/unit/test_twin_api.py`` checks both lists agree). Without a C compiler (or
Cython) the install still succeeds, pure-Python, and says so once; ``KAFKALITE_REQUIRE_NATIVE=1``
turns that into an error (``.ci/run`` also checks the built module after installing).

A wheel build also copies the compiled modules next to their sources (issue #20). ``pip install .``
builds in the source tree, and a source checkout is what Python imports first whenever it is on
``sys.path`` before site-packages: ``pytest`` from the checkout (``pythonpath = ["."]``), a script
run from it, and Spark's Python workers, which start ``python -m pyspark.daemon`` in the driver's
working directory. With the copies, all of them run the compiled path, not the pure-Python twins.
The copies are what an editable install or ``build_ext --inplace`` also puts there (ignored by
git); a read-only source tree only skips them."""

from __future__ import annotations

import glob
import os
import shutil
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
    """build_ext that falls back to pure Python when compiling fails, compiles the extensions in
    parallel (one compiler per CPU) without debug information, and copies what it built into the
    source tree."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":  # gcc/clang: no DWARF (a quarter of the compile
            for ext in self.extensions:  # time, 8x the object size); symbols stay for profilers
                ext.extra_compile_args = [*ext.extra_compile_args, "-g0"]
        super().build_extensions()

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - any compiler/setup failure means "no native"
            _say_pure_python(f"{type(exc).__name__}: {exc}")
            return
        if not self.inplace:
            self._copy_to_source_tree()

    def _copy_to_source_tree(self) -> None:
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            fullname = self.get_ext_fullname(ext.name)
            built = os.path.join(self.build_lib, self.get_ext_filename(fullname))
            package_dir = build_py.get_package_dir(fullname.rpartition(".")[0])
            if not os.path.exists(built) or not os.path.isdir(package_dir):
                continue  # not built (reported above), or not building from a source tree
            target = os.path.join(package_dir, os.path.basename(built))
            try:  # a new file renamed over the old one: a process that loaded the old one keeps it
                shutil.copyfile(built, target + ".tmp")
                os.replace(target + ".tmp", target)
            except OSError as exc:  # a read-only checkout: the installed copy is still native
                print(f"spark-kafkalite: {built} not copied into the source tree: {exc}", file=sys.stderr)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            _say_pure_python(f"{ext.name}: {type(exc).__name__}: {exc}")


def _extensions() -> list:
    sources = sorted(glob.glob("spark_kafkalite/**/*.pyx", recursive=True))
    if not sources:  # an sdist made without MANIFEST.in's .pyx
        _say_pure_python("no .pyx sources in this source tree")
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
