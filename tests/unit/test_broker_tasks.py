"""broker.tasks.await_cancelled: shutdown waits for a cancelled task, logs its failure, goes on."""

from __future__ import annotations

import asyncio
import logging

import pytest

from broker.tasks import await_cancelled


def test_a_cancelled_task_ends_quietly(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> asyncio.Task[None]:
        task = asyncio.create_task(asyncio.sleep(60))
        await asyncio.sleep(0)
        task.cancel()
        await await_cancelled(task, "sleeper")
        return task

    task = asyncio.run(main())
    assert task.cancelled()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_failure_before_the_cancel_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    async def fail() -> None:
        raise OSError("disk gone")

    async def main() -> None:
        task = asyncio.create_task(fail())
        await asyncio.sleep(0)  # the task runs and fails before the cancel
        task.cancel()
        await await_cancelled(task, "checkpoint task")

    with caplog.at_level(logging.ERROR, logger="broker.tasks"):
        asyncio.run(main())
    [record] = [r for r in caplog.records if r.name == "broker.tasks"]
    assert record.getMessage() == "checkpoint task failed before it was stopped"
    assert record.exc_info is not None and isinstance(record.exc_info[1], OSError)
