"""The flights demo end to end (Kafka load, streaming aggregation, read-back) against the same
numbers computed directly from the CSV with pandas."""

from __future__ import annotations

import os
import sys
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from spark_kafkalite.demo import DemoConfig, expose_auto_registration_module, flights_csv_zip, run_demo

# Before any SparkSession starts (see tests/spark/conftest.py for why).
os.environ["PYSPARK_PYTHON"] = sys.executable
expose_auto_registration_module()


def _expected_from_csv() -> dict[str, dict[str, Any]]:
    with zipfile.ZipFile(flights_csv_zip()) as archive, archive.open("flights.csv") as handle:
        flights = pd.read_csv(handle)
    delay = flights["dep_delay"]
    grouped = flights.assign(delayed=(delay > 15).astype("int64")).groupby("carrier")
    frame = pd.DataFrame(
        {
            "flights": grouped.size(),
            "departed": grouped["dep_delay"].count(),
            "sum_dep_delay": grouped["dep_delay"].sum(),
            "avg_dep_delay": grouped["dep_delay"].mean(),
            "max_dep_delay": grouped["dep_delay"].max(),
            "delayed_15": grouped["delayed"].sum(),
            "days": flights.groupby("carrier")[["year", "month", "day"]].apply(
                lambda d: len(d.drop_duplicates())
            ),
        }
    )
    return {carrier: row.to_dict() for carrier, row in frame.iterrows()}


@pytest.mark.timeout(420)
def test_demo_result_matches_direct_csv_computation(
    spark_session: Any, bootstrap_servers: str, tmp_path: Path
) -> None:
    spark_session.sparkContext.setLogLevel("ERROR")
    suffix = uuid.uuid4().hex[:8]
    config = DemoConfig(
        show_progress=False,
        input_topic=f"flights-{suffix}",
        output_topic=f"delays_by_carrier-{suffix}",
        timeout_s=360,
    )
    result = run_demo(spark_session, bootstrap_servers, config, work_dir=tmp_path)

    expected = _expected_from_csv()
    assert result.rows_loaded == 336_776
    assert result.rows_dropped_by_watermark == 0
    assert result.duplicate_windows == 0
    assert result.micro_batches >= 7  # 336,776 rows at 50,000 per trigger, + the sentinel batch
    assert result.windows_written == sum(int(e["days"]) for e in expected.values())
    assert sorted(r["carrier"] for r in result.carriers) == sorted(expected)
    averages = [r["avg_dep_delay"] for r in result.carriers]
    assert averages == sorted(averages, reverse=True)
    for row in result.carriers:
        exp = expected[row["carrier"]]
        for key in ("flights", "departed", "sum_dep_delay", "max_dep_delay", "delayed_15", "days"):
            assert row[key] == int(exp[key]), (row["carrier"], key)
        assert row["avg_dep_delay"] == pytest.approx(exp["avg_dep_delay"], rel=1e-9, abs=0)
        assert row["cancelled"] == int(exp["flights"] - exp["departed"])
