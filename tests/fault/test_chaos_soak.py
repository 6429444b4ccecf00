"""Short chaos soak (issue #14 item 5): every fault kind of :mod:`fault.chaos` once, on three
broker processes behind link proxies, under idempotent ``acks=all`` load (confluent-kafka).

The long run is one command (see :mod:`fault.chaos`)::

    taskset -c 1 python tests/fault/chaos.py --cycles 100 --seed 1
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fault.chaos import FAULTS, ChaosSoak
from fault.chaos_proxy import CLIENT


@pytest.mark.timeout(240)
def test_every_fault_kind_once_keeps_acked_records_and_heals(tmp_path: Path) -> None:
    lines: list[str] = []
    soak = ChaosSoak(
        tmp_path / "chaos", seed=14, partitions=2, rate_per_s=150, fault_s=(4.5, 5.0), log=lines.append
    )
    try:
        soak.start()
        for cycle, fault in enumerate(FAULTS, start=1):
            soak.run_cycle(cycle, fault)
        verdict = soak.finish()
    finally:
        soak.close()
    summary = soak.summary()
    report = "\n".join(lines) + f"\n{summary}"
    assert summary["cycles"] == len(FAULTS)
    assert verdict.acked > 1000, report
    assert verdict.ok, report
    assert not summary["replica_diffs_per_cycle"] and not summary["replica_diffs_final"], report
    assert not summary["never_healed"] and not summary["liveness"], report
    assert summary["heal_s_max"] is not None and summary["heal_s_max"] <= 15.0, report
    # The partitions really cut links: the isolated leader lost its leadership / ISR shrank.
    assert summary["faults_with_short_isr_at_heal"] >= 3, report
    # The proxies told the brokers' and the producer's connections apart (else no fault applies).
    kafka_sources = {s for p in soak.cluster.kafka_proxies.values() for s in p.connections_by_source}
    raft_sources = {s for p in soak.cluster.raft_proxies.values() for s in p.connections_by_source}
    brokers = {1, 2, 3}
    assert (
        CLIENT in kafka_sources and len(kafka_sources & brokers) >= 2 and len(raft_sources & brokers) >= 2
    ), (
        kafka_sources,
        raft_sources,
    )
