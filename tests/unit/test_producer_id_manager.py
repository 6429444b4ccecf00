"""Producer id blocks (KIP-730): unique across restarts via the persisted block file, prefetch
of the next block, COORDINATOR_LOAD_IN_PROGRESS while the controller cannot allocate."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from broker.controller.producer_id_block import PRODUCER_ID_BLOCK_SIZE, allocate_block_in_file
from broker.coordinator.producer_id_manager import ProducerIdManager
from spark_kafkalite.protocol.errors import CoordinatorLoadInProgressError, KafkaError


def test_blocks_are_persisted_and_never_repeat(tmp_path: Path) -> None:
    path = tmp_path / "producer-id-block"
    assert allocate_block_in_file(path) == (0, PRODUCER_ID_BLOCK_SIZE)
    assert allocate_block_in_file(path) == (1000, PRODUCER_ID_BLOCK_SIZE)
    assert json.loads(path.read_text())["next_block_start"] == 2000
    path.write_text("garbage")
    with pytest.raises(KafkaError, match="corrupt"):
        allocate_block_in_file(path)


class FakeController:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.calls = 0
        self.fail = False

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        self.calls += 1
        if self.fail:
            raise KafkaError("controller unavailable")
        return allocate_block_in_file(self.path, 10)


def test_manager_hands_out_ids_and_prefetches(tmp_path: Path) -> None:
    controller = FakeController(tmp_path / "block")

    async def run() -> list[int]:
        manager = ProducerIdManager(controller, 1)
        ids = [await manager.generate_producer_id() for _ in range(25)]
        # a restarted broker (new manager, same controller state) never reuses an id
        restarted = ProducerIdManager(controller, 1)
        ids.append(await restarted.generate_producer_id())
        return ids

    ids = asyncio.run(run())
    assert ids[:25] == list(range(25))
    assert ids[25] >= 30 and len(set(ids)) == 26
    assert controller.calls >= 3


def test_manager_reports_load_in_progress_when_no_block(tmp_path: Path) -> None:
    controller = FakeController(tmp_path / "block")
    controller.fail = True

    async def run() -> None:
        manager = ProducerIdManager(controller, 1)
        with pytest.raises(CoordinatorLoadInProgressError):
            await manager.generate_producer_id()
        controller.fail = False
        assert await manager.generate_producer_id() == 0

    asyncio.run(run())
