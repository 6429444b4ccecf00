"""Short seeded runs of the wire fuzzers (issue #14 item 5); long runs: ``python -m bench.fuzz``.

The broker run sends structure-aware, mutated, slow and lying frames to a real ``python -m
broker`` process and requires: no death, no hang, no error escaping the request pipeline, RSS
under a bound, and a canary topic written before the run read back intact. The client run drives
our client through a response-fuzzing proxy (see bench/fuzz/client_fuzz.py).
"""

from __future__ import annotations

import pytest

from bench.fuzz.broker_fuzz import fuzz_broker
from bench.fuzz.client_fuzz import fuzz_client

pytestmark = pytest.mark.timeout(120)

RSS_BOUND_BYTES = 400 << 20


def test_fuzz_broker_short_run() -> None:
    report = fuzz_broker(frames=20_000, seed=14, duration_s=15.0, connections=4)
    summary = report.as_dict()
    assert report.frames > 500, summary
    assert report.deaths == 0 and report.hangs == 0, summary
    assert report.escaped_errors == 0, summary
    assert report.canary_intact, summary
    assert report.peak_rss_bytes < RSS_BOUND_BYTES, summary


def test_fuzz_client_short_run() -> None:
    """Our producer, consumer and admin client behind a proxy that mutates, replaces (from kio's
    schemas), truncates, delays or drops the broker's responses: no crash, no hang, and every
    failure is one of our documented exceptions."""
    report = fuzz_client(responses=100_000, seed=14, duration_s=15.0)
    summary = report.as_dict()
    assert report.fuzzed_responses > 50, summary
    assert report.deaths == 0 and report.hangs == 0, summary
    assert report.unclean == 0, summary
