"""``python -m bench``: the ratios :mod:`bench.report` pairs from the scripts' JSON tables, and the
console summary of :mod:`bench.__main__` (the generated BENCHMARKS.md is tested in
test_bench_report.py)."""

from __future__ import annotations

from bench.__main__ import Run, print_summary
from bench.report import Ratio
from bench.report import ratios as table_ratios


def ratios(runs: list[Run]) -> list[Ratio]:
    return [r for run in runs for r in table_ratios(run.script, run.tables)]


def _run(script: str, rows: list[list[str]], columns: list[str] | None = None) -> Run:
    table = {
        "script": script,
        "title": "t",
        "columns": columns or ["run", "rows", "seconds", "rows/s"],
        "rows": rows,
    }
    return Run(script, [], 1.0, 0, [table], {"broker": 50 * 1024, "python worker": 130 * 1024}, 120 * 1024)


def test_ratios_pair_ours_with_the_peer_of_the_same_table() -> None:
    run = _run(
        "spark_read",
        [
            ["ours: format(kafkalite): count()", "1,000", "1.0", "700,000"],
            ["ours: format(kafkalite): write noop", "1,000", "1.0", "300,000"],
            ["peer: Python source, Arrow from memory: count()", "1,000", "1.0", "1,000,000"],
            ["peer: Python source, Arrow from memory: write noop", "1,000", "1.0", "600,000"],
        ],
    )
    got = {(r.ours, r.peer): round(r.ratio, 2) for r in ratios([run])}
    assert got == {
        ("ours: format(kafkalite): count()", "peer: Python source, Arrow from memory: count()"): 0.7,
        ("ours: format(kafkalite): write noop", "peer: Python source, Arrow from memory: write noop"): 0.5,
    }


def test_latency_ratio_is_peer_over_ours() -> None:
    run = _run(
        "spark_latency",
        [
            ["ours: produce -> kafkalite -> Spark -> kafkalite -> consumer", "90/90", "400", "500"],
            ["ours: micro-batch (triggerExecution), kafkalite -> kafkalite", "20", "450", "600"],
            ["peer: micro-batch (triggerExecution), no-op Python source -> noop sink", "20", "300", "350"],
        ],
        ["measure", "samples", "p50 ms", "p95 ms"],
    )
    got = {r.ours: (round(r.ratio, 2), r.pair.goal and round(r.pair.goal, 2)) for r in ratios([run])}
    # issue #10 item 5: a micro-batch at most 1.5x the no-op peer's, i.e. peer/ours >= 1/1.5
    assert got == {
        "ours: micro-batch (triggerExecution), kafkalite -> kafkalite": (0.67, 0.67),
        "ours: produce -> kafkalite -> Spark -> kafkalite -> consumer": (0.75, None),
    }
    (micro_batch,) = [r for r in ratios([run]) if r.pair.goal]
    assert micro_batch.ratio >= micro_batch.pair.goal  # exactly 1.5x meets the goal


def test_console_summary_prints_ratios_and_rss(capsys) -> None:  # type: ignore[no-untyped-def]
    run = _run("consume", [["ours: x", "1", "1", "150"], ["peer: confluent_kafka Consumer", "1", "1", "100"]])
    print_summary([run])
    out = capsys.readouterr().out
    assert "1.50×" in out and "goal ≥ 1×: met" in out and "broker 50" in out and "python worker 130" in out
