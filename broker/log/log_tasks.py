"""The log manager's background jobs on the broker's event loop (Kafka's ``LogManager.startup``
scheduler tasks ``kafka-log-retention`` and ``kafka-log-flusher``, plus the ``LogCleaner``
thread's scheduling).

* retention: ``LogManager.cleanup_logs`` every ``log.retention.check.interval.ms``, first after
  ``log.initial.task.delay.ms``;
* time-based flush: ``LogManager.flush_logs_due`` (per-log ``flush.ms``) every
  ``flush_check_interval_ms``;
* compaction: ``LogCleaner.clean_once`` every ``log.cleaner.backoff.ms`` when a cleaner is given
  (its CPU/disk work runs in a thread; the swap happens back on the loop).

Each job's failure is logged; the loop keeps running until cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .log_manager import LogManager

__all__ = ["LogTaskSettings", "run_log_tasks"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogTaskSettings:
    """Intervals of the background jobs, in ms (Kafka's broker keys in parentheses).

    Attributes:
        retention_check_interval_ms: ``log.retention.check.interval.ms`` (default 300000).
        initial_task_delay_ms: ``log.initial.task.delay.ms`` (default 30000).
        flush_check_interval_ms: how often per-log ``flush.ms`` deadlines are checked
            (``log.flush.scheduler.interval.ms``); None disables the job.
        cleaner_backoff_ms: ``log.cleaner.backoff.ms`` (default 15000).
    """

    retention_check_interval_ms: int = 300000
    initial_task_delay_ms: int = 30000
    flush_check_interval_ms: int | None = 1000
    cleaner_backoff_ms: int = 15000


class _Job:
    def __init__(
        self, name: str, interval_s: float, first_s: float, fn: Callable[[], Awaitable[object] | object]
    ):
        self.name = name
        self.interval_s = interval_s
        self.due = time.monotonic() + first_s
        self.fn = fn

    async def run_if_due(self, now: float) -> None:
        if now < self.due:
            return
        try:
            result = self.fn()
            if asyncio.iscoroutine(result):
                await result
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a failed pass must not stop the other jobs
            logger.exception("log background job %s failed", self.name)
        self.due = time.monotonic() + self.interval_s


async def run_log_tasks(
    log_manager: LogManager,
    settings: LogTaskSettings,
    clean_once: Callable[[], Awaitable[object]] | None = None,
) -> None:
    """Run the jobs until cancelled.

    Args:
        log_manager: the broker's logs.
        settings: the intervals.
        clean_once: ``LogCleaner.clean_once`` (an async callable), or None (no compaction).
    """
    initial_s = settings.initial_task_delay_ms / 1000
    jobs = [
        _Job(
            "retention",
            max(settings.retention_check_interval_ms, 1) / 1000,
            initial_s,
            log_manager.cleanup_logs,
        )
    ]
    if settings.flush_check_interval_ms is not None:
        flush_s = max(settings.flush_check_interval_ms, 1) / 1000
        jobs.append(_Job("flush", flush_s, flush_s, log_manager.flush_logs_due))
    if clean_once is not None:
        jobs.append(_Job("cleaner", max(settings.cleaner_backoff_ms, 1) / 1000, initial_s, clean_once))
    tick = min(1.0, *(job.interval_s for job in jobs))
    tick = max(tick, 0.005)
    while True:
        now = time.monotonic()
        for job in jobs:
            await job.run_if_due(now)
        next_due = min(job.due for job in jobs)
        await asyncio.sleep(max(0.0, min(tick, next_due - time.monotonic())))
