"""worker_heap.freeze_imported_heap: gc.freeze only in a pyspark.daemon worker, once per set of
imported modules, never when KAFKALITE_WORKER_GC_FREEZE=0 (gc.freeze replaced by a recorder:
the test process itself must not freeze its heap)."""

from __future__ import annotations

import sys
import types

import pytest

from spark_kafkalite.datasource import worker_heap


@pytest.fixture
def freezes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    monkeypatch.setattr(worker_heap.gc, "freeze", lambda: calls.append(1))
    monkeypatch.setattr(worker_heap, "_modules_at_last_freeze", 0)
    monkeypatch.delenv(worker_heap.ENV_VAR, raising=False)
    return calls


def _as_daemon_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="pyspark.daemon")  # type: ignore[assignment]
    monkeypatch.setitem(sys.modules, "__main__", main)


def test_not_a_daemon_worker_never_freezes(freezes: list[int]) -> None:
    assert not worker_heap.in_pyspark_daemon_worker()  # pytest's __main__
    assert worker_heap.freeze_imported_heap() is False
    assert freezes == []


def test_daemon_worker_freezes_once_per_module_set(
    monkeypatch: pytest.MonkeyPatch, freezes: list[int]
) -> None:
    _as_daemon_worker(monkeypatch)
    assert worker_heap.in_pyspark_daemon_worker()
    assert worker_heap.freeze_imported_heap() is True
    assert worker_heap.freeze_imported_heap() is False  # nothing new imported
    assert freezes == [1]
    monkeypatch.setitem(
        sys.modules, "kafkalite_test_lazy_import", types.ModuleType("kafkalite_test_lazy_import")
    )
    assert worker_heap.freeze_imported_heap() is True  # a lazy import grew the heap
    assert freezes == [1, 1]


def test_env_var_turns_it_off(monkeypatch: pytest.MonkeyPatch, freezes: list[int]) -> None:
    _as_daemon_worker(monkeypatch)
    monkeypatch.setenv(worker_heap.ENV_VAR, "0")
    assert worker_heap.freeze_imported_heap() is False
    assert freezes == []
