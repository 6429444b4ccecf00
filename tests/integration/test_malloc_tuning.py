"""broker.malloc_tuning: per-request buffers stop costing page faults once the thresholds are set
(measured in fresh interpreters: mallopt changes the whole process's allocator)."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest

from broker.malloc_tuning import MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES, tune_malloc

_GLIBC = sys.platform.startswith("linux") and "libc.so.6" in (ctypes.util.find_library("c") or "")

# Allocate and free buffers shaped like a broker's per-request ones (asyncio's 256 KiB recv
# chunk, the StreamReader's buffer holding a few 64 KiB frames, a frame and the batch copied from
# it), touching every page; print the minor faults this took.
_CHURN = """
import resource, sys
if sys.argv[1] == "tuned":
    from broker.malloc_tuning import tune_malloc
    assert tune_malloc({})
keep = []
for _ in range(50):
    keep.append(bytearray(300_000))
for _ in range(50):
    keep.pop()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(300):
    chunk = bytearray(256 * 1024)
    stream = bytearray(chunk) + bytearray(64 * 1024)
    frame = bytes(stream[: 64 * 1024])
    batch = bytearray(frame)
    del chunk, stream, frame, batch
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _CHURN, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.skipif(not _GLIBC, reason="glibc's mallopt only")
def test_thresholds_are_set_unless_the_environment_sets_them() -> None:
    assert tune_malloc({}) == {
        "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD_BYTES,
        "MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD_BYTES,
    }
    assert tune_malloc({"MALLOC_MMAP_THRESHOLD_": "131072"}) == {
        "MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD_BYTES
    }


@pytest.mark.skipif(not _GLIBC, reason="glibc's mallopt only")
def test_request_sized_buffers_are_reused_without_page_faults() -> None:
    default, tuned = _faults("default"), _faults("tuned")
    assert default > 5000  # trimmed and grown again: ~100 pages faulted in per round
    assert tuned < 100
