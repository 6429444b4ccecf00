"""glibc malloc thresholds for the broker process, so that per-request buffers are reused from
the heap instead of being mapped and unmapped (page faults) on every request.

Each request allocates and frees buffers of tens to hundreds of KiB: asyncio's 256 KiB
``recv`` chunk, the request frame (a 64 KiB RecordBatch for librdkafka's ``batch.size=65536``),
the batch copied for its offsets to be assigned. With glibc's defaults (``M_MMAP_THRESHOLD``
128 KiB, adjusted dynamically; ``M_TRIM_THRESHOLD`` twice that) these blocks keep being mapped,
or the top of the heap trimmed and grown again, so their pages are faulted in and zeroed anew
on every request: ~22 minor page faults and ~100 us of system CPU per 64 KiB Produce request,
about a third of the broker's CPU for it (measured with ``/proc/<pid>/stat`` while replaying
librdkafka's ProduceRequests). An idempotent producer waits for each response (one request in
flight per partition), so this is on its critical path.

Fixed thresholds (which also turn off glibc's dynamic adjustment) keep blocks below
:data:`MMAP_THRESHOLD_BYTES` in the heap and at most :data:`TRIM_THRESHOLD_BYTES` of free
memory at its top; the cost is that much memory kept mapped by an idle broker. A threshold the
operator set through glibc's own ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_``
environment variables wins. Elsewhere than glibc (no ``mallopt``) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from collections.abc import Mapping

__all__ = ["tune_malloc", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES"]

logger = logging.getLogger(__name__)

MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
"""Blocks below this come from the heap (covers frames up to Kafka's default 1 MiB requests)."""
TRIM_THRESHOLD_BYTES = 16 * 1024 * 1024
"""Free memory at the top of the heap kept for reuse before it is returned to the OS."""

_M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
_M_MMAP_THRESHOLD = -3

_SETTINGS = (
    ("MALLOC_TRIM_THRESHOLD_", _M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
    ("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
)


def tune_malloc(environ: Mapping[str, str] | None = None) -> dict[str, int]:
    """Set glibc's mmap and trim thresholds (see the module docstring) unless set through the
    environment; returns {env-style name: bytes} of what was set (empty when not glibc)."""
    env = os.environ if environ is None else environ
    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return {}
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    applied: dict[str, int] = {}
    for env_name, param, value in _SETTINGS:
        if env_name in env:
            continue
        if mallopt(param, value) == 1:
            applied[env_name] = value
        else:
            logger.info("mallopt(%s=%d) refused", env_name, value)
    return applied
