"""Keep Spark's per-task garbage collection of a Python worker cheap (issue #10 item 5).

A Python worker forked by ``pyspark.daemon`` (every executor task, every driver-side planner
call: ``write_into_data_source`` per micro-batch, ``python_streaming_sink_runner`` per commit)
runs a full ``gc.collect()`` after each call it serves (``pyspark/daemon.py``, the reuse loop).
A full collection walks every container object the process tracks, and a worker that has
imported pyarrow, numpy and this package holds ~75k of them: measured 40-160 ms per collection
on this 2-core machine (60 ms with pyspark alone), four times per micro-batch of a
``kafkalite`` -> ``kafkalite`` query (read task, write task, write planning, sink commit). The
collections run right after each call returns, so they compete for the CPU with the JVM's
next steps (the commit log write, the next trigger's planning).

:func:`freeze_imported_heap` moves the objects alive when it is called - almost all of them
module-level objects that live as long as the process - to the permanent generation
(``gc.freeze``, CPython's recipe for long-lived pre-fork heaps), so later collections only
walk what tasks allocate. It acts only in a ``pyspark.daemon`` worker, and again only when
more modules were imported since the last call (lazy imports on first use); it never collects
or disables anything. Objects frozen stay reference-counted as usual; only reference cycles
among them are never reclaimed, which is bounded by what is alive at those few calls.

``KAFKALITE_WORKER_GC_FREEZE=0`` turns it off (for measuring the difference).
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["ENV_VAR", "freeze_imported_heap", "in_pyspark_daemon_worker"]

ENV_VAR = "KAFKALITE_WORKER_GC_FREEZE"

_modules_at_last_freeze = 0


def in_pyspark_daemon_worker() -> bool:
    """True in a process forked by ``python -m pyspark.daemon`` (a reused Spark Python worker)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == "pyspark.daemon"


def freeze_imported_heap() -> bool:
    """``gc.freeze()`` once per set of imported modules, in a ``pyspark.daemon`` worker only;
    returns True when it froze. One ``len(sys.modules)`` comparison when there is nothing to do.
    """
    global _modules_at_last_freeze
    modules = len(sys.modules)
    if modules == _modules_at_last_freeze:
        return False
    _modules_at_last_freeze = modules
    if os.environ.get(ENV_VAR, "1") == "0" or not in_pyspark_daemon_worker():
        return False
    gc.freeze()
    return True
