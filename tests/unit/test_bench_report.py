"""BENCHMARKS.md is rendered whole from the stored runs (bench/report.py, issue #20)."""

from __future__ import annotations

from pathlib import Path

from bench import report


def _run(script: str, date: str, tables: list[dict], **extra: object) -> dict:
    run = report.record(
        script=script,
        argv=["--records", "1000"],
        via="python -m bench --quick",
        date=date,
        machine="x86_64, 2 cores, Python 3.11.7",
        load_average=(0.42, 1.26),
        seconds=12.3,
        exit_code=0,
        peak_rss_mib={"broker": 41.6, "bench driver": 100.2},
        tables=tables,
    )
    run.update(extra)
    return run


PRODUCE = {
    "title": "produce: 1,000 keyed records",
    "columns": ["run", "records", "records/s", "note"],
    "rows": [
        ["ours, acks=1", "1,000", "50,000", "a | b"],
        ["peer: confluent-kafka, acks=1", "1,000", "200,000", ""],
    ],
}
CUSTOM = {"title": "a table no ratio reads", "columns": ["measure", "value"], "rows": [["x", "1"]]}


def test_record_keeps_command_date_load_and_rss() -> None:
    run = _run("produce", "2026-11-28 06:00 UTC", [PRODUCE])
    assert run["command"] == "python bench/produce.py --records 1000"
    assert run["load_average"] == [0.4, 1.3]
    assert run["peak_rss_mib"] == {"bench driver": 100, "broker": 42}


def test_render_whole_file_one_section_per_benchmark_in_order() -> None:
    runs = {
        "newbench": _run("newbench", "2026-11-28 07:00 UTC", [CUSTOM]),
        "produce": _run("produce", "2026-11-28 06:00 UTC", [PRODUCE], note="A note."),
        "consume": _run("consume", "2026-11-27 06:00 UTC", [CUSTOM]),
    }
    text = report.render(runs, ["consume", "produce", "missing"])
    assert text.startswith(report.HEADER)
    sections = [line[3:] for line in text.splitlines() if line.startswith("## ")]
    # the static how-to, the summary, then the stored runs in BENCHES order, unknown ones last
    assert sections == ["How to reproduce", "Summary: ours beside the peer", "consume", "produce", "newbench"]
    # the ratio beside its peer, with the run's date and the pair's goal (produce: 0.5)
    assert (
        "| produce | 2026-11-28 06:00 UTC | produce: 1,000 keyed records | ours, acks=1: 50,000 /s | "
        "peer: confluent-kafka, acks=1: 200,000 /s | **0.25×** (not met) | ≥ 0.50× |"
    ) in text
    assert (
        "`python bench/produce.py --records 1000` (by `python -m bench --quick`), 2026-11-28 06:00 UTC, "
        "on x86_64, 2 cores, Python 3.11.7; 1-minute load average 0.4 at the start, 1.3 at the end; "
        "12 s; exit 0. Peak RSS (MiB, `VmHWM`, largest process of each role): bench driver 100, broker 42. "
        "A note."
    ) in text
    assert "| ours, acks=1 | 1,000 | 50,000 | a \\| b |" in text  # a pipe in a cell is escaped
    assert "|---|---:|---:|---:|" in text


def test_results_round_trip_and_render_from_file(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    assert report.load_results(path) == {}
    runs = {"produce": _run("produce", "2026-11-28 06:00 UTC", [PRODUCE])}
    report.save_results(runs, path)
    assert report.load_results(path) == runs
    out = tmp_path / "BENCHMARKS.md"
    report.write(report.load_results(path), ["produce"], out)
    assert out.read_text(encoding="utf-8") == report.render(runs, ["produce"])
