"""Progress of the demo: a rich live display, a polling helper, and the streaming query's
progress reports (micro-batches, offsets behind latest, state rows, rows dropped by the
watermark)."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Display", "watch", "StreamStats", "offsets_of"]

log = logging.getLogger(__name__)


class Display:
    """Live progress with rich (or nothing when disabled)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> Display:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description:<34}"),
                BarColumn(bar_width=30),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[info]}"),
                refresh_per_second=4,
                console=Console() if sys.stdout.isatty() else Console(width=120),
            )
            self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def task(self, name: str, description: str, total: int | None) -> None:
        if self._progress is not None:
            self._tasks[name] = self._progress.add_task(description, total=total, info="")

    def update(
        self, name: str, completed: int | None = None, total: int | None = None, info: str | None = None
    ) -> None:
        if self._progress is None or name not in self._tasks:
            return
        fields: dict[str, Any] = {}
        if completed is not None:
            fields["completed"] = completed
        if total is not None:
            fields["total"] = total
        if info is not None:
            fields["info"] = info
        self._progress.update(self._tasks[name], **fields)

    def log(self, message: str) -> None:
        if self._progress is not None:
            self._progress.console.print(message)
        else:
            log.info(message)


@contextlib.contextmanager
def watch(interval_s: float, poll: Callable[[], None]) -> Iterator[None]:
    """Run ``poll`` every ``interval_s`` in a daemon thread while the block runs."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(interval_s):
            try:
                poll()
            except Exception:  # noqa: BLE001 - progress display only
                log.debug("progress poll failed", exc_info=True)

    thread = threading.Thread(target=loop, name="kafkalite-demo-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def offsets_of(source_offset: Any, topic: str) -> dict[int, int]:
    if source_offset is None:
        return {}
    data = json.loads(source_offset) if isinstance(source_offset, str) else source_offset
    return {int(p): int(o) for p, o in (data or {}).get(topic, {}).items()}


@dataclass
class StreamStats:
    batches: dict[int, dict[str, Any]] = field(default_factory=dict)
    last: dict[str, Any] | None = None

    def add(self, progresses: Sequence[Any]) -> None:
        for p in progresses:
            data = json.loads(p.json)
            self.batches[data["batchId"]] = data
            self.last = data

    @property
    def input_rows(self) -> int:
        return sum(b.get("numInputRows", 0) for b in self.batches.values())

    @property
    def data_batches(self) -> int:
        return sum(1 for b in self.batches.values() if b.get("numInputRows", 0) > 0)

    @property
    def dropped_by_watermark(self) -> int:
        return sum(
            op.get("numRowsDroppedByWatermark", 0)
            for b in self.batches.values()
            for op in b.get("stateOperators", [])
        )

    def end_offsets(self, topic: str) -> dict[int, int]:
        if not self.last or not self.last.get("sources"):
            return {}
        return offsets_of(self.last["sources"][0].get("endOffset"), topic)

    def behind_latest(self, topic: str) -> int:
        if not self.last or not self.last.get("sources"):
            return 0
        source = self.last["sources"][0]
        latest = offsets_of(source.get("latestOffset"), topic)
        end = offsets_of(source.get("endOffset"), topic)
        return sum(max(0, off - end.get(p, 0)) for p, off in latest.items())

    def state_rows(self) -> int | None:
        if not self.last or not self.last.get("stateOperators"):
            return None
        return sum(op.get("numRowsTotal", 0) for op in self.last["stateOperators"])
