"""Env-gated timings of the streaming path's phases (issue #10 item 5), for ``bench/spark_latency.py``.

With ``KAFKALITE_PHASE_LOG=<path>`` set (Spark passes the driver's environment to its Python
workers in local mode), every timed phase appends one JSON line ``{"phase": ..., "ms": ...,
"pid": ..., "t": ...}`` to ``<path>``: the driver's offset look-ups (``latestOffset``: Metadata +
ListOffsets), planning (``partitions``), the read task (consumer acquisition, fetch), the write
task (producer acquisition, input + encode + send and, within it, the wait for input rows, flush). Unset (the default), :func:`phase` costs one
environment look-up per micro-batch phase; never per record.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from typing import TypeVar

__all__ = ["ENV_VAR", "phase", "record", "enabled", "timed_iterator", "waiting_iterator"]

T = TypeVar("T")

ENV_VAR = "KAFKALITE_PHASE_LOG"


def enabled() -> bool:
    """True when phase timings are written (``KAFKALITE_PHASE_LOG`` is set)."""
    return bool(os.environ.get(ENV_VAR))


def record(name: str, elapsed_ms: float) -> None:
    """Append one timing line (no-op when disabled; I/O errors are ignored: timings never fail a task)."""
    path = os.environ.get(ENV_VAR)
    if not path:
        return
    line = json.dumps({"phase": name, "ms": round(elapsed_ms, 3), "pid": os.getpid(), "t": time.time()})
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError:  # opt-in diagnostics: an unwritable timing file must not fail the Spark task
        pass


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the ``with`` body as phase ``name`` (recorded also when the body raises)."""
    if not enabled():
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        record(name, (time.perf_counter() - started) * 1000.0)


def timed_iterator(name: str, iterator: Iterator[T]) -> Iterator[T]:
    """``iterator`` itself when disabled; else a generator recording, as phase ``name``, the time
    from the first ``next`` to exhaustion (or error / close)."""
    if not enabled():
        return iterator
    return _timed(name, iterator)


def _timed(name: str, iterator: Iterator[T]) -> Iterator[T]:
    with phase(name):
        yield from iterator


def waiting_iterator(name: str, iterator: Iterator[T]) -> Iterator[T]:
    """``iterator`` itself when disabled; else a generator recording, as phase ``name``, the time
    spent inside ``next`` only (summed; e.g. a write task waiting for Spark's input rows, apart
    from its own work on them), once the iterator is exhausted (or errors / is closed)."""
    if not enabled():
        return iterator
    return _waiting(name, iterator)


def _waiting(name: str, iterator: Iterator[T]) -> Iterator[T]:
    waited = 0.0
    try:
        while True:
            started = time.perf_counter()
            try:
                item = next(iterator)
            except StopIteration:
                return
            finally:
                waited += time.perf_counter() - started
            yield item
    finally:
        record(name, waited * 1000.0)
