"""Short seeded runs of the wire fuzzers (issue #14 item 5); long runs: ``python -m bench.fuzz``.

The broker run first sends compression bombs, frames of ``socket.request.max.bytes`` and
slow-loris connections, then structure-aware, mutated, slow and lying frames to a real ``python -m
broker`` process, and requires: no death, no hang, no error escaping the request pipeline, RSS
under a bound, a canary topic written before the run read back intact, and every health probe
(ApiVersions on a fresh connection every 0.1 s) answered within PROBE_BOUND_S in every phase
(issue #25: the goal is 0.5 s on a quiet machine; the bound leaves room for a busy CI). The client run drives
our client through a response-fuzzing proxy (see bench/fuzz/client_fuzz.py).
"""

from __future__ import annotations

import pytest

from bench.fuzz.broker_fuzz import fuzz_broker
from bench.fuzz.client_fuzz import fuzz_client

pytestmark = pytest.mark.timeout(120)

RSS_BOUND_BYTES = 400 << 20
PROBE_BOUND_S = 1.5


def test_fuzz_broker_short_run() -> None:
    report = fuzz_broker(frames=20_000, seed=14, duration_s=15.0, connections=4)
    summary = report.as_dict()
    assert report.frames > 500, summary
    assert report.deaths == 0 and report.hangs == 0, summary
    assert report.escaped_errors == 0, summary
    assert report.canary_intact, summary
    assert report.peak_rss_bytes < RSS_BOUND_BYTES, summary
    assert report.hostile_unexpected == 0, summary
    assert set(report.probe_worst_s) >= {"bomb", "max-frame", "slow-loris", "fuzz"}, summary
    assert not report.probe_failures, summary
    assert max(report.probe_worst_s.values()) < PROBE_BOUND_S, summary


def test_fuzz_client_short_run() -> None:
    """Our producer, consumer and admin client behind a proxy that mutates, replaces (from kio's
    schemas), truncates, delays or drops the broker's responses: no crash, no hang, and every
    failure is one of our documented exceptions."""
    report = fuzz_client(responses=100_000, seed=14, duration_s=15.0)
    summary = report.as_dict()
    assert report.fuzzed_responses > 50, summary
    assert report.deaths == 0 and report.hangs == 0, summary
    assert report.unclean == 0, summary
