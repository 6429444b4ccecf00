"""bench/__main__.py (``python -m bench``): ratios from the scripts' JSON tables, and the
BENCHMARKS.md section replaced between its markers without touching the rest."""

from __future__ import annotations

from pathlib import Path

from bench.__main__ import BEGIN, END, Run, print_summary, ratios, render_markdown, write_benchmarks_md


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


def test_section_is_replaced_between_markers(tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    md.write_text("# Benchmarks\n\nhand-written intro\n")
    run = _run("consume", [["ours: x", "1", "1", "200"], ["peer: confluent_kafka Consumer", "1", "1", "100"]])
    write_benchmarks_md(render_markdown([run], quick=True), md)
    first = md.read_text()
    assert "hand-written intro" in first and BEGIN in first and END in first and "**2.00×** (met)" in first
    with md.open("a") as f:
        f.write("\n## A section someone added later\n")
    write_benchmarks_md("new body", md)
    text = md.read_text()
    assert text.count(BEGIN) == 1 and "new body" in text and "**2.00×**" not in text
    assert "hand-written intro" in text and "A section someone added later" in text


def test_console_summary_prints_ratios_and_rss(capsys) -> None:  # type: ignore[no-untyped-def]
    run = _run("consume", [["ours: x", "1", "1", "150"], ["peer: confluent_kafka Consumer", "1", "1", "100"]])
    print_summary([run])
    out = capsys.readouterr().out
    assert "1.50×" in out and "goal ≥ 1×: met" in out and "broker 50" in out and "python worker 130" in out
