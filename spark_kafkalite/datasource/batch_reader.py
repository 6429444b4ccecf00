"""Batch read (``spark.read.format("kafkalite")``): Spark's ``KafkaBatch`` / ``KafkaRelation``.

``partitions()`` runs on the driver (a planner worker): it resolves ``startingOffsets`` and
``endingOffsets`` against the brokers and returns one input partition per non-empty
topic-partition range (split further by ``minPartitions`` / ``maxRecordsPerPartition``).
``read()`` runs on executors and fetches exactly that range.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from spark_kafkalite.datasource.errors import OffsetsMismatchError
from spark_kafkalite.datasource.offset_range_calculator import OffsetRange, split_ranges
from spark_kafkalite.datasource.offset_reader import KafkaOffsetReader
from spark_kafkalite.datasource.options import SourceOptions
from spark_kafkalite.datasource.partition_reader import KafkaInputPartition, ReadConfig, read_offset_range
from spark_kafkalite.datasource.phase_timing import phase, timed_iterator
from spark_kafkalite.datasource.worker_heap import freeze_imported_heap

__all__ = ["KafkaLiteBatchReader", "read_config_for"]

log = logging.getLogger(__name__)


def read_config_for(options: SourceOptions) -> ReadConfig:
    """Executor read settings derived from validated source options.

    kafkalite's consumers never join a group (``kafka.group.id`` is not sent by assigned
    consumers), so ``groupIdPrefix`` only names them: ``client.id = <prefix>-executor`` unless
    ``kafka.client.id`` is set."""
    client_config = dict(options.client_config)
    if options.group_id_prefix and "client.id" not in client_config:
        client_config["client.id"] = f"{options.group_id_prefix}-executor"
    return ReadConfig(
        client_config=client_config,
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
    )


class KafkaLiteBatchReader(DataSourceReader):
    """Reads a bounded offset range of every subscribed partition. ``__init__`` does no I/O."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.read_config = read_config_for(options)

    def partitions(self) -> list[InputPartition]:
        """Resolve offsets on the driver and plan one input partition per range.

        Raises:
            TopicNotFoundError: a subscribed / assigned topic does not exist.
            OffsetsMismatchError: offset JSON does not name exactly the assigned partitions, or a
                resolved start offset is beyond its end offset.
        """
        with phase("driver.batch.partitions"):
            return self._partitions()

    def _partitions(self) -> list[InputPartition]:
        opts = self.options
        offset_reader = KafkaOffsetReader(
            opts.strategy,
            opts.client_config,
            num_retries=opts.fetch_offset_num_retries,
            retry_interval_ms=opts.fetch_offset_retry_interval_ms,
        )
        try:
            tps = offset_reader.topic_partitions()
            start = offset_reader.resolve(opts.starting, tps, is_starting=True)
            if opts.ending is None:  # parse_source_options(streaming=False) defaults it to latest
                raise RuntimeError("batch read options without ending offsets")
            end = offset_reader.resolve(opts.ending, tps, is_starting=False)
        finally:
            offset_reader.close()
        if set(start) != set(end):
            raise OffsetsMismatchError(
                f"different topic partitions for starting offsets {sorted(start)} and ending offsets {sorted(end)}"
            )
        ranges: list[OffsetRange] = []
        for tp in sorted(end):
            from_offset, until_offset = start[tp], end[tp]
            if from_offset > until_offset:
                raise OffsetsMismatchError(
                    f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset {from_offset} is "
                    f"greater than the resolved end offset {until_offset} for topic {tp.topic} partition "
                    f"{tp.partition}. Start offset is set too big a value, or the Kafka topic partition is broken."
                )
            ranges.append(OffsetRange(tp.topic, tp.partition, from_offset, until_offset))
        planned = split_ranges(
            ranges,
            min_partitions=opts.min_partitions,
            max_records_per_partition=opts.max_records_per_partition,
        )
        log.info(
            "kafkalite batch read: %d input partitions from %d topic-partitions", len(planned), len(ranges)
        )
        return [KafkaInputPartition(r) for r in planned]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Fetch the partition's range (executor). Spark substitutes ``InputPartition(None)`` when
        there is nothing to read: yields nothing then."""
        freeze_imported_heap()
        if not isinstance(partition, KafkaInputPartition):
            return iter(())
        return timed_iterator("read.task", read_offset_range(partition.offset_range, self.read_config))
