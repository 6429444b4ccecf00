"""The background tasks of a coordinator (group loading, offset persistence, transaction
completion...): kept referenced until they finish, a failure logged once, all cancelled at
shutdown (the coordinators' share of Kafka's ``CoordinatorRuntime`` event executor)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["TaskTracker"]

logger = logging.getLogger(__name__)


class TaskTracker:
    """Tasks started with :meth:`spawn`; ``owner`` names the coordinator in failure logs."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a task on the running loop, held until it ends."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("%s task failed", self.owner, exc_info=task.exception())

    def cancel_all(self) -> None:
        """Cancel every task still running (at the coordinator's shutdown)."""
        for task in list(self._tasks):
            task.cancel()
