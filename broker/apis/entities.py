"""Helpers to build kio entities for any version of an API with one piece of handler code.

kio generates one dataclass per (API, version); fields present in one version are absent in
another. :func:`build` keeps only the keyword arguments the class declares, so a handler can
pass the union of fields and get the right shape for the negotiated version.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
from functools import cache, lru_cache
from typing import Any

__all__ = ["build", "nested", "has_field", "ZERO_DURATION", "ms_duration"]

ZERO_DURATION = datetime.timedelta(0)


@cache
def _field_names(cls: type[Any]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def has_field(cls: type[Any], name: str) -> bool:
    """Whether the kio entity class ``cls`` declares field ``name`` in its version."""
    return name in _field_names(cls)


def build(cls: type[Any], **fields: Any) -> Any:
    """``cls(**fields)`` with the fields ``cls`` does not declare dropped."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in fields.items() if k in names})


@cache
def nested(cls: type[Any], name: str) -> type[Any]:
    """The nested entity class ``name`` defined next to ``cls`` (same kio module/version), e.g.
    ``nested(FetchResponse_v12, "PartitionData")``.

    Raises:
        AttributeError: the module has no such class.
    """
    return getattr(sys.modules[cls.__module__], name)  # type: ignore[no-any-return]


@lru_cache(maxsize=256)
def ms_duration(ms: int) -> datetime.timedelta:
    """A timedelta of ``ms`` milliseconds (kio's i32Timedelta fields)."""
    return datetime.timedelta(milliseconds=ms)
