"""Executor side of a read: fetch exactly ``[from_offset, until_offset)`` of one topic-partition
and yield Arrow record batches (Spark's ``KafkaBatchPartitionReader`` + ``KafkaDataConsumer``).

The consumer is assigned (never subscribed), seeks to ``from_offset`` and stops at
``until_offset``; ``auto.offset.reset=none`` so that nothing moves without the driver saying so.
Gaps (compaction, transaction markers) are normal: progress is tracked with the consumer position,
never by counting records. Offsets below the log start (retention) follow ``failOnDataLoss``:
raise, or skip to the first available offset of the range.

Consumers are pooled per Python worker (Spark reuses executor workers across tasks), keyed by
their configuration, and closed on any error.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.arrow import columns_to_batch
from spark_kafkalite.datasource.client_pool import ClientPool
from spark_kafkalite.datasource.client_protocols import SourceConsumer
from spark_kafkalite.datasource.errors import (
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE,
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE,
    DataLossError,
    FetchTimeoutError,
)
from spark_kafkalite.datasource.offset_range_calculator import OffsetRange
from spark_kafkalite.protocol.errors import OffsetOutOfRangeError

__all__ = ["KafkaInputPartition", "ReadConfig", "read_offset_range"]

log = logging.getLogger(__name__)

_POLL_SLICE_MS = 500
_DEFAULT_BATCH_ROWS = 10_000
_READER_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
"""Default ``max.partition.fetch.bytes`` of executor consumers (Kafka's default: 1 MiB). A read
task fetches one partition, so each fetch round trip brings up to 8 MiB (~60k rows of 100 B)
instead of ~8k rows; measured with bench/spark_read.py, 1M rows: 0.38-0.43x of the Python-source
floor at 1 MiB vs 1.3x at 8 MiB (issue #10). Memory: at most one buffered response plus one
fetched ahead, within 2 x ``fetch.max.bytes``. ``kafka.max.partition.fetch.bytes`` overrides it."""


class KafkaInputPartition(InputPartition):
    """One Spark input partition: an :class:`OffsetRange` (picklable; the only state that
    travels from the driver to the executor)."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.offset_range = offset_range

    def __repr__(self) -> str:
        r = self.offset_range
        return f"KafkaInputPartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


@dataclass(frozen=True, slots=True)
class ReadConfig:
    """What an executor needs besides the range (carried by the pickled reader)."""

    client_config: dict[str, str] = field(repr=False)  # may hold secrets (sasl.jaas.config, ...)
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    batch_rows: int = _DEFAULT_BATCH_ROWS
    extra: dict[str, str] = field(default_factory=dict)

    def consumer_config(self) -> dict[str, Any]:
        config: dict[str, Any] = dict(self.client_config)
        config.setdefault("client.id", "kafkalite-spark-executor")
        config.setdefault("max.poll.records", str(self.batch_rows))
        config.setdefault("max.partition.fetch.bytes", str(_READER_PARTITION_FETCH_BYTES))
        config.update(self.extra)
        config["auto.offset.reset"] = "none"
        # Spark's kafkaParamsForExecutors: never commit; and no group at all (kafka.group.id is
        # only for commitOffsetsToGroup, done by the driver with the query's end offsets)
        config["enable.auto.commit"] = "false"
        config.pop("group.id", None)
        return config


def _new_consumer(config: dict[str, Any]) -> SourceConsumer:
    from spark_kafkalite.client import KafkaConsumer

    return KafkaConsumer(config)


#: Idle consumers per configuration, reused by later tasks in the same Python worker (Spark's
#: consumer cache, simplified; idle ones are closed after ``spark.kafka.consumer.cache.timeout``,
#: 5 minutes).
_POOL = ClientPool(_new_consumer, idle_timeout_s=300.0)


def _report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    if fail_on_data_loss:
        raise DataLossError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
    log.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)


def read_offset_range(rng: OffsetRange, config: ReadConfig) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``rng`` as Arrow batches of at most ``config.batch_rows`` rows.

    Raises:
        DataLossError: offsets of the range are no longer available and ``failOnDataLoss`` is true.
        FetchTimeoutError: no progress for ``kafkaConsumer.pollTimeoutMs``.
        KafkaError: any other client error.
    """
    if rng.size <= 0:
        return
    consumer_config = config.consumer_config()
    consumer = _POOL.acquire(consumer_config)
    ok = False
    try:
        yield from _read(consumer, rng, config)
        ok = True
    finally:
        if ok:
            _POOL.release(consumer_config, consumer)
        else:
            _POOL.discard(consumer)


def _read(consumer: SourceConsumer, rng: OffsetRange, config: ReadConfig) -> Iterator[pa.RecordBatch]:
    """Poll columns (decoded straight into Arrow, no Python object per record), slice the first
    and last batch to ``[from_offset, until_offset)`` and yield them as they come (each at most
    ``max.poll.records`` = ``batch_rows`` rows)."""
    tp = TopicPartition(rng.topic, rng.partition)
    until = rng.until_offset
    consumer.assign([tp])
    consumer.seek(tp, rng.from_offset)
    next_offset = rng.from_offset
    timeout_s = config.poll_timeout_ms / 1000.0
    last_progress = time.monotonic()
    while next_offset < until:
        try:
            polled = consumer.poll_columns(
                timeout_ms=min(_POLL_SLICE_MS, config.poll_timeout_ms),
                max_records=config.batch_rows,
                include_headers=config.include_headers,
            )
        except OffsetOutOfRangeError:
            next_offset = _skip_out_of_range(consumer, tp, next_offset, until, config.fail_on_data_loss)
            if next_offset < until:
                consumer.seek(tp, next_offset)
            last_progress = time.monotonic()
            continue
        columns = polled.get(tp)
        if columns:
            offsets = _int64_view(columns["offset"])
            start = bisect.bisect_left(offsets, next_offset) if offsets[0] < next_offset else 0
            stop = bisect.bisect_left(offsets, until) if offsets[-1] >= until else len(offsets)
            if start >= len(offsets):
                continue  # stale: all before our position
            if stop > start:
                batch = columns_to_batch(columns, rng.topic, rng.partition, config.include_headers)
                if start or stop < len(offsets):
                    batch = batch.slice(start, stop - start)
                next_offset = offsets[stop - 1] + 1
                yield batch
            else:
                next_offset = until  # the next record is past the end: the rest of the range is a gap
            last_progress = time.monotonic()
        else:
            position = consumer.position(tp)
            if position > next_offset:
                next_offset = min(position, until)
                last_progress = time.monotonic()
            elif _beyond_log_end(consumer, tp, next_offset):
                # Spark's KafkaDataConsumer: an empty poll at or past the latest offset is
                # OffsetOutOfRange (data loss: the log was truncated or the range end is wrong)
                next_offset = _skip_out_of_range(consumer, tp, next_offset, until, config.fail_on_data_loss)
                if next_offset < until:
                    consumer.seek(tp, next_offset)
                last_progress = time.monotonic()
            elif time.monotonic() - last_progress > timeout_s:
                raise FetchTimeoutError(
                    f"Cannot fetch record for offset {next_offset} in {config.poll_timeout_ms} milliseconds "
                    f"(topic-partition {rng.topic}-{rng.partition}, range [{rng.from_offset}, {until}))"
                )


def _int64_view(array: pa.Array) -> memoryview:
    """The values of a null-free int64 Arrow array as a memoryview (bisect-able, no copy)."""
    view = memoryview(array.buffers()[1]).cast("q")
    return view[array.offset : array.offset + len(array)]


def _beyond_log_end(consumer: SourceConsumer, tp: TopicPartition, offset: int) -> bool:
    """True when ``offset`` is at or past the partition's high watermark: first from the HW the
    last fetch reported (free), then confirmed with ListOffsets."""
    highwater = consumer.highwater(tp)
    if highwater is not None and offset < highwater:
        return False
    latest = consumer.end_offsets([tp]).get(tp)
    return latest is not None and offset >= latest


def _skip_out_of_range(
    consumer: SourceConsumer, tp: TopicPartition, offset: int, until: int, fail_on_data_loss: bool
) -> int:
    """Handle OFFSET_OUT_OF_RANGE at ``offset``: raise (failOnDataLoss) or return the first
    available offset in ``[offset, until)`` (``until`` when none is left)."""
    earliest = consumer.beginning_offsets([tp]).get(tp)
    latest = consumer.end_offsets([tp]).get(tp)
    if earliest is None or latest is None:
        _report_data_loss(
            f"Cannot fetch offsets of {tp.topic}-{tp.partition}: the partition is gone", fail_on_data_loss
        )
        return until
    if offset < earliest:
        _report_data_loss(
            f"Cannot fetch offset {offset} of {tp.topic}-{tp.partition}: the earliest available offset is "
            f"{earliest}; records [{offset}, {min(earliest, until)}) are lost",
            fail_on_data_loss,
        )
        return min(earliest, until)
    _report_data_loss(
        f"Cannot fetch offset {offset} of {tp.topic}-{tp.partition}: the latest offset is {latest}, "
        f"below the planned range end {until}",
        fail_on_data_loss,
    )
    return until
