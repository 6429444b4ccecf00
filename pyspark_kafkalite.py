"""Auto-registration shim: Spark imports every top-level ``pyspark_*`` module and registers its
``DefaultSource`` (SPARK-45917), so ``spark.read.format("kafkalite")`` works with no
``spark.dataSource.register`` call. The import must stay cheap and must never fail."""

from __future__ import annotations

try:
    from spark_kafkalite.datasource.source import KafkaLiteDataSource as DefaultSource
except Exception:  # pragma: no cover - never break Spark's lookup of other sources
    __all__: list[str] = []
else:
    __all__ = ["DefaultSource"]
