"""The data source's planning modules import without pyspark, checked in a fresh interpreter
(in the test process another module may have imported pyspark already)."""

from __future__ import annotations

import subprocess
import sys


def test_planning_modules_do_not_import_pyspark() -> None:
    """The pure planning logic stays importable (and unit-testable) without pyspark."""
    code = (
        "import sys; import spark_kafkalite.datasource.stream_planning, "
        "spark_kafkalite.datasource.offset_range_calculator; "
        "sys.exit(1 if 'pyspark' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
