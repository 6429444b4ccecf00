"""``functools.cache`` for helpers keyed by a kio entity class.

kio generates one class per (API, version); helpers that inspect a class (its fields, its
nested classes, its reader/writer) cache the answer per class. ``functools.cache`` types its
arguments as ``Hashable``, which mypy does not accept for ``type[Any]`` although every class is
hashable; this wrapper keeps the decorated signature so call sites stay typed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

__all__ = ["class_cache"]

P = ParamSpec("P")
R = TypeVar("R")


def class_cache(fn: Callable[Concatenate[type[Any], P], R]) -> Callable[Concatenate[type[Any], P], R]:
    """``functools.cache(fn)`` with ``fn``'s own signature (first argument: a class)."""
    return functools.cache(fn)  # type: ignore[return-value]
