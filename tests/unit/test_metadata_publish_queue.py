"""MetadataPublishQueue: deltas apply in publication order; a large one yields to the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from broker.controller.publish_queue import MetadataPublishQueue


def _steps(name: str, count: int, applied: list[str]) -> Iterator[None]:
    for i in range(count):
        applied.append(f"{name}{i}")
        yield


def test_small_delta_applies_before_publish_returns() -> None:
    async def main() -> None:
        queue = MetadataPublishQueue(slice_ms=10_000)
        applied: list[str] = []
        queue.publish(_steps("a", 3, applied))
        assert applied == ["a0", "a1", "a2"] and not queue.busy

    asyncio.run(main())


def test_large_delta_yields_to_the_loop_and_later_deltas_wait() -> None:
    async def main() -> None:
        queue = MetadataPublishQueue(slice_ms=0)  # every step is its own slice
        applied: list[str] = []
        ticks: list[int] = []

        async def probe() -> None:  # another request served between slices
            while queue.busy:
                ticks.append(len(applied))
                await asyncio.sleep(0)

        queue.publish(_steps("a", 50, applied))
        queue.publish(_steps("b", 2, applied))  # published while "a" is applied: waits for it
        assert queue.busy and len(applied) < 50
        await probe()
        assert applied == [f"a{i}" for i in range(50)] + ["b0", "b1"]
        assert len(ticks) >= 25  # the loop ran other callbacks during the application
        assert ticks == sorted(ticks) and len(set(ticks)) > 10

    asyncio.run(main())


def test_a_failing_delta_does_not_block_the_next() -> None:
    async def main() -> None:
        queue = MetadataPublishQueue(slice_ms=0)
        applied: list[str] = []

        def failing() -> Iterator[None]:
            yield
            raise RuntimeError("boom")

        queue.publish(_steps("a", 3, applied))
        queue.publish(failing())
        queue.publish(_steps("b", 1, applied))
        while queue.busy:
            await asyncio.sleep(0)
        assert applied == ["a0", "a1", "a2", "b0"]

    asyncio.run(main())


def test_applied_waits_for_everything_published_so_far() -> None:
    async def main() -> None:
        queue = MetadataPublishQueue(slice_ms=0)
        applied: list[str] = []
        await queue.applied()  # nothing pending: at once
        queue.publish(_steps("a", 20, applied))
        queue.publish(_steps("b", 20, applied))
        await queue.applied()
        assert len(applied) == 40 and not queue.busy

    asyncio.run(main())
