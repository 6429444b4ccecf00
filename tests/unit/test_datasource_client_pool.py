"""ClientPool (the sink's per-worker producer cache, Spark's CachedKafkaProducer) and the
env-gated phase timings: pure logic with fake clients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spark_kafkalite.datasource import phase_timing
from spark_kafkalite.datasource.client_pool import ClientPool


class FakeClient:
    def __init__(self, config: dict) -> None:
        self.config = config
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_released_client_is_reused_for_the_same_config() -> None:
    pool = ClientPool(FakeClient)
    first = pool.acquire({"bootstrap.servers": "a", "acks": "all"})
    pool.release({"bootstrap.servers": "a", "acks": "all"}, first)
    # same options in another order: same key
    second = pool.acquire({"acks": "all", "bootstrap.servers": "a"})
    assert second is first
    assert pool.created == 1
    assert first.closed == 0


def test_different_config_gets_another_client() -> None:
    pool = ClientPool(FakeClient)
    first = pool.acquire({"bootstrap.servers": "a"})
    pool.release({"bootstrap.servers": "a"}, first)
    other = pool.acquire({"bootstrap.servers": "a", "acks": "1"})
    assert other is not first
    assert pool.created == 2
    assert pool.idle_count() == 1


def test_lent_client_is_exclusive() -> None:
    pool = ClientPool(FakeClient)
    first = pool.acquire({"x": "1"})
    second = pool.acquire({"x": "1"})  # the first is still lent out
    assert second is not first
    assert pool.created == 2


def test_discarded_client_is_closed_and_not_reused() -> None:
    pool = ClientPool(FakeClient)
    failed = pool.acquire({"x": "1"})
    pool.discard(failed)
    assert failed.closed == 1
    assert pool.idle_count() == 0
    assert pool.acquire({"x": "1"}) is not failed
    assert pool.created == 2


def test_discard_survives_a_failing_close() -> None:
    class Broken(FakeClient):
        def close(self) -> None:
            raise OSError("socket already gone")

    pool = ClientPool(Broken)
    pool.discard(pool.acquire({}))  # must not raise: it would mask the task's real error


def test_idle_clients_expire_after_the_timeout() -> None:
    clock = Clock()
    pool = ClientPool(FakeClient, idle_timeout_s=600.0, clock=clock)
    old = pool.acquire({"x": "1"})
    pool.release({"x": "1"}, old)
    clock.now = 600.0
    assert pool.acquire({"x": "1"}) is old  # exactly at the timeout: still kept
    pool.release({"x": "1"}, old)
    clock.now = 1200.5
    fresh = pool.acquire({"x": "1"})
    assert fresh is not old
    assert old.closed == 1


def test_close_all_closes_idle_clients() -> None:
    pool = ClientPool(FakeClient)
    a, b = pool.acquire({"x": "1"}), pool.acquire({"x": "2"})
    pool.release({"x": "1"}, a)
    pool.release({"x": "2"}, b)
    pool.close_all()
    assert (a.closed, b.closed) == (1, 1)
    assert pool.idle_count() == 0


def test_phase_timing_disabled_writes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(phase_timing.ENV_VAR, raising=False)
    items = iter([1, 2])
    assert phase_timing.timed_iterator("x", items) is items  # no wrapper when disabled
    with phase_timing.phase("x"):
        pass
    assert list(tmp_path.iterdir()) == []


def test_phase_timing_records_phases_and_iterators(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    log = tmp_path / "phases.jsonl"
    monkeypatch.setenv(phase_timing.ENV_VAR, str(log))
    with phase_timing.phase("driver.partitions"):
        pass
    with pytest.raises(ValueError), phase_timing.phase("write.flush"):
        raise ValueError("recorded anyway")
    assert list(phase_timing.timed_iterator("read.task", iter([1, 2, 3]))) == [1, 2, 3]
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["phase"] for e in entries] == ["driver.partitions", "write.flush", "read.task"]
    assert all(e["ms"] >= 0 and e["pid"] > 0 for e in entries)


def test_waiting_iterator_sums_only_the_time_inside_next(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import time

    monkeypatch.delenv(phase_timing.ENV_VAR, raising=False)
    items = iter([1])
    assert phase_timing.waiting_iterator("x", items) is items  # no wrapper when disabled
    log = tmp_path / "phases.jsonl"
    monkeypatch.setenv(phase_timing.ENV_VAR, str(log))

    def slow_input():  # type: ignore[no-untyped-def]
        for i in range(3):
            time.sleep(0.02)  # the producer of the input (Spark) is slow
            yield i

    seen = []
    for item in phase_timing.waiting_iterator("write.input", slow_input()):
        time.sleep(0.05)  # the consumer's own work is not counted
        seen.append(item)
    assert seen == [0, 1, 2]
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["phase"] == "write.input" and 55 <= entry["ms"] < 150
