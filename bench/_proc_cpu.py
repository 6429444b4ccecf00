"""CPU time (user + system, from ``/proc``) of a process tree, grouped by role: the bench
driver, the JVM, the broker, and each kind of Spark Python worker (named by the module it
serves: ``pyspark.worker`` runs tasks, ``write_into_data_source`` plans a write,
``python_streaming_sink_runner`` commits a streaming write, ``python_streaming_source_runner``
is a stream's driver-side source). Linux only; elsewhere every snapshot is empty.

Processes that start and exit between two snapshots are missed, so this suits long-lived
processes (Spark reuses its Python workers), not short-lived children.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CpuSnapshot", "cpu_snapshot", "cpu_by_role"]

CpuSnapshot = dict[int, tuple[float, str]]
"""pid -> (CPU seconds so far, role)."""

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(ppid, CPU seconds) of ``pid``, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def _role(pid: int, root: int) -> str:
    if pid == root:
        return "bench driver"
    try:
        argv = [
            a for a in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0") if a
        ]
    except OSError:
        return "gone"
    if not argv:
        return "other"
    if "java" in Path(argv[0]).name:
        return "JVM"
    if "-m" in argv:
        module = argv[argv.index("-m") + 1] if argv.index("-m") + 1 < len(argv) else ""
        if module == "broker":
            return "broker"
        if module == "pyspark.daemon":
            served = argv[argv.index("-m") + 2] if argv.index("-m") + 2 < len(argv) else "pyspark.worker"
            return f"python {served.rsplit('.', 1)[-1]}"
        if module.startswith("pyspark"):
            return f"python {module.rsplit('.', 1)[-1]}"
    return "other"


def cpu_snapshot(root: int | None = None) -> CpuSnapshot:
    """CPU seconds of ``root`` (default: this process) and every descendant, with their roles."""
    root = os.getpid() if root is None else root
    if not Path("/proc").is_dir():
        return {}
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                children.setdefault(stat[0], []).append(int(entry))
    out: CpuSnapshot = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        stat = _stat(pid)
        if stat is not None:
            out[pid] = (stat[1], _role(pid, root))
        todo.extend(children.get(pid, []))
    return out


def cpu_by_role(before: CpuSnapshot, after: CpuSnapshot) -> dict[str, float]:
    """CPU seconds used between two snapshots, summed per role (processes alive at ``after``)."""
    used: dict[str, float] = {}
    for pid, (seconds, role) in after.items():
        start = before.get(pid, (0.0, role))[0]
        used[role] = used.get(role, 0.0) + max(0.0, seconds - start)
    return used
