"""The cyclic collector's pause figures and the frozen start-up heap (broker.gc_pauses)."""

from __future__ import annotations

import gc
import json

from broker.gc_pauses import GcPauseStats, freeze_startup_heap


def test_every_collection_is_counted_and_timed_per_generation() -> None:
    stats = GcPauseStats()
    stats.install()
    stats.install()  # idempotent: one callback, each collection counted once
    try:
        gc.collect(0)
        gc.collect(2)
        gc.collect(2)
    finally:
        stats.uninstall()
    assert stats.collections[0] >= 1
    assert stats.collections[2] == 2
    assert stats.pause_ms_total[2] > 0.0
    assert 0.0 < stats.pause_ms_max[2] <= stats.pause_ms_total[2]
    gc.collect(2)  # uninstalled: no longer counted
    assert stats.collections[2] == 2
    figures = json.loads(json.dumps(stats.snapshot()))
    assert figures["collections"][2] == 2
    assert len(figures["pause_ms_max"]) == 3


def test_the_frozen_start_up_heap_is_skipped_by_later_full_collections() -> None:
    survivors = [[i] for i in range(20_000)]  # long-lived containers, as a broker's start-up makes
    try:
        frozen, full_collection_ms = freeze_startup_heap()
        assert frozen >= len(survivors)
        assert full_collection_ms > 0.0
        # frozen objects freed since (other threads of this test process) leave the count
        assert len(survivors) <= gc.get_freeze_count() <= frozen
        assert len(gc.get_objects(2)) < frozen  # what a full collection still traverses
    finally:
        gc.unfreeze()  # this test process is not a broker
    assert gc.get_freeze_count() == 0
