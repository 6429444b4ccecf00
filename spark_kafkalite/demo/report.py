"""The demo's final output: the carrier table, a summary, and the check against the direct
pyarrow computation."""

from __future__ import annotations

import sys
from typing import Any

from spark_kafkalite.demo.pipeline import DemoResult

__all__ = ["matches_expected", "print_result"]


def matches_expected(actual: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    if [r["carrier"] for r in actual] != [r["carrier"] for r in expected]:
        return False
    for a, e in zip(actual, expected, strict=True):
        for key in ("flights", "departed", "sum_dep_delay", "max_dep_delay", "delayed_15", "days"):
            if a[key] != e[key]:
                return False
        if (a["avg_dep_delay"] is None) != (e["avg_dep_delay"] is None):
            return False
        if a["avg_dep_delay"] is not None and abs(a["avg_dep_delay"] - e["avg_dep_delay"]) > 1e-9 * abs(
            e["avg_dep_delay"]
        ):
            return False
    return True


def print_result(result: DemoResult, verified: bool | None, wall_s: float) -> None:
    """Print the carrier table and a summary with rich."""
    from rich.console import Console
    from rich.table import Table

    console = Console() if sys.stdout.isatty() else Console(width=120)
    table = Table(
        title="NYC 2013 departures by carrier from topic delays_by_carrier (delays in minutes, worst first)"
    )
    for column, justify in (
        ("#", "right"),
        ("Carrier", "left"),
        ("Airline", "left"),
        ("Flights", "right"),
        ("Cancelled", "right"),
        ("Avg delay", "right"),
        ("% > 15", "right"),
        ("Max delay", "right"),
        ("Days", "right"),
    ):
        table.add_column(column, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for rank, row in enumerate(result.carriers, start=1):
        table.add_row(
            str(rank),
            row["carrier"],
            row["name"],
            f"{row['flights']:,}",
            f"{row['cancelled']:,}",
            "" if row["avg_dep_delay"] is None else f"{row['avg_dep_delay']:.2f}",
            "" if row["pct_delayed_15"] is None else f"{row['pct_delayed_15']:.1f}",
            "" if row["max_dep_delay"] is None else str(row["max_dep_delay"]),
            str(row["days"]),
        )
    console.print(table)
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in result.seconds.items())
    console.print(
        f"{result.rows_loaded:,} flights loaded; {result.micro_batches} micro-batches; "
        f"{result.windows_written:,} (carrier, day) windows written ({result.duplicate_windows} duplicates); "
        f"{result.rows_dropped_by_watermark} rows dropped by the watermark."
    )
    if verified is not None:
        console.print(
            "Matches a direct pyarrow computation from the CSV: "
            + ("[green]yes[/green]" if verified else "[red]NO[/red]")
        )
    console.print(f"Wall time {wall_s:.1f}s ({phases}).")
