"""The cyclic garbage collector's pauses: the broker's start-up heap frozen, every collection timed.

CPython's cyclic collector runs on whichever thread allocates past its threshold and holds the
GIL while it traverses a generation, so a collection stalls the event loop (every connection,
the replica fetchers, the controller heartbeats) for as long as it runs. A full (generation 2)
collection traverses every tracked object still alive, and most of a broker's are the ones made
at start-up and kept for its lifetime (imported modules, protocol classes and their schemas, the
configuration, the loaded logs): tens of milliseconds per full collection on a broker that
answers a produce in a few.

:func:`freeze_startup_heap` is CPython's recipe for long-lived heaps (``gc.freeze``, Python
3.7+): after start-up, one full collection, then every surviving object moves to the permanent
generation, which later collections skip. Objects made afterwards are collected as before; a
frozen object is still freed when its reference count drops to zero (only a reference cycle
among frozen objects is never reclaimed, and start-up objects are kept for the broker's
lifetime anyway).

:class:`GcPauseStats` times every collection through ``gc.callbacks`` (count, total and worst
pause per generation), served with the event loop's lag figures (``loop-lag.json``).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GcPauseStats", "freeze_startup_heap"]

_GENERATIONS = 3


def freeze_startup_heap() -> tuple[int, float]:
    """Collect every generation once, then freeze the survivors (see the module docstring).

    Returns: (objects now in the permanent generation, the full collection's duration in ms).
    """
    started = time.perf_counter()
    gc.collect()
    elapsed_ms = (time.perf_counter() - started) * 1000
    gc.freeze()
    return gc.get_freeze_count(), elapsed_ms


@dataclass
class GcPauseStats:
    """Collections per generation (0, 1, 2) and their pauses, from ``gc.callbacks``.

    Attributes:
        collections: collections per generation.
        pause_ms_total: summed pause per generation, ms.
        pause_ms_max: longest pause per generation, ms.
    """

    collections: list[int] = field(default_factory=lambda: [0] * _GENERATIONS)
    pause_ms_total: list[float] = field(default_factory=lambda: [0.0] * _GENERATIONS)
    pause_ms_max: list[float] = field(default_factory=lambda: [0.0] * _GENERATIONS)
    _started: float = 0.0

    def install(self) -> None:
        """Start timing collections (idempotent)."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = info["generation"]
        pause_ms = (time.perf_counter() - self._started) * 1000
        self.collections[generation] += 1
        self.pause_ms_total[generation] += pause_ms
        if pause_ms > self.pause_ms_max[generation]:
            self.pause_ms_max[generation] = pause_ms

    def snapshot(self) -> dict[str, Any]:
        """JSON-able figures: ``collections``, ``pause_ms_total``, ``pause_ms_max`` (each a list
        indexed by generation) and ``frozen_objects`` (``gc.get_freeze_count()``)."""
        return {
            "collections": list(self.collections),
            "pause_ms_total": [round(ms, 1) for ms in self.pause_ms_total],
            "pause_ms_max": [round(ms, 1) for ms in self.pause_ms_max],
            "frozen_objects": gc.get_freeze_count(),
        }
