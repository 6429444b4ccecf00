"""The executor-side range reader (no Spark needed): exact ranges, Arrow schema, batching,
consumer reuse, timeouts and failOnDataLoss."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from spark_kafkalite.datasource.arrow import kafka_arrow_schema
from spark_kafkalite.datasource.errors import DataLossError
from spark_kafkalite.datasource.offset_range_calculator import OffsetRange
from spark_kafkalite.datasource.partition_reader import ReadConfig, read_offset_range

pytestmark = pytest.mark.timeout(60)


def _read(rng: OffsetRange, config: ReadConfig) -> pa.Table:
    batches = list(read_offset_range(rng, config))
    for batch in batches:
        assert batch.schema.equals(kafka_arrow_schema(config.include_headers))
    return pa.Table.from_batches(batches, schema=kafka_arrow_schema(config.include_headers))


def test_reads_exactly_the_range_in_batches(bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic(partitions=2)
    produce(topic, [(1, f"k{i}".encode(), f"v{i}".encode()) for i in range(100)])
    config = ReadConfig({"bootstrap.servers": bootstrap_servers}, batch_rows=7)
    batches = list(read_offset_range(OffsetRange(topic, 1, 10, 40), config))
    assert [b.num_rows for b in batches] == [7, 7, 7, 7, 2]
    table = pa.Table.from_batches(batches)
    assert table.column("offset").to_pylist() == list(range(10, 40))
    assert table.column("value").to_pylist() == [f"v{i}".encode() for i in range(10, 40)]
    assert set(table.column("partition").to_pylist()) == {1}
    assert set(table.column("topic").to_pylist()) == {topic}
    # the pooled consumer is reused for another partition / range
    assert _read(OffsetRange(topic, 1, 95, 100), config).column("offset").to_pylist() == list(range(95, 100))
    assert _read(OffsetRange(topic, 0, 0, 0), config).num_rows == 0


def test_headers_column(bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic()
    produce(
        topic,
        [
            {"value": b"a", "headers": [("x", b"1"), ("x", None)]},
            {"value": b"b"},
        ],
    )
    table = _read(
        OffsetRange(topic, 0, 0, 2),
        ReadConfig({"bootstrap.servers": bootstrap_servers}, include_headers=True),
    )
    assert table.column("headers").to_pylist() == [
        [{"key": "x", "value": b"1"}, {"key": "x", "value": None}],
        None,
    ]


def test_range_end_beyond_the_log_is_data_loss_not_a_long_wait(
    bootstrap_servers, make_topic, produce
) -> None:
    """As Spark's KafkaDataConsumer: an empty poll at the latest offset is OffsetOutOfRange, so
    failOnDataLoss decides at once instead of waiting kafkaConsumer.pollTimeoutMs."""
    topic = make_topic()
    produce(topic, [(0, None, b"x")] * 3)
    strict = ReadConfig({"bootstrap.servers": bootstrap_servers}, poll_timeout_ms=60_000)
    started = time.monotonic()
    with pytest.raises(DataLossError, match="the latest offset is 3, below the planned range end 5"):
        _read(OffsetRange(topic, 0, 0, 5), strict)
    assert time.monotonic() - started < 20
    lenient = ReadConfig(
        {"bootstrap.servers": bootstrap_servers}, poll_timeout_ms=60_000, fail_on_data_loss=False
    )
    assert _read(OffsetRange(topic, 0, 1, 5), lenient).column("offset").to_pylist() == [1, 2]


def test_start_beyond_the_log_is_data_loss(bootstrap_servers, make_topic, produce) -> None:
    topic = make_topic()
    produce(topic, [(0, None, b"x")] * 3)
    strict = ReadConfig({"bootstrap.servers": bootstrap_servers}, poll_timeout_ms=5000)
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        _read(OffsetRange(topic, 0, 10, 20), strict)
    lenient = ReadConfig(
        {"bootstrap.servers": bootstrap_servers}, poll_timeout_ms=5000, fail_on_data_loss=False
    )
    assert _read(OffsetRange(topic, 0, 10, 20), lenient).num_rows == 0
