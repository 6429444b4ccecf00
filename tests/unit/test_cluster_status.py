"""``kafkalite cluster status`` partition summary: under-replicated partitions whose missing
replicas are live brokers (replication not healing by itself, issue #14) are named loudly."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from spark_kafkalite.cli.cluster import _print_partitions


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
