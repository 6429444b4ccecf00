"""MkDocs hooks of the docs site (``mkdocs.yml``): the repository's ``BENCHMARKS.md``, which
``python -m bench`` generates at the repository root, is served as the page ``results.md`` so the
site shows the latest figures without a second copy in ``docs/``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

BENCHMARKS_MD = Path(__file__).resolve().parents[1] / "BENCHMARKS.md"


def on_files(files: Files, config: Any) -> Files:
    files.append(File.generated(config, "results.md", abs_src_path=str(BENCHMARKS_MD)))
    return files
