"""``kafkalite cluster status`` partition summary: under-replicated partitions whose missing
replicas are live brokers (replication not healing by itself, issue #14) are named loudly; each
broker's event-loop figures (issue #25) are summed up in one cell."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from spark_kafkalite.cli.cluster import _print_partitions, loop_lag_summary


def _p(replicas: tuple[int, ...], isr: tuple[int, ...]) -> SimpleNamespace:
    return SimpleNamespace(leader=isr[0], leader_epoch=3, replicas=replicas, isr=isr, offline_replicas=())


def test_live_replicas_out_of_the_isr_are_named() -> None:
    metadata = SimpleNamespace(
        controller_id=1,
        nodes={1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2), 3: ("127.0.0.1", 3)},
        partitions={"t": {0: _p((1, 2, 3), (1, 2, 3)), 1: _p((1, 2, 3), (1, 2)), 2: _p((1, 2, 4), (1, 2))}},
    )
    out = io.StringIO()
    assert _print_partitions(Console(file=out, width=200), metadata) == 0
    text = out.getvalue()
    assert "3 live broker(s), 3 partition(s), 2 under-replicated, 0 without a leader" in text
    assert "UNDER-REPLICATED with live replicas out of the ISR" in text
    assert "t-1 (ISR 1,2; live out of ISR: [3])" in text
    assert "t-2" not in text.split("UNDER-REPLICATED")[1]  # broker 4 is not live: nothing to heal


def test_no_warning_when_every_isr_is_full() -> None:
    metadata = SimpleNamespace(
        controller_id=1, nodes={1: ("127.0.0.1", 1)}, partitions={"t": {0: _p((1,), (1,))}}
    )
    out = io.StringIO()
    _print_partitions(Console(file=out, width=200), metadata)
    assert "UNDER-REPLICATED" not in out.getvalue()


def test_loop_lag_summary_names_stalls(tmp_path: Path) -> None:
    path = tmp_path / "loop-lag.json"
    assert loop_lag_summary(path) == "-"  # not written yet
    path.write_text(json.dumps({"max_lag_ms": 12.4, "stall_episodes": 0, "last_stall_ms": 0}))
    assert loop_lag_summary(path) == "max lag 12 ms"
    path.write_text(json.dumps({"max_lag_ms": 1830.0, "stall_episodes": 2, "last_stall_ms": 640.2}))
    assert loop_lag_summary(path) == "max lag 1,830 ms, [yellow]2 stall(s), last 640 ms[/yellow]"
