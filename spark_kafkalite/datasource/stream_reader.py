"""Streaming read (``spark.readStream.format("kafkalite")``): Spark's ``KafkaMicroBatchStream``.

Offsets are ``{"topic": {"partition": next_offset}}`` dicts, always canonical (sorted topics,
numerically sorted string partition keys) because Spark compares them as JSON strings.

Which process calls what (pyspark >= 4.2: ``python_streaming_source_runner.py`` and
``plan_data_source_read.py`` in pyspark's ``sql/streaming`` and ``sql/worker`` packages; see also
docs/architecture.md):
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

Admission control (Spark's ``KafkaMicroBatchStream.latestOffset``): the default read limit is
``ReadMaxRows(maxOffsetsPerTrigger)``, else ``ReadMaxBytes(maxBytesPerTrigger)``, else
``ReadMinRows(minOffsetsPerTrigger)``, else ``ReadAllAvailable``. The Python API has no composite
limit and no ``maxTriggerDelay`` in ``ReadMinRows``, so every configured limit is applied here
from the options whenever Spark passes anything but ``ReadAllAvailable`` (``Trigger.Once`` passes
``ReadAllAvailable``, which reads everything, as in Spark):

- ``minOffsetsPerTrigger`` / ``maxTriggerDelay``: while fewer new offsets than the minimum are
  available and less than ``maxTriggerDelay`` has passed since the last batch, ``latestOffset``
  returns ``start`` (no batch). The first trigger of a run always proceeds, as in Spark. Ignored
  under ``Trigger.AvailableNow`` (whose target is fixed; waiting could never end).
- ``maxOffsetsPerTrigger``: a cap on the total, shared across partitions by backlog.
- ``maxBytesPerTrigger`` (kafkalite only): a byte budget turned into an offset cap with the
  average bytes per offset of each partition (on-disk log size / offset span, from
  DescribeLogDirs, refreshed every 30 s). It is an estimate: batch overhead, compression and
  compaction make real record sizes differ. With both caps the smaller wins.

``commit`` does nothing in Kafka unless ``commitOffsetsToGroup=true`` (kafkalite only; see
:mod:`.group_commit`): Spark's Kafka source never commits offsets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
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
from spark_kafkalite.datasource.group_commit import GroupOffsetCommitter
from spark_kafkalite.datasource.offset_range_calculator import (
    bytes_per_offset,
    new_offsets_available,
    offsets_for_bytes,
    split_ranges,
)
from spark_kafkalite.datasource.offset_reader import KafkaOffsetReader
from spark_kafkalite.datasource.offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsetMap,
    from_offset_dict,
    to_offset_dict,
)
from spark_kafkalite.datasource.options import SourceOptions
from spark_kafkalite.datasource.partition_reader import KafkaInputPartition, read_offset_range
from spark_kafkalite.datasource.phase_timing import phase, timed_iterator
from spark_kafkalite.datasource.progress import lag_metrics
from spark_kafkalite.datasource.stream_planning import compute_end_offsets, plan_stream_ranges
from spark_kafkalite.datasource.worker_heap import freeze_imported_heap

__all__ = ["KafkaLiteStreamReader"]

log = logging.getLogger(__name__)

_SIZE_REFRESH_S = 30.0


class KafkaLiteStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with admission control (``maxOffsetsPerTrigger``,
    ``minOffsetsPerTrigger``/``maxTriggerDelay``, ``maxBytesPerTrigger``) and
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
        self._last_trigger_ms = 0
        self._bytes_per_offset: dict[TopicPartition, float] = {}
        self._sizes_fetched_at = float("-inf")
        self._group_committer = (
            GroupOffsetCommitter(options.group_id, options.client_config)
            if options.commit_offsets_to_group and options.group_id
            else None
        )

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
        """``ReadMaxRows(maxOffsetsPerTrigger)``, else ``ReadMaxBytes(maxBytesPerTrigger)``, else
        ``ReadMinRows(minOffsetsPerTrigger)``, else ``ReadAllAvailable()`` (the other configured
        limits are applied from the options, see the module docs)."""
        opts = self.options
        if opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(opts.max_offsets_per_trigger)
        if opts.max_bytes_per_trigger is not None:
            return ReadMaxBytes(opts.max_bytes_per_trigger)
        if opts.min_offsets_per_trigger is not None:
            return ReadMinRows(opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _current_partitions(self) -> set[TopicPartition]:
        # A topic that vanished mid-query is left out here; partitions() then reports the loss
        # per failOnDataLoss, as Spark does.
        return self.offset_reader.topic_partitions(missing_ok=True)

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """End offset of the next micro-batch: the latest offsets, capped by the read limits.

        ``ReadAllAvailable`` (e.g. ``Trigger.Once``) reads everything; any other limit applies
        every configured option (module docs). ``start`` None means pyspark < 4.2 (no admission
        control): the configured limits apply from the options and the start is the previous end.
        Under ``Trigger.AvailableNow`` the latest offsets are fetched once, at the first call.
        """
        if start is None:
            start_map = (
                self._last_end if self._last_end is not None else from_offset_dict(self.initialOffset())
            )
        else:
            start_map = from_offset_dict(start)
            # Spark plans the next batch only after the previous one (ending at ``start``) is done.
            self._commit_to_group(start_map)
        known = {tp: off for tp, off in start_map.items() if off >= 0}
        if self._available_now:
            if self._available_now_latest is None:
                tps = self._current_partitions()
                self._available_now_latest = self.offset_reader.latest_offsets(tps, known=known)
            latest = self._available_now_latest
        else:
            with phase("driver.latestOffset.metadata"):
                tps = self._current_partitions()
            with phase("driver.latestOffset.listOffsets"):
                latest = self.offset_reader.latest_offsets(tps, known=known)
        self._latest = dict(latest)
        if limit is None and start is None:
            limit = self.getDefaultReadLimit()
        end = self._admit(start_map, latest, limit)
        self._last_end = end
        self._log_lag(end, latest)
        return to_offset_dict(end)

    def _admit(
        self, start_map: PartitionOffsetMap, latest: PartitionOffsetMap, limit: ReadLimit | None
    ) -> PartitionOffsetMap:
        """Apply the read limits (Spark's ``latestOffset``: ``ReadAllAvailable`` wins, then the
        minimum with its delay, then the caps)."""
        opts = self.options
        if limit is None or isinstance(limit, ReadAllAvailable):
            return compute_end_offsets(start_map, latest, None)
        now_ms = int(time.time() * 1000)
        min_rows = opts.min_offsets_per_trigger
        if isinstance(limit, ReadMinRows):
            min_rows = limit.min_rows
        if min_rows is not None and not self._available_now:
            if now_ms - self._last_trigger_ms < opts.max_trigger_delay_ms:
                available = new_offsets_available(start_map, latest)
                if available < min_rows:
                    log.debug(
                        "delaying the batch: %d new offsets < minOffsetsPerTrigger %d", available, min_rows
                    )
                    return dict(start_map)
            else:
                log.debug("maxTriggerDelay passed: triggering the batch")
        self._last_trigger_ms = now_ms
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else opts.max_offsets_per_trigger
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else opts.max_bytes_per_trigger
        begin = {tp: (latest[tp] if off == LATEST else off) for tp, off in start_map.items() if tp in latest}
        new_partitions = [tp for tp in latest if tp not in start_map]
        needs_earliest = [tp for tp, off in begin.items() if off == EARLIEST] + new_partitions
        if (max_rows or max_bytes) and needs_earliest:
            begin.update(self.offset_reader.earliest_offsets(needs_earliest))
        if max_bytes is not None:
            by_bytes = offsets_for_bytes(max_bytes, begin, latest, self._per_offset_bytes(latest))
            if by_bytes is not None:
                max_rows = by_bytes if max_rows is None else min(max_rows, by_bytes)
        earliest_of_new = {tp: begin[tp] for tp in new_partitions if tp in begin}
        return compute_end_offsets(start_map, latest, max_rows, earliest_of_new)

    def _per_offset_bytes(self, latest: PartitionOffsetMap) -> dict[TopicPartition, float]:
        """Average bytes per offset of each partition (refreshed every ``_SIZE_REFRESH_S``)."""
        now = time.monotonic()
        missing = any(tp not in self._bytes_per_offset for tp in latest)
        if now - self._sizes_fetched_at >= _SIZE_REFRESH_S or (
            missing and now - self._sizes_fetched_at >= 1.0
        ):
            self._sizes_fetched_at = now
            sizes, replicas = self.offset_reader.log_sizes(latest)
            earliest = self.offset_reader.earliest_offsets(list(sizes)) if sizes else {}
            estimate = bytes_per_offset(sizes, earliest, latest, replicas)
            if estimate:
                self._bytes_per_offset = estimate
            log.debug("bytes per offset estimate: %s", self._bytes_per_offset)
        return self._bytes_per_offset

    def _log_lag(self, end: PartitionOffsetMap, latest: PartitionOffsetMap) -> None:
        if log.isEnabledFor(logging.INFO) and latest:
            metrics = lag_metrics(end, latest)
            log.info(
                "kafkalite offsets behind latest after this batch: min %d, max %d, avg %.1f",
                metrics["minOffsetsBehindLatest"],
                metrics["maxOffsetsBehindLatest"],
                metrics["avgOffsetsBehindLatest"],
            )

    def _commit_to_group(self, offsets: PartitionOffsetMap) -> None:
        if self._group_committer is not None:
            self._group_committer.commit(offsets)

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets seen by the last ``latestOffset`` call (progress ``latestOffset``;
        :func:`spark_kafkalite.datasource.progress.offsets_behind_latest` turns it into lag)."""
        return to_offset_dict(self._latest) if self._latest else None

    def prepareForTriggerAvailableNow(self) -> None:
        """Read up to the latest offsets as of the first batch, in several batches if
        ``maxOffsetsPerTrigger`` / ``maxBytesPerTrigger`` is set, then stop."""
        self._available_now = True
        self._available_now_latest = None

    # -- planning and reading ----------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """One input partition per non-empty range between ``start`` and ``end`` (driver)."""
        with phase("driver.partitions"):
            return self._partitions(start, end)

    def _partitions(self, start: dict, end: dict) -> list[InputPartition]:
        start_map, end_map = from_offset_dict(start), from_offset_dict(end)
        self._last_end = end_map
        if start_map == end_map:
            return []
        if self._available_now_latest is not None:
            self._verify_available_now_end(end_map)
        ranges = plan_stream_ranges(
            start_map,
            end_map,
            self.offset_reader.earliest_offsets,
            self._report_data_loss,
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
        freeze_imported_heap()
        if not isinstance(partition, KafkaInputPartition):
            return iter(())
        return timed_iterator("read.task", read_offset_range(partition.offset_range, self.read_config))

    def commit(self, end: dict) -> None:
        """The micro-batch ending at ``end`` is done. Offsets live in Spark's checkpoint; with
        ``commitOffsetsToGroup=true`` they are also committed to ``kafka.group.id``."""
        log.debug("kafkalite commit %s", end)
        self._commit_to_group(from_offset_dict(end))

    def stop(self) -> None:
        """Close the driver consumer (Spark rarely calls this; see the module docs)."""
        if self._offset_reader is not None:
            self._offset_reader.close()
        if self._group_committer is not None:
            self._group_committer.close()
