"""Rate limiting, range splitting and micro-batch range planning (pure logic)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_kafkalite.client.types import TopicPartition as TP
from spark_kafkalite.datasource.offset_range_calculator import OffsetRange, rate_limit, split_ranges
from spark_kafkalite.datasource.stream_planning import compute_end_offsets, plan_stream_ranges

A0, A1, B0 = TP("a", 0), TP("a", 1), TP("b", 0)


def test_rate_limit_proportional_to_backlog() -> None:
    start = {A0: 0, A1: 100, B0: 0}
    latest = {A0: 300, A1: 200, B0: 600}  # backlogs 300, 100, 600 -> total 1000
    end = rate_limit(100, start, latest)
    assert end == {A0: 30, A1: 110, B0: 60}


def test_rate_limit_never_starves_and_never_passes_latest() -> None:
    start = {A0: 0, A1: 0}
    latest = {A0: 10_000, A1: 1}
    end = rate_limit(10, start, latest)
    assert end[A1] == 1  # share 0.001 -> ceil -> 1 record
    assert end[A0] == 9  # floor(10 * 10000/10001)
    assert rate_limit(10**9, start, latest) == latest


def test_rate_limit_no_backlog_returns_latest_and_new_partitions_start_at_earliest() -> None:
    assert rate_limit(5, {A0: 7}, {A0: 7}) == {A0: 7}
    end = rate_limit(10, {A0: 0}, {A0: 10, A1: 10}, earliest_of_new={A1: 0})
    assert end == {A0: 5, A1: 5}


def test_rate_limit_overflow_guard() -> None:
    big = 2**63 - 10
    assert rate_limit(2**62, {A0: big - 5}, {A0: big}) == {A0: big}


@given(
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=8),
    st.integers(1, 10**6),
)
def test_rate_limit_properties(pairs: list[tuple[int, int]], limit: int) -> None:
    start = {TP("t", i): s for i, (s, _) in enumerate(pairs)}
    latest = {TP("t", i): s + backlog for i, (s, backlog) in enumerate(pairs)}
    end = rate_limit(limit, start, latest)
    assert set(end) == set(latest)
    for tp in latest:
        assert start[tp] <= end[tp] <= latest[tp]
    nonempty = [tp for tp in latest if latest[tp] > start[tp]]
    taken = sum(end[tp] - start[tp] for tp in latest)
    # every partition with a backlog progresses; the total exceeds the limit only by the "never starve" ceil
    assert all(end[tp] > start[tp] for tp in nonempty)
    assert taken <= max(limit, 0) + len(nonempty)


def r(p: int, f: int, u: int, t: str = "a") -> OffsetRange:
    return OffsetRange(t, p, f, u)


def test_split_drops_empty_and_keeps_order() -> None:
    assert split_ranges([r(0, 5, 5), r(1, 0, 3)]) == [r(1, 0, 3)]


def test_max_records_per_partition() -> None:
    # Spark's KafkaOffsetRangeCalculatorSuite: max=4, range [1, 6) -> [1, 3), [3, 6)
    assert split_ranges([r(0, 1, 6)], max_records_per_partition=4) == [r(0, 1, 3), r(0, 3, 6)]
    pieces = split_ranges([r(0, 0, 100)], max_records_per_partition=30)
    assert len(pieces) == 4 and pieces[0].from_offset == 0 and pieces[-1].until_offset == 100
    assert all(a.until_offset == b.from_offset for a, b in zip(pieces, pieces[1:], strict=False))


def test_min_partitions_splits_large_ranges_only() -> None:
    ranges = [r(0, 0, 1000), r(1, 0, 10)]
    out = split_ranges(ranges, min_partitions=4)
    assert [x for x in out if x.partition == 1] == [r(1, 0, 10)]
    big = [x for x in out if x.partition == 0]
    assert len(big) == 3
    assert big[0].from_offset == 0 and big[-1].until_offset == 1000
    assert sum(x.size for x in big) == 1000
    assert split_ranges(ranges, min_partitions=2) == ranges  # already enough partitions


def test_compute_end_offsets_with_latest_marker_and_new_partition() -> None:
    start = {A0: -1, A1: 5}
    latest = {A0: 50, A1: 25, B0: 10}
    assert compute_end_offsets(start, latest, None) == latest
    end = compute_end_offsets(start, latest, 10, earliest_of_new={B0: 0})
    assert end[A0] == 50  # the marker partition starts at latest: nothing to read in this batch
    assert end[A1] - 5 + end[B0] <= 10 and end[A1] > 5 and end[B0] > 0


class Loss(Exception):
    pass


def _raise(message: str) -> None:
    raise Loss(message)


def test_plan_stream_ranges_markers_and_new_partitions() -> None:
    ranges = plan_stream_ranges(
        {A0: -1, A1: 5},
        {A0: 50, A1: 25, B0: 10},
        earliest=lambda tps: dict.fromkeys(tps, 0),
        report_data_loss=_raise,
    )
    assert ranges == [r(0, 50, 50), r(1, 5, 25), r(0, 0, 10, "b")]


@pytest.mark.parametrize(
    ("start", "end", "earliest", "message"),
    [
        ({A0: 5}, {A0: 3}, {}, "offset was changed from 5 to 3"),
        ({A0: 5, A1: 1}, {A0: 6}, {}, r"\[a-1\] are gone"),
        ({A0: 5}, {A0: 6, A1: 4}, {A1: 2}, "Added partition a-1 starts from 2 instead of 0"),
        ({A0: 5}, {A0: 6, A1: 4}, {}, r"Cannot find earliest offsets of \[a-1\]"),
    ],
)
def test_plan_stream_ranges_reports_data_loss(start, end, earliest, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Loss, match=message):
        plan_stream_ranges(
            start,
            end,
            earliest=lambda tps: {t: earliest[t] for t in tps if t in earliest},
            report_data_loss=_raise,
        )
    warnings: list[str] = []
    plan_stream_ranges(
        start,
        end,
        earliest=lambda tps: {t: earliest[t] for t in tps if t in earliest},
        report_data_loss=warnings.append,
    )
    assert warnings


def test_plan_stream_ranges_partition_only_in_start_that_still_exists_is_not_data_loss() -> None:
    # Replay of an uncommitted batch 0: initialOffset now also names the added partition a-1,
    # the batch's stored end offsets do not. Plan nothing for a-1; no data loss.
    ranges = plan_stream_ranges(
        {A0: 0, A1: 0},
        {A0: 10},
        earliest=lambda tps: dict.fromkeys(tps, 0),
        report_data_loss=_raise,
        current_partitions=lambda: {A0, A1},
    )
    assert ranges == [r(0, 0, 10)]
    with pytest.raises(Loss, match=r"\[a-1\] are gone"):  # really gone: still data loss
        plan_stream_ranges(
            {A0: 0, A1: 0},
            {A0: 10},
            earliest=lambda tps: dict.fromkeys(tps, 0),
            report_data_loss=_raise,
            current_partitions=lambda: {A0},
        )
