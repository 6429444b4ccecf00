"""spark-kafkalite: stream data between Apache Spark and a Kafka-compatible log.

Public entry points:
- :class:`spark_kafkalite.LocalCluster`: an embedded broker cluster on free ports (lazy import).
- :mod:`spark_kafkalite.client`: the Kafka client (producer, consumer, admin).
- format ``"kafkalite"`` in Spark (registered automatically through ``pyspark_kafkalite``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["LocalCluster", "__version__"]

if TYPE_CHECKING:
    from spark_kafkalite.local_cluster import LocalCluster


def __getattr__(name: str) -> Any:
    if name == "LocalCluster":
        from spark_kafkalite.local_cluster import LocalCluster

        return LocalCluster
    raise AttributeError(f"module 'spark_kafkalite' has no attribute {name!r}")
