"""Versioned JSON state files of the broker (``{"version": N, ...}``): the single-node broker's
ACLs and SCRAM credentials (:mod:`broker.controller.acl_store`, :mod:`broker.controller.scram_store`)
and its topic config overrides (:mod:`broker.controller.topic_config_store`), which stand in for
the KRaft metadata log when there is no quorum. Written with
:func:`spark_kafkalite.atomic_file.write_atomically` (tmp file, fsync, rename, fsync of the directory)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from spark_kafkalite.atomic_file import write_atomically

__all__ = ["load_versioned_json", "save_versioned_json"]

_T = TypeVar("_T")


def load_versioned_json(path: Path, version: int, what: str, parse: Callable[[Any], _T]) -> _T | None:
    """``parse(payload)`` of the file at ``path`` (None when the file is missing).

    Raises:
        OSError: the file exists but cannot be read.
        ValueError: ``corrupt <what> file <path>: ...``: not JSON, another ``version``, or
            ``parse`` failed (ValueError, KeyError, TypeError or AttributeError).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        payload = json.loads(text)
        if payload.get("version") != version:
            raise ValueError(f"unknown version {payload.get('version')!r}")
        return parse(payload)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"corrupt {what} file {path}: {exc}") from None


def save_versioned_json(
    path: Path, version: int, body: Mapping[str, Any], *, mode: int | None = None
) -> None:
    """Atomically replace ``path`` with ``{"version": version, **body}`` (indented JSON),
    creating its directory; ``mode``: the file's permissions (set before it is renamed into
    place, e.g. 0o600 for credentials).

    Raises:
        OSError: the file cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps({"version": version, **body}, indent=1), mode=mode)
