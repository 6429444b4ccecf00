"""Streaming read (``spark.readStream.format("kafkalite")``): Spark's ``KafkaMicroBatchStream``.

Offsets are ``{"topic": {"partition": next_offset}}`` dicts, always canonical (sorted topics,
numerically sorted string partition keys) because Spark compares them as JSON strings.

Which process calls what (pyspark >= 4.2, see research/pyspark_datasource.md §0, §3):
``initialOffset``, ``latestOffset``, ``getDefaultReadLimit``, ``reportLatestOffset``,
``partitions``, ``commit`` and ``prepareForTriggerAvailableNow`` run on one long-lived instance in
the driver's streaming runner; ``read`` runs on executors on unpickled copies of *another*
instance (created by the planner), so ``read`` only uses the pickled options and the
:class:`KafkaInputPartition`.

Restarts and determinism: Python sources cannot persist their initial offsets next to the
checkpoint (Spark's Kafka source writes ``sources/0/0``), and Spark calls ``initialOffset()``
again when it replays an uncommitted batch 0. So ``initialOffset`` must be deterministic:
``earliest`` / specific offsets / timestamps resolve to concrete offsets (stable unless retention
deletes data), while ``latest`` (and ``-1`` in JSON) stays the *marker* ``-1``. The marker is
resolved to the end offset of the batch it starts, so batch 0 of a ``latest`` query is an empty
batch from the marker to the latest offsets seen by the first trigger, and replaying it gives the
same (empty) result. Later batches start from concrete offsets stored in Spark's offset log.

``commit`` is a no-op: like Spark's Kafka source, nothing is committed to Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.batch_reader import read_config_for
from spark_kafkalite.datasource.errors import (
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE,
    INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE,
    DataLossError,
    KafkaLiteSourceError,
)
from spark_kafkalite.datasource.offset_range_calculator import OffsetRange, rate_limit, split_ranges
from spark_kafkalite.datasource.offset_reader import KafkaOffsetReader
from spark_kafkalite.datasource.offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsetMap,
    format_partitions,
    from_offset_dict,
    to_offset_dict,
)
from spark_kafkalite.datasource.options import SourceOptions
from spark_kafkalite.datasource.partition_reader import KafkaInputPartition, read_offset_range

__all__ = ["KafkaLiteStreamReader", "compute_end_offsets", "plan_stream_ranges"]

log = logging.getLogger(__name__)


def compute_end_offsets(
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    max_rows: int | None,
    earliest_of_new: Mapping[TopicPartition, int] | None = None,
) -> PartitionOffsetMap:
    """End offsets of the next micro-batch (pure).

    ``start`` may hold the ``-1`` (latest) marker: such a partition starts at its latest offset,
    so it contributes nothing to this batch. Partitions only in ``latest`` are new and start at
    ``earliest_of_new``; partitions only in ``start`` are gone and are left out. ``max_rows``
    (``maxOffsetsPerTrigger``) caps the total, shared by backlog (:func:`rate_limit`).
    """
    begin = {tp: (latest[tp] if off == LATEST else off) for tp, off in start.items() if tp in latest}
    if max_rows is None:
        return dict(latest)
    return rate_limit(max_rows, begin, latest, earliest_of_new)


def plan_stream_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest: Callable[[list[TopicPartition]], PartitionOffsetMap],
    report_data_loss: Callable[[str], None],
    current_partitions: Callable[[], set[TopicPartition]] | None = None,
) -> list[OffsetRange]:
    """Offset ranges of a micro-batch from ``start`` to ``end`` (Spark's
    ``getOffsetRangesFromResolvedOffsets``), ordered by topic-partition.

    ``-1`` markers in ``start`` resolve to ``end`` (an empty range), ``-2`` to earliest. New
    partitions start at earliest and must start at offset 0; gone partitions and offsets that
    went backwards are data loss (``report_data_loss`` raises or warns per ``failOnDataLoss``).

    A partition in ``start`` but not in ``end`` that ``current_partitions()`` (the partitions
    that exist now) still lists is not gone: Spark re-evaluates ``initialOffset`` when it replays
    an uncommitted batch 0, so partitions added since the batch was planned show up only in
    ``start``. Nothing is planned for it here; later batches pick it up as a new partition.
    Without ``current_partitions`` every such partition counts as gone.
    """
    to_fetch = [tp for tp, off in start.items() if off == EARLIEST and tp in end]
    new_partitions = sorted(set(end) - set(start))
    fetched = earliest(to_fetch + new_partitions) if (to_fetch or new_partitions) else {}
    missing_new = [tp for tp in new_partitions if tp not in fetched]
    if missing_new:
        report_data_loss(
            f"Cannot find earliest offsets of {format_partitions(missing_new)}. Some data may have been missed"
        )
    for tp in new_partitions:
        if tp in fetched and fetched[tp] != 0:
            report_data_loss(
                f"Added partition {tp.topic}-{tp.partition} starts from {fetched[tp]} instead of 0. "
                "Some data may have been missed"
            )
    gone = set(start) - set(end)
    if gone and current_partitions is not None:
        gone -= current_partitions()
    if gone:
        report_data_loss(f"{format_partitions(gone)} are gone. Some data may have been missed")
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        until = end[tp]
        if tp in start:
            from_offset = start[tp]
            if from_offset == LATEST:
                from_offset = until
            elif from_offset == EARLIEST:
                if tp not in fetched:
                    continue
                from_offset = fetched[tp]
        elif tp in fetched:
            from_offset = fetched[tp]
        else:
            continue
        if until < from_offset:
            report_data_loss(
                f"Partition {tp.topic}-{tp.partition}'s offset was changed from {from_offset} to {until}, "
                "some data may have been missed"
            )
            continue
        ranges.append(OffsetRange(tp.topic, tp.partition, from_offset, until))
    return ranges


class KafkaLiteStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with admission control (``maxOffsetsPerTrigger``) and
    ``Trigger.AvailableNow``. ``__init__`` does no I/O; the driver-side consumer is created on
    first use and dropped when pickled."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.read_config = read_config_for(options)
        self._offset_reader: KafkaOffsetReader | None = None
        self._latest: PartitionOffsetMap | None = None
        self._last_end: PartitionOffsetMap | None = None
        self._available_now = False
        self._available_now_latest: PartitionOffsetMap | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_offset_reader"] = None
        return state

    @property
    def offset_reader(self) -> KafkaOffsetReader:
        if self._offset_reader is None:
            opts = self.options
            self._offset_reader = KafkaOffsetReader(
                opts.strategy,
                opts.client_config,
                num_retries=opts.fetch_offset_num_retries,
                retry_interval_ms=opts.fetch_offset_retry_interval_ms,
            )
        return self._offset_reader

    def _report_data_loss(self, message: str) -> None:
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{message}. {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
        log.warning("%s. %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)

    # -- offsets -----------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        """Starting offsets of a new query (deterministic; ``latest`` stays the ``-1`` marker).

        Raises:
            TopicNotFoundError: a subscribed / assigned topic does not exist.
            OffsetsMismatchError: ``startingOffsets`` JSON does not name every assigned partition.
        """
        tps = self.offset_reader.topic_partitions()
        offsets = self.offset_reader.resolve(
            self.options.starting, tps, is_starting=True, keep_latest_markers=True
        )
        log.info("kafkalite initial offsets: %s", to_offset_dict(offsets))
        return to_offset_dict(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when set, else ``ReadAllAvailable()``."""
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def _current_partitions(self) -> set[TopicPartition]:
        # A topic that vanished mid-query is left out here; partitions() then reports the loss
        # per failOnDataLoss, as Spark does.
        return self.offset_reader.topic_partitions(missing_ok=True)

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """End offset of the next micro-batch: the latest offsets, capped by ``limit``.

        ``ReadMaxRows`` shares the cap across partitions by backlog; ``ReadAllAvailable`` (e.g.
        ``Trigger.Once``) or ``None`` (pyspark < 4.2) reads everything. Under
        ``Trigger.AvailableNow`` the latest offsets are fetched once, at the first call.
        """
        if start is None:
            start_map = (
                self._last_end if self._last_end is not None else from_offset_dict(self.initialOffset())
            )
        else:
            start_map = from_offset_dict(start)
        known = {tp: off for tp, off in start_map.items() if off >= 0}
        if self._available_now:
            if self._available_now_latest is None:
                tps = self._current_partitions()
                self._available_now_latest = self.offset_reader.latest_offsets(tps, known=known)
            latest = self._available_now_latest
        else:
            tps = self._current_partitions()
            latest = self.offset_reader.latest_offsets(tps, known=known)
        self._latest = dict(latest)
        if limit is None and start is None:
            limit = self.getDefaultReadLimit()
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        new_partitions = [tp for tp in latest if tp not in start_map]
        earliest_of_new = (
            self.offset_reader.earliest_offsets(new_partitions) if new_partitions and max_rows else {}
        )
        end = compute_end_offsets(start_map, latest, max_rows, earliest_of_new)
        self._last_end = end
        return to_offset_dict(end)

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets seen by the last ``latestOffset`` call (progress ``latestOffset``)."""
        return to_offset_dict(self._latest) if self._latest else None

    def prepareForTriggerAvailableNow(self) -> None:
        """Read up to the latest offsets as of the first batch, in several batches if
        ``maxOffsetsPerTrigger`` is set, then stop."""
        self._available_now = True
        self._available_now_latest = None

    # -- planning and reading ----------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """One input partition per non-empty range between ``start`` and ``end`` (driver)."""
        start_map, end_map = from_offset_dict(start), from_offset_dict(end)
        self._last_end = end_map
        if start_map == end_map:
            return []
        if self._available_now_latest is not None:
            self._verify_available_now_end(end_map)
        ranges = plan_stream_ranges(
            start_map, end_map, self.offset_reader.earliest_offsets, self._report_data_loss,
            current_partitions=self._current_partitions,
        )
        planned = split_ranges(
            ranges,
            min_partitions=self.options.min_partitions,
            max_records_per_partition=self.options.max_records_per_partition,
        )
        return [KafkaInputPartition(r) for r in planned]

    def _verify_available_now_end(self, end: PartitionOffsetMap) -> None:
        prefetched = self._available_now_latest or {}
        beyond = {tp: off for tp, off in end.items() if off > prefetched.get(tp, off)}
        if beyond:
            raise KafkaLiteSourceError(
                "[END_OFFSET_HAS_GREATER_OFFSET_FOR_TOPIC_PARTITION_THAN_PREFETCHED] For Kafka data source with "
                "Trigger.AvailableNow, end offset should have lower or equal offset per each topic partition "
                f"than pre-fetched offset. pre-fetched offset: {to_offset_dict(prefetched)}, "
                f"end offset: {to_offset_dict(end)}."
            )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Fetch one planned range (executor)."""
        if not isinstance(partition, KafkaInputPartition):
            return iter(())
        return read_offset_range(partition.offset_range, self.read_config)

    def commit(self, end: dict) -> None:
        """No-op: offsets live in Spark's checkpoint, never in Kafka."""
        log.debug("kafkalite commit %s (no-op)", end)

    def stop(self) -> None:
        """Close the driver consumer (Spark rarely calls this; see the module docs)."""
        if self._offset_reader is not None:
            self._offset_reader.close()
