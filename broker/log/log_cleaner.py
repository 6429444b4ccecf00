"""Log compaction (Kafka's ``LogCleaner``, ``LogCleanerManager`` and ``Cleaner``).

For logs whose ``cleanup.policy`` includes ``compact``:

1. **Choose** (on the loop thread): the *cleanable* range is the inactive segments from the one
   holding the log start offset up to the first *uncleanable* segment (the active segment, a
   segment reaching past the last stable offset - so never an open or undecided transaction -,
   or one with records younger than ``min.compaction.lag.ms``; Kafka's
   ``LogCleanerManager.cleanableOffsets``). Offsets from the *first dirty offset* (stored per partition in
   ``cleaner-offset-checkpoint`` in the log dir) onwards are dirty. The log with the largest
   dirty ratio (dirty bytes / cleanable bytes) at or above ``min.cleanable.dirty.ratio`` is
   cleaned.
2. **Clean** (in a worker thread, on file descriptors opened beforehand, so produce and fetch
   go on): map every key of the dirty range to its last offset, then copy each group of
   segments (at most ``segment.bytes`` together) into one ``<base>.log.cleaned`` segment,
   keeping a record when it has a key, no later record has the same key, and it is not a
   tombstone (null value) of a batch whose delete horizon has passed (KIP-534; Kafka's
   ``Cleaner.shouldRetainRecord``): the pass that first keeps a batch holding a tombstone
   rewrites it with a delete horizon = now + ``delete.retention.ms`` (record timestamps
   unchanged), and a pass at or past that time drops its tombstones, so a consumer has
   ``delete.retention.ms`` after the tombstone was first cleaned past to read it, whatever the
   record's own timestamp. Offsets are preserved (holes); a batch whose records all stay is
   copied byte for byte, a partly kept batch is rewritten and recompressed with its own codec
   (Kafka's ``MemoryRecords.buildRetainedRecordsInto``), at the topic's
   ``compression.<codec>.level`` when that codec is the topic's ``compression.type``, else at the
   codec's default level (:mod:`broker.log.cleaner_batches`), an empty one is dropped. Batches a
   leader appended under a codec ``compression.type`` are already in that codec.
   Transactions and producer state (KIP-98, KIP-534) follow Kafka's ``CleanedTransactionMetadata``
   and ``Cleaner.cleanInto`` (:mod:`broker.log.cleaner_transactions`): batches of aborted
   transactions are dropped and never enter the key map; a marker goes once no batch of its
   transaction is left and its delete horizon (stored in the batch by the pass that first found
   it removable, the same field as for tombstones) has passed; the ``.txnindex`` entries of the
   cleaned segments are rebuilt from the ABORT markers that still cover data; the batch holding a
   producer's last data offset (or its last marker) is kept, as a header-only batch if no record
   of it stays.
3. **Swap** (back on the loop thread): ``UnifiedLog.replace_segments`` renames the output to
   ``.swap``, deletes the old segments and drops the suffix; if the log changed meanwhile
   (retention, DeleteRecords, deletion) the output is discarded. The first dirty offset becomes
   the end of the cleaned range and is checkpointed.

A log whose planning or cleaning raises an unexpected error (a corrupt batch, a bug) is marked
*uncleanable* (Kafka's ``LogCleanerManager.markPartitionUncleanable``, per log dir): the error is
logged once, with the partition, and the log is skipped when choosing from then on, so one bad
log cannot starve the others. The mark goes when the log does: deleted, or replaced by a new log
of the same name (topic deleted and re-created; Kafka's ``maintainUncleanablePartitions``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from spark_kafkalite.protocol.control_records import control_record_type
from spark_kafkalite.protocol.record_batch import BatchHeader, decode_batch, read_header

from .checkpoints import read_offset_checkpoint, write_offset_checkpoint
from .cleaner_batches import delete_horizon_passed, empty_batch, needs_delete_horizon, rewrite_batch
from .cleaner_transactions import (
    BatchRetention,
    CleanedTransactionMetadata,
    LastRecord,
    check_batch_retention,
)
from .log_config import LONG_MAX
from .log_segment import LogSegment
from .segment_files import CLEANED_SUFFIX, counted_pread, iter_file_headers, segment_file_names
from .transaction_index import AbortedTxn

if TYPE_CHECKING:
    from .log_manager import LogManager
    from .unified_log import UnifiedLog

__all__ = ["LogCleaner", "CleaningPlan", "CleanerStats", "CLEANER_OFFSET_CHECKPOINT_FILE"]

logger = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
_INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class CleaningPlan:
    """What to clean in one log (Kafka's ``LogToClean``): ``segments`` is the cleanable range,
    ``dirty`` its suffix holding offsets >= ``first_dirty_offset``; ``aborted`` the aborted
    transactions overlapping the range; ``last_records`` the active producers (producer id ->
    last data offset and epoch, Kafka's ``UnifiedLog.lastRecordsOfActiveProducers``), taken by
    :meth:`LogCleaner.clean_once` / :meth:`LogCleaner.clean_log` once the log is chosen."""

    log: UnifiedLog
    segments: list[LogSegment]
    dirty: list[LogSegment]
    first_dirty_offset: int
    first_uncleanable_offset: int
    aborted: list[AbortedTxn] = field(default_factory=list)
    last_records: dict[int, LastRecord] = field(default_factory=dict)

    @property
    def cleanable_bytes(self) -> int:
        return sum(seg.size_bytes for seg in self.segments)

    @property
    def dirty_bytes(self) -> int:
        return sum(seg.size_bytes for seg in self.dirty)

    @property
    def dirty_ratio(self) -> float:
        total = self.cleanable_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerStats:
    """Counters of one cleaning (Kafka's ``CleanerStats``)."""

    segments_cleaned: int = 0
    records_read: int = 0
    records_retained: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    batches_rewritten: int = 0


@dataclass(slots=True)
class _Snapshot:
    """A segment as the worker sees it: its own fd and its size at planning time."""

    segment: LogSegment
    fd: int
    size: int


@dataclass(slots=True)
class _Group:
    old: list[LogSegment]
    cleaned: LogSegment | None = None
    stats: CleanerStats = field(default_factory=CleanerStats)


class LogCleaner:
    """Compacts the logs of a :class:`LogManager` whose config has ``compact``.

    Args:
        log_manager: the logs (and their log dirs, for ``cleaner-offset-checkpoint``).
        time_ms: wall clock in ms (defaults to the log manager's, injectable for tests).
    """

    def __init__(self, log_manager: LogManager, time_ms: Callable[[], int] | None = None) -> None:
        self.log_manager = log_manager
        self.time_ms = time_ms or log_manager.time_ms
        self._first_dirty: dict[tuple[str, int], int] | None = None
        self._busy = False
        #: partition -> the log that failed (a new log of the same partition is cleanable)
        self._uncleanable: dict[tuple[str, int], UnifiedLog] = {}

    # -- checkpoint ------------------------------------------------------------------------

    def _checkpoints(self) -> dict[tuple[str, int], int]:
        if self._first_dirty is None:
            self._first_dirty = {}
            for log_dir in self.log_manager.log_dirs:
                self._first_dirty.update(
                    read_offset_checkpoint(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT_FILE)
                )
        return self._first_dirty

    def _write_checkpoint(self, log_dir: Path) -> None:
        logs = self.log_manager.all_logs()
        offsets = {
            key: offset
            for key, offset in self._checkpoints().items()
            if key in logs and logs[key].dir.parent == log_dir
        }
        write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE, offsets)

    def first_dirty_offset(self, log: UnifiedLog) -> int:
        """The checkpointed first dirty offset, clamped to [log_start_offset, log_end_offset]
        (a value outside means the log was recreated or truncated: everything is dirty)."""
        stored = self._checkpoints().get((log.topic, log.partition))
        if stored is None or stored < log.log_start_offset or stored > log.log_end_offset:
            return log.log_start_offset
        return stored

    # -- uncleanable partitions ------------------------------------------------------------

    def mark_uncleanable(self, log: UnifiedLog, error: BaseException) -> None:
        """Skip ``log`` from now on after ``error`` (Kafka's ``markPartitionUncleanable``),
        logged at error level with the partition, the log dir and the traceback."""
        self._uncleanable[(log.topic, log.partition)] = log
        logger.error(
            "Unexpected exception thrown when cleaning log %s in dir %s. Marking its partition "
            "(%s-%d) as uncleanable: %s",
            log.dir.name,
            log.dir.parent,
            log.topic,
            log.partition,
            error,
            exc_info=error,
        )

    def uncleanable_counts(self) -> dict[str, int]:
        """Log dir -> partitions marked uncleanable in it (Kafka's ``LogCleanerManager``
        ``uncleanable-partitions-count`` per log directory)."""
        counts: dict[str, int] = {}
        for log in list(self._uncleanable.values()):
            log_dir = str(log.dir.parent)
            counts[log_dir] = counts.get(log_dir, 0) + 1
        return counts

    def is_uncleanable(self, log: UnifiedLog) -> bool:
        """True if cleaning this very log raised (a re-created partition starts cleanable)."""
        return self._uncleanable.get((log.topic, log.partition)) is log

    def uncleanable_partitions(self, log_dir: Path | str) -> set[tuple[str, int]]:
        """The (topic, partition) marked uncleanable in ``log_dir`` (its length is Kafka's
        ``uncleanable-partitions-count`` gauge of that dir)."""
        self._maintain_uncleanable()
        return {key for key, log in self._uncleanable.items() if log.dir.parent == Path(log_dir)}

    def _maintain_uncleanable(self) -> None:
        """Forget marks of logs that are gone or replaced (Kafka's
        ``maintainUncleanablePartitions``)."""
        logs = self.log_manager.all_logs()
        for key, log in list(self._uncleanable.items()):
            if logs.get(key) is not log:
                del self._uncleanable[key]

    # -- choosing --------------------------------------------------------------------------

    def plan(self, log: UnifiedLog) -> CleaningPlan | None:
        """The cleanable and dirty ranges of ``log``, or None if there is nothing dirty to
        clean (not compacted, only an active segment, or no dirty bytes)."""
        config = log.config
        if not config.compact:
            return None
        segments = log.segments
        lso = log.log_start_offset
        first = 0
        while first + 1 < len(segments) and segments[first + 1].base_offset <= lso:
            first += 1
        horizon_ms = self.time_ms() - config.min_compaction_lag_ms
        end = first
        while end < len(segments) - 1:
            seg, nxt = segments[end], segments[end + 1]
            if nxt.base_offset > log.last_stable_offset:
                break
            if config.min_compaction_lag_ms > 0 and seg.max_timestamp_ms > horizon_ms:
                break
            end += 1
        cleanable = segments[first:end]
        if not cleanable:
            return None
        first_uncleanable = segments[end].base_offset
        first_dirty = self.first_dirty_offset(log)
        if first_dirty >= first_uncleanable:
            return None
        dirty = [
            seg for k, seg in enumerate(cleanable, start=first) if segments[k + 1].base_offset > first_dirty
        ]
        aborted = log.collect_aborted_transactions(cleanable[0].base_offset, first_uncleanable)
        return CleaningPlan(log, list(cleanable), dirty, first_dirty, first_uncleanable, aborted)

    def filthiest(self) -> CleaningPlan | None:
        """Kafka's ``grabFilthiestCompactedLog``: the plan with the largest dirty ratio among
        compacted logs (``LogManager.compacted_logs``) at or above their
        ``min.cleanable.dirty.ratio``, skipping uncleanable logs (and marking so a log whose
        planning raises)."""
        self._maintain_uncleanable()
        best: CleaningPlan | None = None
        for log in self.log_manager.compacted_logs().values():
            if self.is_uncleanable(log):
                continue
            try:
                plan = self.plan(log)
            except Exception as exc:  # noqa: BLE001 - one bad log must not stop the others
                self.mark_uncleanable(log, exc)
                continue
            if (
                plan is None
                or plan.dirty_ratio < log.config.min_cleanable_dirty_ratio
                or not plan.dirty_bytes
            ):
                continue
            if best is None or plan.dirty_ratio > best.dirty_ratio:
                best = plan
        return best

    # -- cleaning --------------------------------------------------------------------------

    async def clean_once(self) -> CleanerStats | None:
        """Clean the filthiest log: the work runs in a thread, the swap on the calling loop.
        Returns the stats, or None when nothing needed cleaning (or a clean is running) or the
        cleaning raised (the log is then marked uncleanable, see :meth:`mark_uncleanable`)."""
        if self._busy:
            return None
        plan = self.filthiest()
        if plan is None:
            return None
        self._busy = True
        try:
            plan.last_records = _last_records(plan.log)
            snapshots = _snapshot(plan.segments)
            groups = await asyncio.to_thread(self._clean_segments, plan, snapshots, self.time_ms())
            return self._swap(plan, groups)
        except Exception as exc:  # noqa: BLE001 - Kafka's CleanerThread.tryCleanFilthiestLog
            self.mark_uncleanable(plan.log, exc)
            return None
        finally:
            self._busy = False

    def clean_log(self, log: UnifiedLog) -> CleanerStats | None:
        """Clean ``log`` now, synchronously, whatever its dirty ratio (for tools and tests).
        Returns None when there is nothing dirty."""
        plan = self.plan(log)
        if plan is None:
            return None
        plan.last_records = _last_records(log)
        groups = self._clean_segments(plan, _snapshot(plan.segments), self.time_ms())
        return self._swap(plan, groups)

    def _clean_segments(self, plan: CleaningPlan, snapshots: list[_Snapshot], now_ms: int) -> list[_Group]:
        """Worker-thread part: build the key map and write the ``.cleaned`` segments."""
        started = time.monotonic()
        groups = [_Group(old) for old in _group_segments(plan.segments, plan.log.config.segment_bytes)]
        try:
            by_segment = {id(s.segment): s for s in snapshots}
            offset_map = _build_offset_map(
                [by_segment[id(seg)] for seg in plan.dirty],
                # entries ending before the dirty range would mark later batches as aborted
                CleanedTransactionMetadata(
                    t for t in plan.aborted if t.last_offset >= plan.first_dirty_offset
                ),
            )
            txns = CleanedTransactionMetadata(plan.aborted)  # carried across the groups
            for group in groups:
                group.cleaned = _write_cleaned(
                    plan,
                    [by_segment[id(seg)] for seg in group.old],
                    offset_map,
                    txns,
                    now_ms,
                    group.stats,
                )
        except BaseException:
            for group in groups:
                if group.cleaned is not None:
                    _discard(group.cleaned)
            raise
        finally:
            for s in snapshots:
                os.close(s.fd)
        logger.debug("%s: cleaned in %.3f s", plan.log.dir.name, time.monotonic() - started)
        return groups

    def _swap(self, plan: CleaningPlan, groups: list[_Group]) -> CleanerStats | None:
        """Loop-thread part: swap every group in; on the first failure discard the rest."""
        log = plan.log
        total = CleanerStats()
        for n, group in enumerate(groups):
            if group.cleaned is None:  # _clean_groups fills every group before the swap
                raise RuntimeError(f"segment group {n} of {len(groups)} reached the swap uncleaned")
            try:
                log.replace_segments(group.old, group.cleaned)
            except (ValueError, OSError) as exc:
                logger.warning("%s: cleaning aborted (%s)", log.dir.name, exc)
                for rest in groups[n:]:
                    if rest.cleaned is not None:
                        _discard(rest.cleaned)
                return None
            # getattr: sums every field of the stats dataclass
            for f in dataclasses.fields(total):
                setattr(total, f.name, getattr(total, f.name) + getattr(group.stats, f.name))
        self._checkpoints()[(log.topic, log.partition)] = plan.first_uncleanable_offset
        self._write_checkpoint(log.dir.parent)
        logger.info(
            "%s: cleaned %d segment(s) below offset %d: %d of %d records kept, %d markers removed, "
            "%d -> %d bytes",
            log.dir.name,
            total.segments_cleaned,
            plan.first_uncleanable_offset,
            total.records_retained,
            total.records_read,
            total.markers_removed,
            total.bytes_read,
            total.bytes_written,
        )
        return total


def _last_records(log: UnifiedLog) -> dict[int, LastRecord]:
    """The active producers of ``log`` (Kafka's ``UnifiedLog.lastRecordsOfActiveProducers``):
    the offset of each one's last data batch (None when it has none since its epoch changed)
    and its epoch."""
    return {
        pid: LastRecord(entry.last_offset if entry.batches else None, entry.producer_epoch)
        for pid, entry in log.producer_state.producers.items()
    }


def _snapshot(segments: Sequence[LogSegment]) -> list[_Snapshot]:
    return [_Snapshot(seg, os.open(seg.log_path, os.O_RDONLY), seg.size_bytes) for seg in segments]


def _batches(snapshot: _Snapshot):  # type: ignore[no-untyped-def]
    """(header, raw bytes) of every batch of a snapshot."""
    for pos, header in iter_file_headers(snapshot.fd, snapshot.size):
        yield header, counted_pread(snapshot.fd, header.size_bytes, pos)


def _build_offset_map(dirty: Sequence[_Snapshot], txns: CleanedTransactionMetadata) -> dict[bytes, int]:
    """key -> offset of its last record in the dirty range outside aborted transactions (Kafka's
    ``SkimpyOffsetMap`` filled by ``Cleaner.buildOffsetMapForSegment``)."""
    offset_map: dict[bytes, int] = {}
    for snapshot in dirty:
        for header, raw in _batches(snapshot):
            if header.is_control:
                txns.on_control_batch_read(header, control_record_type(raw, 0, header))
                continue
            if txns.on_batch_read(header):
                continue
            decoded = decode_batch(raw, verify_crc=False)
            for key, offset in zip(decoded.keys, decoded.offsets, strict=True):
                if key is not None:
                    offset_map[key] = offset
    return offset_map


def _group_segments(segments: Sequence[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    """Consecutive segments whose sizes add up to at most ``max_bytes`` and whose offsets fit
    one segment's int32 relative offsets (Kafka's ``groupSegmentsBySize``)."""
    groups: list[list[LogSegment]] = []
    for k, seg in enumerate(segments):
        if groups:
            group = groups[-1]
            size = sum(s.size_bytes for s in group) + seg.size_bytes
            last = segments[k + 1].base_offset - 1 if k + 1 < len(segments) else seg.next_offset - 1
            if size <= max_bytes and last - group[0].base_offset <= _INT32_MAX:
                group.append(seg)
                continue
        groups.append([seg])
    return groups


def _write_cleaned(
    plan: CleaningPlan,
    snapshots: Sequence[_Snapshot],
    offset_map: dict[bytes, int],
    txns: CleanedTransactionMetadata,
    now_ms: int,
    stats: CleanerStats,
) -> LogSegment:
    """Copy what stays of ``snapshots`` into one ``.cleaned`` segment (Kafka's
    ``Cleaner.cleanSegments`` / ``cleanInto``)."""
    log = plan.log
    config = log.config
    base = snapshots[0].segment.base_offset
    for name in segment_file_names(base):
        (log.dir / (name + CLEANED_SUFFIX)).unlink(missing_ok=True)
    cleaned = LogSegment.open(log.dir, base, config, file_suffix=CLEANED_SUFFIX)
    kept_aborted: list[AbortedTxn] = []
    txns.cleaned_index = kept_aborted
    try:
        for snapshot in snapshots:
            stats.segments_cleaned += 1
            for header, raw in _batches(snapshot):
                stats.bytes_read += len(raw)
                out = _clean_batch(header, raw, plan, offset_map, txns, now_ms, stats)
                if out is None:
                    continue
                new_header = read_header(out)
                cleaned.append(out, new_header.base_offset, new_header.last_offset, new_header.max_timestamp)
                stats.bytes_written += len(out)
        for txn in kept_aborted:  # the ABORT markers that still cover data, in offset order
            cleaned.txn_index.append(txn)
        cleaned.flush()
        cleaned.close()
    except BaseException:
        _discard(cleaned)
        raise
    finally:
        txns.cleaned_index = None
    return cleaned


def _clean_batch(
    header: BatchHeader,
    raw: bytes,
    plan: CleaningPlan,
    offset_map: dict[bytes, int],
    txns: CleanedTransactionMetadata,
    now_ms: int,
    stats: CleanerStats,
) -> bytes | None:
    """What of one batch goes to the cleaned segment (None: nothing); Kafka's
    ``checkBatchRetention`` + ``shouldRetainRecord`` applied by ``MemoryRecords.filterTo``:
    tombstones go once the batch's delete horizon has passed, and a kept batch holding a
    tombstone or a marker of a finished transaction gets one (now + ``delete.retention.ms``)."""
    if header.is_control:
        can_discard = txns.on_control_batch_read(header, control_record_type(raw, 0, header))
    else:
        can_discard = txns.on_batch_read(header)
    decision = check_batch_retention(header, can_discard, plan.last_records, now_ms)
    if decision.retention is BatchRetention.DELETE:
        stats.records_read += header.records_count
        if header.is_control:
            stats.markers_removed += 1
        return None
    decoded = decode_batch(raw, verify_crc=False)
    stats.records_read += len(decoded)
    if decision.discard_records:
        keep: list[int] = []
    elif header.is_control:
        keep = list(range(len(decoded)))
    else:
        retain_deletes = not delete_horizon_passed(header, now_ms)
        keep = []
        for i, (key, offset) in enumerate(zip(decoded.keys, decoded.offsets, strict=True)):
            if key is None or offset_map.get(key, offset) > offset:
                continue
            if decoded.values[i] is None and not retain_deletes:
                stats.tombstones_removed += 1
                continue
            keep.append(i)
    stats.records_retained += len(keep)
    if not keep:
        if decision.retention is BatchRetention.RETAIN_EMPTY:
            return empty_batch(header)
        if header.is_control:
            stats.markers_removed += 1
        return None
    # a horizon past the int64 base timestamp (delete.retention.ms near Long.MAX_VALUE: keep
    # forever) is never reached: the batch stays without one (Kafka's long sum would wrap negative)
    config = plan.log.config
    level = config.level_for(header.compression_type)
    delete_horizon_ms = now_ms + config.delete_retention_ms
    if delete_horizon_ms <= LONG_MAX and needs_delete_horizon(decoded, keep, decision.set_delete_horizon):
        stats.batches_rewritten += 1
        return rewrite_batch(decoded, keep, delete_horizon_ms=delete_horizon_ms, level=level)
    if len(keep) == len(decoded):
        return raw
    stats.batches_rewritten += 1
    return rewrite_batch(decoded, keep, level=level)


def _discard(cleaned: LogSegment) -> None:
    cleaned.delete()
