"""Consumer lag of a ``kafkalite`` streaming query, from Spark's streaming progress.

Spark's Kafka source reports ``minOffsetsBehindLatest`` / ``maxOffsetsBehindLatest`` /
``avgOffsetsBehindLatest`` in ``progress.sources[i].metrics`` (SPARK-34854). Python data sources
have no custom-metrics hook (pyspark 4.2-4.3: ``metrics`` stays ``{}``), but the progress of every
micro-batch carries ``endOffset`` and ``latestOffset`` (from the reader's
``reportLatestOffset``), so the same numbers are computed here from the progress JSON::

    from spark_kafkalite.datasource.progress import offsets_behind_latest
    lag = offsets_behind_latest(query.lastProgress)   # {"maxOffsetsBehindLatest": 12, ...}

The stream reader also logs them (logger ``spark_kafkalite.datasource.stream_reader``, INFO) at
every trigger. ``latestOffset`` is fetched when the batch is planned, so the lag is the backlog
left after this micro-batch as of its planning time (Spark's definition).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.offsets import PartitionOffsetMap, from_offset_dict

__all__ = ["lag_metrics", "offsets_behind_latest", "partition_lag"]


def partition_lag(
    consumed: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
) -> PartitionOffsetMap:
    """``latest - consumed`` per partition of ``latest`` (Spark's ``metrics``: a partition not yet
    consumed, or holding the ``-1``/``-2`` start markers, counts as 0 behind / from 0)."""
    lag: PartitionOffsetMap = {}
    for tp, end in latest.items():
        position = consumed.get(tp)
        if position == -1:
            lag[tp] = 0
        elif position is None or position < 0:
            lag[tp] = max(end, 0)
        else:
            lag[tp] = max(end - position, 0)
    return lag


def lag_metrics(
    consumed: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
) -> dict[str, Any]:
    """``{"minOffsetsBehindLatest", "maxOffsetsBehindLatest", "avgOffsetsBehindLatest"}`` (ints,
    ints, float) over the partitions of ``latest``; empty when ``latest`` is empty."""
    lag = partition_lag(consumed, latest)
    if not lag:
        return {}
    values = list(lag.values())
    return {
        "minOffsetsBehindLatest": min(values),
        "maxOffsetsBehindLatest": max(values),
        "avgOffsetsBehindLatest": sum(values) / len(values),
    }


def _offsets(value: Any) -> PartitionOffsetMap:
    if value is None:
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    return from_offset_dict(value)


def offsets_behind_latest(progress: Any, source_index: int = 0) -> dict[str, Any]:
    """Lag metrics of one source of a streaming progress (``query.lastProgress``, an item of
    ``query.recentProgress``, its ``.json`` string, or the parsed dict), plus
    ``"partitions": {"topic-p": lag}``. Empty when the progress has no ``endOffset`` /
    ``latestOffset`` (e.g. before the first batch).

    Raises:
        IndexError: the progress has no source ``source_index``.
    """
    if progress is None:
        return {}
    if hasattr(progress, "json") and not isinstance(progress, Mapping):
        progress = progress.json
    if isinstance(progress, str):
        progress = json.loads(progress)
    source = progress["sources"][source_index]
    consumed, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
    if not latest:
        return {}
    result = lag_metrics(consumed, latest)
    result["partitions"] = {
        f"{tp.topic}-{tp.partition}": lag for tp, lag in sorted(partition_lag(consumed, latest).items())
    }
    return result
