"""Offset ranges: per-trigger rate limiting and splitting into Spark input partitions.

Mirrors Spark's ``KafkaMicroBatchStream.rateLimit`` (``maxOffsetsPerTrigger``) and
``delayBatch`` (``minOffsetsPerTrigger`` / ``maxTriggerDelay``), ``KafkaOffsetRangeCalculator``
(``minPartitions``, ``maxRecordsPerPartition``), plus kafkalite's byte budget
(``maxBytesPerTrigger``, :func:`offsets_for_bytes`). Pure logic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spark_kafkalite.client.types import TopicPartition

__all__ = [
    "OffsetRange",
    "rate_limit",
    "split_ranges",
    "new_offsets_available",
    "offsets_for_bytes",
    "bytes_per_offset",
]

_MAX_LONG = 2**63 - 1


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets ``[from_offset, until_offset)`` of one topic-partition (Spark's ``KafkaOffsetRange``).

    ``size`` is an estimate of the record count: compaction and transaction markers make the real
    count smaller.
    """

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset


def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, int]:
    """End offsets that read at most about ``limit`` records in total from ``start``.

    The limit is shared across partitions in proportion to each partition's backlog
    (``latest - start``); a partition whose share is below one record still gets one (never
    starved), larger shares are rounded down, and no end passes ``latest``. Partitions in
    ``latest`` but not in ``start`` (new partitions) start from ``earliest_of_new``. When the total
    backlog is below one record, ``latest`` is returned unchanged.

    Returns:
        a new map with the same keys as ``latest``.
    """
    earliest_of_new = earliest_of_new or {}
    sizes: dict[TopicPartition, int] = {}
    begins: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is None:
            continue
        begins[tp] = begin
        if end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    result: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            result[tp] = end
            continue
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        begin = begins[tp]
        off = _MAX_LONG if share > _MAX_LONG - begin else begin + share
        result[tp] = min(end, off)
    return result


def new_offsets_available(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]) -> int:
    """Offsets between ``start`` and ``latest`` summed over ``latest``'s partitions (Spark's
    ``delayBatch`` count: a partition missing from ``start`` counts from 0, a ``-1`` marker
    counts nothing, a ``-2`` marker counts from 0)."""
    total = 0
    for tp, end in latest.items():
        begin = start.get(tp, 0)
        if begin == -1:
            continue
        total += max(end - max(begin, 0), 0)
    return total


def bytes_per_offset(
    size_bytes: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    replicas: Mapping[TopicPartition, int] | None = None,
) -> dict[TopicPartition, float]:
    """Average bytes of one offset per partition: the partition's on-disk size (one replica)
    divided by its offset span ``latest - earliest``. Partitions with no size or an empty span
    are left out (callers fall back to the mean of the others)."""
    replicas = replicas or {}
    result: dict[TopicPartition, float] = {}
    for tp, size in size_bytes.items():
        span = latest.get(tp, 0) - earliest.get(tp, 0)
        if size > 0 and span > 0:
            result[tp] = size / max(replicas.get(tp, 1), 1) / span
    return result


def offsets_for_bytes(
    max_bytes: int,
    begin: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    per_offset: Mapping[TopicPartition, float],
) -> int | None:
    """Translate a byte budget into a total offset budget for :func:`rate_limit`.

    With the budget shared in proportion to each partition's backlog *bytes*, a partition gets
    ``max_bytes * backlog_offsets / total_backlog_bytes`` offsets, i.e. :func:`rate_limit` with
    ``limit = max_bytes * total_backlog_offsets / total_backlog_bytes``. Partitions without an
    estimate use the mean of the others. Returns None when nothing can be estimated (no limit),
    otherwise at least 1.
    """
    if not per_offset:
        return None
    mean = sum(per_offset.values()) / len(per_offset)
    total_offsets = 0
    total_bytes = 0.0
    for tp, end in latest.items():
        start = begin.get(tp)
        if start is None or start < 0 or end <= start:
            continue
        total_offsets += end - start
        total_bytes += (end - start) * per_offset.get(tp, mean)
    if total_offsets == 0 or total_bytes <= 0:
        return None
    return max(int(max_bytes * total_offsets / total_bytes), 1)


def _round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


def _part_count(size: int, total: int, min_parts: int) -> int:
    return max(_round_half_up(size / total * min_parts), 1)


def _divide(parts: int, rng: OffsetRange) -> list[OffsetRange]:
    part_size = rng.size / parts
    out: list[OffsetRange] = []
    for part in range(parts):
        start = rng.from_offset + int(part_size * part)
        end = rng.until_offset if part == parts - 1 else rng.from_offset + int(part_size * (part + 1))
        out.append(OffsetRange(rng.topic, rng.partition, start, end))
    return [r for r in out if r.size > 0]


def split_ranges(
    ranges: Sequence[OffsetRange],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Drop empty ranges and split large ones (Spark's ``KafkaOffsetRangeCalculator.getRanges``).

    - ``max_records_per_partition``: a range larger than the limit becomes ``ceil(size / limit)``
      nearly equal pieces (the last absorbs the remainder).
    - ``min_partitions``: when there are fewer non-empty ranges than this, ranges whose
      proportional share ``round(size / total * min_partitions)`` is 1 stay whole; the others share
      the remaining ``min_partitions - #whole`` parts in proportion to their size.

    Ranges keep their input order; pieces of one range are consecutive and ordered.
    """
    result = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        limited: list[OffsetRange] = []
        for rng in result:
            if rng.size > max_records_per_partition:
                limited.extend(_divide(math.ceil(rng.size / max_records_per_partition), rng))
            else:
                limited.append(rng)
        result = limited
    if min_partitions is not None and len(result) < min_partitions:
        total = sum(r.size for r in result)
        whole = [r for r in result if _part_count(r.size, total, min_partitions) == 1]
        whole_ids = {id(r) for r in whole}
        split_total = total - sum(r.size for r in whole)
        split_min = max(min_partitions - len(whole), 1)
        divided: list[OffsetRange] = []
        for rng in result:
            if id(rng) in whole_ids or split_total <= 0:
                divided.append(rng)
                continue
            parts = _part_count(rng.size, split_total, split_min)
            divided.extend(_divide(parts, rng) if parts > 1 else [rng])
        result = divided
    return result
