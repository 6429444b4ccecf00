"""Build kio entities for any version of an API with one piece of code (broker handlers and client
request builders alike).

kio generates one dataclass per (API, version); fields present in one version are absent in
another. :func:`build` keeps only the keyword arguments the class declares, so a caller can pass
the union of fields and get the right shape for the negotiated version.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
from functools import lru_cache
from typing import Any

from spark_kafkalite.protocol.class_cache import class_cache

__all__ = ["build", "nested", "has_field", "ZERO_DURATION", "ms_duration", "datetime_to_ms"]

ZERO_DURATION = datetime.timedelta(0)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ONE_MS = datetime.timedelta(milliseconds=1)


@class_cache
def _field_info(cls: type[Any]) -> tuple[frozenset[str], frozenset[str]]:
    """(field names, names of ``timedelta_i32`` fields) of kio entity class ``cls``."""
    names = set()
    timedeltas = set()
    for f in dataclasses.fields(cls):
        names.add(f.name)
        if f.metadata.get("kafka_type") == "timedelta_i32":
            timedeltas.add(f.name)
    return frozenset(names), frozenset(timedeltas)


def has_field(cls: type[Any], name: str) -> bool:
    """Whether the kio entity class ``cls`` declares field ``name`` in its version."""
    return name in _field_info(cls)[0]


def build(cls: type[Any], **fields: Any) -> Any:
    """``cls(**fields)`` with the fields ``cls`` does not declare dropped; an ``int`` given for a
    ``timedelta_i32`` field (e.g. ``session_timeout``) is taken as milliseconds."""
    drop, durations = _build_plan(cls, tuple(fields))
    for name in drop:
        del fields[name]
    for name in durations:
        value = fields[name]
        if isinstance(value, int):
            fields[name] = ms_duration(value)
    return cls(**fields)


@class_cache
def _build_plan(cls: type[Any], keys: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(keys ``cls`` does not declare, keys that are ``timedelta_i32`` fields) for one call
    site's keyword names (a handler builds the same shape thousands of times a second)."""
    names, timedeltas = _field_info(cls)
    return tuple(k for k in keys if k not in names), tuple(k for k in keys if k in timedeltas)


@class_cache
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


def datetime_to_ms(value: datetime.datetime | None) -> int:
    """kio ``datetime_i64`` value -> epoch milliseconds (-1 for None)."""
    if value is None:
        return -1
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return (value - _EPOCH) // _ONE_MS
