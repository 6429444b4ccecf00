"""The log of one partition: a directory ``<topic>-<partition>/`` of segments (Kafka's
``UnifiedLog`` + ``LocalLog`` + ``LogLoader``).

Offsets: ``log_start_offset`` (first offset served) <= ``high_watermark`` (last committed
offset + 1; set by the broker) <= ``log_end_offset`` (offset the next batch gets).
``recovery_point`` is the offset below which data is known to be flushed; after an unclean
shutdown everything from the segment containing it onwards is re-validated.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spark_kafkalite.protocol.errors import (
    InconsistentTopicIdError,
    InvalidRecordError,
    OffsetOutOfRangeError,
)
from spark_kafkalite.protocol.record_batch import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    assign_offsets,
    decode_batch,
    read_header,
    validate_batch,
)

from .log_config import LogConfig
from .log_segment import INDEX_SUFFIX, LOG_SUFFIX, LogSegment
from .partition_metadata import (
    PARTITION_METADATA_FILE,
    format_topic_id,
    parse_topic_id,
    parse_topic_partition_dir,
    read_partition_metadata,
    topic_partition_dir_name,
    write_partition_metadata,
)

__all__ = [
    "UnifiedLog",
    "LogAppendInfo",
    "FetchDataInfo",
    "PARTITION_METADATA_FILE",
    "parse_topic_partition_dir",
    "topic_partition_dir_name",
    "format_topic_id",
    "parse_topic_id",
]

logger = logging.getLogger(__name__)

@dataclass(slots=True)
class LogAppendInfo:
    """Outcome of an append (Kafka's ``LogAppendInfo``).

    Attributes:
        first_offset / last_offset: offsets of the first and last record appended.
        max_timestamp_ms: largest batch max_timestamp appended.
        log_append_time_ms: the broker time stamped into LogAppendTime batches, else -1.
        valid_bytes: bytes appended.
        records_count: records appended.
        log_start_offset: the log start offset after the append (ProduceResponse v5+).
    """

    first_offset: int
    last_offset: int
    max_timestamp_ms: int
    log_append_time_ms: int = -1
    valid_bytes: int = 0
    records_count: int = 0
    log_start_offset: int = 0


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """Result of ``UnifiedLog.read``: whole RecordBatch v2 bytes (possibly from several segments)
    and the base offset of the first batch (-1 when ``records`` is empty). The first batch may
    start before the fetch offset; clients skip records below it."""

    records: bytes
    first_batch_offset: int = -1


class UnifiedLog:
    """One partition's log. Single-threaded (one asyncio loop); calls never await.

    Construct with ``UnifiedLog.open(...)`` (loads or creates the directory).

    Attributes:
        dir: the partition directory. topic / partition: parsed from its name.
        topic_id: from ``partition.metadata`` (None if absent).
        config: the ``LogConfig`` (replaceable, e.g. after a topic config change).
        log_start_offset, log_end_offset, high_watermark, recovery_point: offsets (ints).
        segments: the ``LogSegment`` list, ascending base offsets; the last is active.
        recovered_segments: how many segments ``recover()`` scanned while loading.
    """

    def __init__(
        self,
        dir: Path,
        config: LogConfig,
        *,
        topic_id: uuid.UUID | None = None,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = True,
    ) -> None:
        self.dir = Path(dir)
        parsed = parse_topic_partition_dir(self.dir.name)
        if parsed is None:
            raise ValueError(f"not a partition directory name: {self.dir.name!r}")
        self.topic, self.partition = parsed
        self.config = config
        self.segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        self.recovered_segments = 0
        self._closed = False
        self.dir.mkdir(parents=True, exist_ok=True)
        self.topic_id = self._load_or_write_topic_id(topic_id)
        self._load_segments(recovery_point, log_start_offset, had_clean_shutdown)
        self.high_watermark = self.log_start_offset
        self.update_high_watermark(self.log_start_offset if high_watermark is None else high_watermark)

    @classmethod
    def open(
        cls,
        dir: Path,
        config: LogConfig,
        *,
        topic_id: uuid.UUID | None = None,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        had_clean_shutdown: bool = True,
    ) -> UnifiedLog:
        """Load (or create) the log in ``dir``. Without ``had_clean_shutdown`` the segments from
        the one containing ``recovery_point`` onwards are validated batch by batch; the log is
        truncated at the first invalid or partial batch and later segments are deleted
        (Kafka's ``LogLoader.recoverLog``).

        Raises:
            ValueError: ``dir`` is not named ``<topic>-<partition>``.
            InconsistentTopicIdError: ``topic_id`` conflicts with ``partition.metadata``.
        """
        return cls(
            dir,
            config,
            topic_id=topic_id,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            high_watermark=high_watermark,
            had_clean_shutdown=had_clean_shutdown,
        )

    # -- loading ---------------------------------------------------------------------------

    def _load_or_write_topic_id(self, topic_id: uuid.UUID | None) -> uuid.UUID | None:
        stored = read_partition_metadata(self.dir)
        if stored is not None and topic_id is not None and stored != topic_id:
            raise InconsistentTopicIdError(
                f"log {self.dir} belongs to topic id {stored}, not {topic_id} (stale partition directory)"
            )
        if stored is None and topic_id is not None:
            write_partition_metadata(self.dir, topic_id)
            stored = topic_id
        return stored

    def _load_segments(self, recovery_point: int, log_start_offset: int | None, clean: bool) -> None:
        bases: set[int] = set()
        for entry in os.scandir(self.dir):
            name = entry.name
            if name.endswith(".tmp") or name.endswith(".deleted"):
                os.unlink(entry.path)
                continue
            stem, _, suffix = name.partition(".")
            if len(stem) != 20 or not stem.isdigit():
                continue
            if "." + suffix == LOG_SUFFIX:
                bases.add(int(stem))
        for entry in os.scandir(self.dir):  # orphan indexes (no .log) go
            stem, _, suffix = entry.name.partition(".")
            if "." + suffix == INDEX_SUFFIX and stem.isdigit() and int(stem) not in bases:
                os.unlink(entry.path)
        for base in sorted(bases):
            self._add_segment(LogSegment.open(self.dir, base, self.config))

        if self.segments:
            if clean:
                last = self.segments[-1]
                if last.has_partial_tail:
                    logger.warning("%s: partial batch after a clean shutdown, recovering", last.log_path)
                    self._recover_from(len(self.segments) - 1)
            else:
                start = max(0, bisect_right(self._base_offsets, recovery_point) - 1)
                self._recover_from(start)
        if not self.segments:
            base = log_start_offset if log_start_offset is not None else 0
            self._add_segment(LogSegment.open(self.dir, base, self.config))

        self.log_end_offset = self.segments[-1].next_offset
        first_base = self.segments[0].base_offset
        lso = first_base if log_start_offset is None else max(first_base, log_start_offset)
        self.log_start_offset = min(lso, self.log_end_offset)
        self.recovery_point = self.log_end_offset if clean or self.recovered_segments else min(
            recovery_point, self.log_end_offset
        )
        logger.info(
            "loaded log %s: %d segment(s), log_start_offset=%d log_end_offset=%d (%s)",
            self.dir.name, len(self.segments), self.log_start_offset, self.log_end_offset,
            "clean" if clean else f"recovered {self.recovered_segments} segment(s)",
        )

    def _recover_from(self, start: int) -> None:
        i = start
        while i < len(self.segments):
            seg = self.segments[i]
            truncated = seg.recover()
            self.recovered_segments += 1
            if truncated:
                logger.warning("%s: recovery truncated %d bytes", seg.log_path, truncated)
                self._delete_segments_from(i + 1)
                break
            i += 1

    def _add_segment(self, seg: LogSegment) -> None:
        self.segments.append(seg)
        self._base_offsets.append(seg.base_offset)

    def _delete_segments_from(self, i: int) -> None:
        for seg in self.segments[i:]:
            logger.warning("%s: deleting segment %s", self.dir.name, seg.log_path.name)
            seg.delete()
        del self.segments[i:]
        del self._base_offsets[i:]

    # -- properties ------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        """Bytes of ``.log`` data across segments."""
        return sum(seg.size_bytes for seg in self.segments)

    def set_topic_id(self, topic_id: uuid.UUID) -> None:
        """Record ``topic_id`` in ``partition.metadata`` if none is stored yet.

        Raises:
            InconsistentTopicIdError: a different topic id is stored.
        """
        self.topic_id = self._load_or_write_topic_id(topic_id)

    def update_high_watermark(self, offset: int) -> int:
        """Set ``high_watermark`` to ``offset`` clamped to [log_start_offset, log_end_offset];
        returns the new value."""
        self.high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))
        return self.high_watermark

    # -- append ----------------------------------------------------------------------------

    def append_as_leader(self, batch: bytearray, leader_epoch: int) -> LogAppendInfo:
        """Append ONE already-validated RecordBatch v2: patch its base offset (= log_end_offset)
        and partition leader epoch in place, write it, and advance ``log_end_offset``.

        The size limit (``max.message.bytes``) and CRC are the caller's to check (Kafka's
        ``LogValidator``). Rolls a new segment first when the batch would overflow the active one.
        """
        header = read_header(batch)
        first = self.log_end_offset
        last = first + header.last_offset_delta
        assign_offsets(batch, first, leader_epoch)
        seg = self._maybe_roll(len(batch), first, last)
        seg.append(batch, first, last, header.max_timestamp)
        self.log_end_offset = last + 1
        self._maybe_flush()
        return LogAppendInfo(
            first_offset=first,
            last_offset=last,
            max_timestamp_ms=header.max_timestamp,
            log_append_time_ms=header.max_timestamp if header.timestamp_type == 1 else -1,
            valid_bytes=len(batch),
            records_count=header.records_count,
            log_start_offset=self.log_start_offset,
        )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo | None:
        """Append batches that already carry offsets (from a leader's fetch response). Each
        complete batch is validated; a partial trailing batch is ignored. Offsets must be
        >= log_end_offset and increasing (gaps are allowed, as after compaction).

        Returns: None if ``records`` holds no complete batch.

        Raises:
            CorruptRecordError / InvalidRecordError: an invalid batch (nothing is appended).
            InvalidRecordError: offsets below log_end_offset or out of order.
        """
        batches: list[tuple[int, BatchHeader]] = []
        total = len(records)
        pos = 0
        next_offset = self.log_end_offset
        while total - pos >= RECORD_BATCH_OVERHEAD:
            size = read_header(records, pos).size_bytes
            if size < RECORD_BATCH_OVERHEAD or pos + size > total:
                break
            header = validate_batch(records, pos)
            if header.base_offset < next_offset:
                raise InvalidRecordError(
                    f"{self.dir.name}: follower append at offset {header.base_offset} "
                    f"but expected >= {next_offset}"
                )
            next_offset = header.next_offset
            batches.append((pos, header))
            pos += size
        if not batches:
            return None
        view = memoryview(records)
        segment_bytes = self.config.segment_bytes
        i = 0
        while i < len(batches):
            p0, h0 = batches[i]
            seg = self._maybe_roll(h0.size_bytes, h0.base_offset, h0.last_offset)
            run = h0.size_bytes
            j = i + 1
            while j < len(batches):
                hj = batches[j][1]
                if seg.size_bytes + run + hj.size_bytes > segment_bytes or not seg.index.can_append(hj.last_offset):
                    break
                run += hj.size_bytes
                j += 1
            group = batches[i:j]
            seg.append(
                view[p0 : p0 + run],
                h0.base_offset,
                group[-1][1].last_offset,
                max(h.max_timestamp for _, h in group),
                batches=[(p - p0, h) for p, h in group],
            )
            i = j
        self.log_end_offset = batches[-1][1].next_offset
        self._maybe_flush()
        return LogAppendInfo(
            first_offset=batches[0][1].base_offset,
            last_offset=batches[-1][1].last_offset,
            max_timestamp_ms=max(h.max_timestamp for _, h in batches),
            valid_bytes=pos,
            records_count=sum(h.records_count for _, h in batches),
            log_start_offset=self.log_start_offset,
        )

    def _maybe_roll(self, size_bytes: int, first_offset: int, last_offset: int) -> LogSegment:
        seg = self.segments[-1]
        if seg.can_append(size_bytes, last_offset, self.config.segment_bytes) and first_offset >= seg.base_offset:
            return seg
        return self.roll(first_offset)

    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``new_base_offset`` (default log_end_offset). An empty
        active segment is replaced rather than kept. No fsync here (Kafka flushes rolled
        segments asynchronously; we rely on the OS page cache and the recovery scan)."""
        base = self.log_end_offset if new_base_offset is None else new_base_offset
        active = self.segments[-1]
        if active.size_bytes == 0:
            if active.base_offset == base:
                return active
            self._delete_segments_from(len(self.segments) - 1)
        else:
            active.index.close()  # rolled segments are read-only: release the index handle
        seg = LogSegment.open(self.dir, base, self.config)
        self._add_segment(seg)
        logger.debug("%s: rolled new segment at offset %d", self.dir.name, base)
        return seg

    def _maybe_flush(self) -> None:
        interval = self.config.flush_interval_messages
        if interval is not None and self.log_end_offset - self.recovery_point >= interval:
            self.flush()

    # -- read ------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the one containing ``fetch_offset``, at most ``max_bytes`` (except
        that with ``min_one_message`` the first batch is always whole, KIP-74), never a batch whose
        base offset is >= ``max_offset`` (the high watermark for consumers). Continues into the
        next segments while room remains. One ``pread`` per segment in the common case.

        Raises:
            OffsetOutOfRangeError: ``fetch_offset`` < log_start_offset or > log_end_offset.
        """
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self.dir.name}: fetch offset {fetch_offset} is outside "
                f"[{self.log_start_offset}, {self.log_end_offset}]"
            )
        limit = self.log_end_offset if max_offset is None else min(max_offset, self.log_end_offset)
        if fetch_offset >= limit:
            return FetchDataInfo(b"")
        i = max(0, bisect_right(self._base_offsets, fetch_offset) - 1)
        pieces: list[bytes] = []
        first_batch_offset = -1
        remaining = max_bytes
        offset = fetch_offset
        while i < len(self.segments):
            seg = self.segments[i]
            if seg.base_offset >= limit:
                break
            res = seg.read(offset, remaining, None, min_one_message and not pieces, limit)
            i += 1
            if res is None:
                continue
            if not res.records:
                break
            pieces.append(res.records)
            if first_batch_offset < 0:
                first_batch_offset = res.first_offset
            remaining -= len(res.records)
            offset = res.next_offset
            if res.end_position < seg.size_bytes or remaining < RECORD_BATCH_OVERHEAD:
                break
        if not pieces:
            return FetchDataInfo(b"")
        return FetchDataInfo(pieces[0] if len(pieces) == 1 else b"".join(pieces), first_batch_offset)

    def fetch_offset_by_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record at or after log_start_offset whose
        timestamp is >= ``timestamp_ms``, or None (Kafka's ``fetchOffsetByTimestamp`` for a
        non-negative target). Skips segments and batches by max_timestamp and decodes only the
        batch that straddles the target."""
        for i, seg in enumerate(self.segments):
            if i + 1 < len(self.segments) and self._base_offsets[i + 1] <= self.log_start_offset:
                continue
            if seg.max_timestamp_ms < timestamp_ms:
                continue
            for pos, header in seg.iter_batches():
                if header.last_offset < self.log_start_offset or header.max_timestamp < timestamp_ms:
                    continue
                found = self._first_record_at_or_after(seg, pos, header, lambda ts: ts >= timestamp_ms)
                if found is not None:
                    return found
        return None

    def latest_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record with the largest timestamp (ListOffsets
        MAX_TIMESTAMP, KIP-734), or None for an empty log."""
        best: tuple[int, LogSegment, int, BatchHeader] | None = None
        for seg in self.segments:
            if best is not None and seg.max_timestamp_ms <= best[0]:
                continue
            for pos, header in seg.iter_batches():
                if header.last_offset < self.log_start_offset:
                    continue
                if best is None or header.max_timestamp > best[0]:
                    best = (header.max_timestamp, seg, pos, header)
        if best is None:
            return None
        max_ts, seg, pos, header = best
        return self._first_record_at_or_after(seg, pos, header, lambda ts: ts >= max_ts)

    def _first_record_at_or_after(
        self, seg: LogSegment, pos: int, header: BatchHeader, pred: Callable[[int], bool]
    ) -> tuple[int, int] | None:
        decoded = decode_batch(seg.read_bytes(pos, header.size_bytes))
        for offset, ts in zip(decoded.offsets, decoded.timestamps_ms, strict=True):
            if offset >= self.log_start_offset and pred(ts):
                return offset, ts
        return None

    # -- truncation ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at offsets >= ``offset`` (a follower diverging from its leader).
        A batch containing ``offset`` is removed whole. Returns False if nothing changed."""
        if offset >= self.log_end_offset:
            return False
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        i = bisect_right(self._base_offsets, offset - 1)  # first segment with base >= offset
        i = max(i, 1)  # keep at least the first segment (its base is <= offset here)
        self._delete_segments_from(i)
        active = self.segments[-1]
        active.truncate_to(offset)
        self.log_end_offset = active.next_offset
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.update_high_watermark(self.high_watermark)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data and restart the log empty at ``offset`` (all offsets become ``offset``)."""
        self._delete_segments_from(0)
        self._add_segment(LogSegment.open(self.dir, offset, self.config))
        self.log_start_offset = self.log_end_offset = self.recovery_point = offset
        self.high_watermark = offset

    # -- lifecycle -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment holding offsets >= recovery_point; recovery_point becomes
        log_end_offset."""
        start = max(0, bisect_right(self._base_offsets, self.recovery_point) - 1)
        for seg in self.segments[start:]:
            seg.flush()
        self.recovery_point = self.log_end_offset

    def close(self) -> None:
        """Close all files (no flush; call ``flush`` first for durability)."""
        if self._closed:
            return
        for seg in self.segments:
            seg.close()
        self._closed = True

    def delete(self) -> None:
        """Close the log and remove its directory."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"UnifiedLog({self.dir.name}, log_start_offset={self.log_start_offset}, "
            f"high_watermark={self.high_watermark}, log_end_offset={self.log_end_offset}, "
            f"segments={len(self.segments)})"
        )
