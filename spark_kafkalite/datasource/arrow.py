"""The Kafka row schema (Spark's ``KafkaRecordToRowConverter``) and its Arrow form.

Rows: ``key binary, value binary, topic string, partition int, offset long, timestamp
timestamp, timestampType int`` (+ ``headers array<struct<key:string,value:binary>>`` with
``includeHeaders``); every field nullable. ``headers`` is null (not an empty array) for a
record without headers.

Since pyspark 4.2 (SPARK-55583) Arrow batches yielded by ``read()`` must have a schema *equal* to
``to_arrow_schema(spark_schema, timezone="UTC")``: ``timestamp[us, tz=UTC]`` and the same
nullability. :func:`records_to_batch` builds exactly that schema.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_kafkalite.client.types import ConsumerRecord

__all__ = [
    "HEADERS_TYPE",
    "kafka_schema",
    "kafka_arrow_schema",
    "records_to_batch",
    "columns_to_batch",
    "empty_batch",
]

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]),
    True,
)
"""Spark type of the ``headers`` column: ``array<struct<key:string,value:binary>>``."""


def kafka_schema(include_headers: bool = False) -> StructType:
    """Spark's fixed Kafka source schema (all fields nullable)."""
    fields = [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", TimestampType(), True),
        StructField("timestampType", IntegerType(), True),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE, True))
    return StructType(fields)


@functools.cache
def kafka_arrow_schema(include_headers: bool = False) -> pa.Schema:
    """``to_arrow_schema(kafka_schema(include_headers), timezone="UTC")`` (cached)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")


def _headers_array(
    headers: Sequence[Sequence[tuple[str, bytes | None]]], arrow_type: pa.DataType
) -> pa.Array:
    values = [[{"key": k, "value": v} for k, v in hs] if hs else None for hs in headers]
    return pa.array(values, type=arrow_type)


def records_to_batch(
    records: Sequence[ConsumerRecord], topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """Columnar Arrow batch for records of one topic-partition (schema: :func:`kafka_arrow_schema`).

    Timestamps go from ms to µs (``timestamp[us, tz=UTC]``); a record without a timestamp (-1 ms)
    becomes -1000 µs as in Spark.
    """
    schema = kafka_arrow_schema(include_headers)
    n = len(records)
    if n == 0:
        return empty_batch(include_headers)
    _, _, offsets, timestamps_ms, timestamp_types, keys, values, headers = zip(*records, strict=True)
    timestamps = pc.multiply(pa.array(timestamps_ms, pa.int64()), 1000).cast(schema.field("timestamp").type)
    arrays = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        timestamps,
        pa.array(timestamp_types, pa.int32()),
    ]
    if include_headers:
        arrays.append(_headers_array(headers, schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def columns_to_batch(
    columns: Mapping[str, pa.Array], topic: str, partition: int, include_headers: bool
) -> pa.RecordBatch:
    """The Kafka Arrow batch (schema: :func:`kafka_arrow_schema`) over columns decoded straight
    from RecordBatch bytes (``KafkaConsumer.poll_columns``): no Python object per record; ``topic``
    and ``partition`` are constant columns built in Arrow."""
    schema = kafka_arrow_schema(include_headers)
    n = len(columns["offset"])
    arrays = [
        columns["key"],
        columns["value"],
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        columns["offset"],
        columns["timestamp"],
        columns["timestampType"],
    ]
    if include_headers:
        headers = columns["headers"]
        want = schema.field("headers").type
        # same layout, Spark's field names ("element") instead of Arrow's default ("item")
        arrays.append(headers if headers.type == want else headers.cast(want))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def empty_batch(include_headers: bool = False) -> pa.RecordBatch:
    """A zero-row batch with the Kafka Arrow schema."""
    return pa.RecordBatch.from_pylist([], schema=kafka_arrow_schema(include_headers))
