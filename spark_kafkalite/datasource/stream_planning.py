"""Micro-batch planning of the streaming read (pure, no pyspark): the end offsets of the next
batch (Spark's ``KafkaMicroBatchStream.latestOffset`` with ``rateLimit``) and the offset ranges
from a batch's start to its end (Spark's ``KafkaOffsetReader.getOffsetRangesFromResolvedOffsets``).

:mod:`.stream_reader` wires these to the client and to pyspark's ``DataSourceStreamReader``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.offset_range_calculator import OffsetRange, rate_limit
from spark_kafkalite.datasource.offsets import EARLIEST, LATEST, PartitionOffsetMap, format_partitions

__all__ = ["compute_end_offsets", "plan_stream_ranges"]


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
