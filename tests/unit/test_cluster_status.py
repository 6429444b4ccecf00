"""``kafkalite cluster status`` partition summary: under-replicated partitions whose missing
replicas are live brokers (replication not healing by itself, issue #14) are named loudly; each
broker's event-loop figures (issue #25) are summed up in one cell."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from spark_kafkalite.cli.cluster_status import loop_lag_summary, print_partitions


def _p(replicas: tuple[int, ...], isr: tuple[int, ...]) -> SimpleNamespace:
    return SimpleNamespace(leader=isr[0], leader_epoch=3, replicas=replicas, isr=isr, offline_replicas=())


def test_live_replicas_out_of_the_isr_are_named() -> None:
    metadata = SimpleNamespace(
        controller_id=1,
        nodes={1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2), 3: ("127.0.0.1", 3)},
        partitions={"t": {0: _p((1, 2, 3), (1, 2, 3)), 1: _p((1, 2, 3), (1, 2)), 2: _p((1, 2, 4), (1, 2))}},
    )
    out = io.StringIO()
    assert print_partitions(Console(file=out, width=200), metadata) == 0
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
    print_partitions(Console(file=out, width=200), metadata)
    assert "UNDER-REPLICATED" not in out.getvalue()


def test_loop_lag_summary_names_stalls(tmp_path: Path) -> None:
    path = tmp_path / "loop-lag.json"
    assert loop_lag_summary(path) == "-"  # not written yet
    path.write_text(json.dumps({"max_lag_ms": 12.4, "stall_episodes": 0, "last_stall_ms": 0}))
    assert loop_lag_summary(path) == "max lag 12 ms"
    path.write_text(json.dumps({"max_lag_ms": 1830.0, "stall_episodes": 2, "last_stall_ms": 640.2}))
    assert loop_lag_summary(path) == "max lag 1,830 ms, [yellow]2 stall(s), last 640 ms[/yellow]"


def test_thousands_of_partitions_are_summarized_per_topic() -> None:
    nodes = {1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2)}
    big = {i: _p((1 + i % 2, 2 - i % 2, 3), (1 + i % 2, 2 - i % 2)) for i in range(300)}
    big[7] = SimpleNamespace(leader=-1, leader_epoch=4, replicas=(3, 1, 2), isr=(3,), offline_replicas=(3,))
    metadata = SimpleNamespace(
        controller_id=1, nodes=nodes, partitions={"big": big, "small": {0: _p((1,), (1,))}}
    )
    out = io.StringIO()
    assert print_partitions(Console(file=out, width=200), metadata) == 0
    text = out.getvalue()
    lines = text.splitlines()
    assert len(lines) < 40  # a summary, not 301 rows
    assert "2 live broker(s), 301 partition(s), 300 under-replicated, 1 without a leader" in text
    assert "leaders per broker: 1:151 2:149" in text
    big_row = next(line for line in lines if line.lstrip("│ ").startswith("big "))
    assert " 300 " in big_row and "1:150 2:149" in big_row
    assert "Partitions without a leader (1)" in text and "none" in text
    # --partitions: one row each
    out = io.StringIO()
    print_partitions(Console(file=out, width=200), metadata, every_partition=True)
    assert out.getvalue().count("│ big ") == 300


def test_topics_describe_summary_sums_per_topic() -> None:
    from spark_kafkalite.cli.topics import _topic_summary
    from spark_kafkalite.client import TopicPartition

    parts = [
        SimpleNamespace(
            partition=i,
            leader=-1 if i == 5 else 1 + i % 3,
            replicas=(1, 2, 3),
            isr=(1, 2) if i < 10 else (1, 2, 3),
        )
        for i in range(120)
    ]
    earliest = {TopicPartition("t", i): 0 for i in range(120)}
    latest = {TopicPartition("t", i): 10 for i in range(120)}
    sizes = {TopicPartition("t", i): 1024 for i in range(120)}
    out = io.StringIO()
    Console(file=out, width=200).print(_topic_summary("b:1", {"t": parts}, earliest, latest, sizes))
    row = next(line for line in out.getvalue().splitlines() if line.lstrip("│ ").startswith("t "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells == ["t", "120", "3", "10", "1", "1:40 2:40 3:39", "1200", "120.0 KiB"]
