"""The log of one partition: a directory ``<topic>-<partition>/`` of segments (Kafka's
``UnifiedLog``). The segment list and the operations on it alone (read across segments, roll,
truncate, swap) are a :class:`~broker.log.local_log.LocalLog` (Kafka's ``LocalLog``); loading
and recovery are :mod:`broker.log.log_loader` (Kafka's ``LogLoader``); which old segments go,
:mod:`broker.log.retention`.

Offsets: ``log_start_offset`` (first offset served) <= ``high_watermark`` (last committed
offset + 1; set by the broker) <= ``log_end_offset`` (offset the next batch gets).
``recovery_point`` is the offset below which data is known to be flushed; after an unclean
shutdown everything from the segment containing it onwards is re-validated.

Transactions (KIP-98): ``last_stable_offset`` (LSO) = min(first offset of the earliest open or
not yet replicated transaction, ``high_watermark``), never below ``log_start_offset``
(``UnifiedLog.lastStableOffset`` / ``maybeIncrementFirstUnstableOffset``); read_committed
consumers read up to it and get the aborted transactions of the range they read from the
segments' ``.txnindex`` (``collectAbortedTransactions``).
"""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from spark_kafkalite.protocol.control_records import read_end_txn_marker
from spark_kafkalite.protocol.errors import (
    InvalidRecordError,
    OffsetOutOfRangeError,
)
from spark_kafkalite.protocol.record_batch import (
    BATCH_PATCH_BYTES,
    assign_offsets,
    read_header,
    set_log_append_time,
)

from . import producer_state_hooks as producer_state  # idempotence / transaction hooks
from . import retention
from .leader_epoch_cache import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochFileCache, load_leader_epoch_cache
from .local_log import LocalLog
from .log_config import LogConfig
from .log_loader import load_segments
from .log_results import FetchDataInfo, LogAppendInfo
from .log_segment import LogSegment
from .log_validator import check_keys_for_compaction
from .partition_metadata import (
    PARTITION_METADATA_FILE,
    format_topic_id,
    load_or_write_topic_id,
    parse_topic_id,
    parse_topic_partition_dir,
    topic_partition_dir_name,
)
from .producer_state_entry import AppendOrigin
from .segment_files import validated_stored_batches
from .transaction_index import AbortedTxn

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


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


class UnifiedLog:
    """One partition's log. Single-threaded (one asyncio loop); calls never await.

    ``UnifiedLog(dir, config, ...)`` loads (or creates) the log in ``dir``. Without
    ``had_clean_shutdown`` the segments from the one containing ``recovery_point`` onwards are
    validated batch by batch; the log is truncated at the first invalid or partial batch and
    later segments are deleted (Kafka's ``LogLoader.recoverLog``).

    Attributes:
        dir: the partition directory. topic / partition: parsed from its name.
        topic_id: from ``partition.metadata`` (None if absent).
        config: the ``LogConfig`` (replaceable, e.g. after a topic config change).
        log_start_offset, log_end_offset, high_watermark, recovery_point: offsets (ints).
        local_log: the :class:`~broker.log.local_log.LocalLog` holding the segments.
        segments: its ``LogSegment`` list, ascending base offsets; the last is active.
        recovered_segments: how many segments ``recover()`` scanned while loading.
        time_ms: the wall clock in ms (injectable for tests; drives ``segment.ms`` rolls,
            retention and compaction lags).

    ``write_later(fn)`` runs the fsyncs of ``partition.metadata`` and ``leader-epoch-checkpoint``
    later, off the event loop (the :class:`~broker.log.log_manager.LogManager`'s file writer):
    the files are replaced at once (atomically: a killed process leaves the new contents), durable
    against a power loss a moment later; None: fsynced at once. ``delete_later(delay_ms, fn)``
    runs ``fn`` (unlinking the ``.deleted`` files of segments removed by retention or
    compaction) ``delay_ms`` later off the event loop; None: the files are unlinked at once.
    ``on_unflushed(log)`` is called after a roll or an append leaves data that a background
    flush must make durable (:meth:`awaits_background_flush`), so the log manager's flush pass
    visits only such logs, not every log it holds. ``on_high_watermark_changed()`` is called
    after each change of ``high_watermark``, so an unchanged high-watermark checkpoint costs
    nothing; ``on_config_changed(log)`` after each assignment of ``config``.
    ``created``: the caller has just created ``dir`` (so it is empty): the log starts empty at
    offset 0 and nothing is read from disk (``LogManager.get_or_create_log``).

    Raises (on construction):
        ValueError: ``dir`` is not named ``<topic>-<partition>``.
        InconsistentTopicIdError: ``topic_id`` conflicts with ``partition.metadata``.
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
        time_ms: Callable[[], int] | None = None,
        write_later: Callable[[Callable[[], None]], None] | None = None,
        delete_later: Callable[[int, Callable[[], None]], None] | None = None,
        on_unflushed: Callable[[UnifiedLog], None] | None = None,
        on_high_watermark_changed: Callable[[], None] | None = None,
        on_config_changed: Callable[[UnifiedLog], None] | None = None,
        created: bool = False,
    ) -> None:
        self.time_ms: Callable[[], int] = time_ms or _wall_clock_ms
        self._write_later = write_later
        self._delete_later = delete_later
        self._on_unflushed = on_unflushed
        self._on_high_watermark_changed = on_high_watermark_changed
        self._on_config_changed = on_config_changed
        self.dir = dir if isinstance(dir, Path) else Path(dir)
        parsed = parse_topic_partition_dir(self.dir.name)
        if parsed is None:
            raise ValueError(f"not a partition directory name: {self.dir.name!r}")
        self.topic, self.partition = parsed
        self.local_log = LocalLog(self.dir, config, self.time_ms, delete_later)
        self._config = config  # the LocalLog's, kept here too: read on every append
        self.recovered_segments = 0
        self._closed = False
        self.last_flush_ms = self.time_ms()
        self.pending_flush_offset: int | None = None
        if created:
            self._create_empty(topic_id)
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        self.topic_id = load_or_write_topic_id(self.dir, topic_id, self._write_later)
        self._load_segments(recovery_point, log_start_offset, had_clean_shutdown)
        self.leader_epoch_cache: LeaderEpochFileCache = load_leader_epoch_cache(  # replication hook
            self.dir,
            (
                (h.partition_leader_epoch, h.base_offset)
                for seg in self.segments
                for _, h in seg.iter_batches()
            ),
            self.log_start_offset,
            self.log_end_offset,
            write_later,
        )
        self.producer_state = producer_state.load_producer_state(self)  # idempotence hook
        self.high_watermark = self.log_start_offset
        self.update_high_watermark(self.log_start_offset if high_watermark is None else high_watermark)

    # -- loading ---------------------------------------------------------------------------

    def _create_empty(self, topic_id: uuid.UUID | None) -> None:
        """The state of a log whose directory the caller has just created (so it is empty):
        ``partition.metadata`` and an empty active segment at offset 0 are created; nothing is
        read or scanned (no segments, snapshots, checkpoints or leftovers can be there). A broker
        creating thousands of partitions pays a few file operations per partition."""
        self.topic_id = load_or_write_topic_id(self.dir, topic_id, self._write_later, created=True)
        self.local_log.add_segment(LogSegment.create(self.dir, 0, self.config, self.time_ms()))
        self.log_start_offset = self.log_end_offset = self.recovery_point = 0
        self.leader_epoch_cache = LeaderEpochFileCache(self.dir / LEADER_EPOCH_CHECKPOINT_FILE)
        self.leader_epoch_cache.write_later = self._write_later
        self.leader_epoch_cache.absent = True
        self.producer_state = producer_state.new_producer_state(self)
        self.high_watermark = 0

    def _load_segments(self, recovery_point: int, log_start_offset: int | None, clean: bool) -> None:
        loaded = load_segments(
            self.dir,
            self.config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean=clean,
            now_ms=self.time_ms(),
        )
        for seg in loaded.segments:
            self.local_log.add_segment(seg)
        self.recovered_segments = loaded.recovered_segments
        self.log_start_offset = loaded.log_start_offset
        self.log_end_offset = loaded.log_end_offset
        self.recovery_point = loaded.recovery_point

    # -- properties ------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        """The log's ``LogConfig``; assigning a new one (a topic config change) applies it to
        every segment (index interval) and to future rolls, retention and cleaning."""
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = self.local_log.config = config
        if self._on_config_changed is not None:
            self._on_config_changed(self)

    @property
    def segments(self) -> list[LogSegment]:
        """The ``LogSegment`` list (ascending base offsets; the last is active)."""
        return self.local_log.segments

    @property
    def active_segment(self) -> LogSegment:
        """The last segment, the one appends go to."""
        return self.local_log.segments[-1]

    @property
    def size_bytes(self) -> int:
        """Bytes of ``.log`` data across segments."""
        return self.local_log.size_bytes

    def set_topic_id(self, topic_id: uuid.UUID) -> None:
        """Record ``topic_id`` in ``partition.metadata`` if none is stored yet.

        Raises:
            InconsistentTopicIdError: a different topic id is stored.
        """
        self.topic_id = load_or_write_topic_id(self.dir, topic_id, self._write_later)

    def update_high_watermark(self, offset: int) -> int:
        """Set ``high_watermark`` to ``offset`` clamped to [log_start_offset, log_end_offset];
        returns the new value."""
        old = self.high_watermark
        self.high_watermark = max(self.log_start_offset, min(offset, self.log_end_offset))
        if self.high_watermark != old and self._on_high_watermark_changed is not None:
            self._on_high_watermark_changed()
        self.producer_state.on_high_watermark_updated(self.high_watermark)  # transaction hook
        return self.high_watermark

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest transaction that is open or whose marker is not yet
        below the high watermark (at least ``log_start_offset``), or None."""
        first = self.producer_state.first_unstable_offset()
        return None if first is None else max(first, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """The LSO: ``min(first_unstable_offset, high_watermark)`` (see module docstring)."""
        first = self.first_unstable_offset
        hw = self.high_watermark
        return hw if first is None or first >= hw else first

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset) (Kafka's
        ``LocalLog.collectAbortedTransactions``: :meth:`LocalLog.collect_aborted_transactions`)."""
        return self.local_log.collect_aborted_transactions(start_offset, upper_bound_offset)

    # -- append ----------------------------------------------------------------------------

    def append_as_leader(
        self,
        batch: bytearray | memoryview,
        leader_epoch: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Append ONE already-validated RecordBatch v2: patch its base offset (= log_end_offset)
        and partition leader epoch, write it, and advance ``log_end_offset``. Producer-state
        checks by ``origin`` (:mod:`broker.log.producer_state_manager`); only
        ``AppendOrigin.COORDINATOR`` may append control batches (transaction markers).

        A ``bytearray`` is patched in place; any other buffer (e.g. a read-only view into a
        Produce request's frame) is left untouched: its first ``BATCH_PATCH_BYTES`` are copied,
        patched and written ahead of the rest with one ``writev`` (no copy of the batch).

        The size limit (``max.message.bytes``) and CRC are the caller's to check (Kafka's
        ``LogValidator``). Rolls a new segment first when the batch would overflow the active one.

        Raises:
            InvalidRecordError: a client control batch, a malformed marker, a bad sequence; a
                keyless record on a compacted topic (with ``record_errors`` naming each one,
                KIP-467: :func:`~broker.log.log_validator.check_keys_for_compaction`).
            InvalidProducerEpochError, OutOfOrderSequenceNumberError, InvalidTxnStateError,
            TransactionCoordinatorFencedError: producer-state checks.
        """
        header = read_header(batch)
        marker = None
        if header.is_control:
            if origin is AppendOrigin.CLIENT:
                raise InvalidRecordError("Clients are not allowed to write control records")
            marker = read_end_txn_marker(batch, 0, header)
        config = self._config
        if config.compact:
            check_keys_for_compaction(batch, self.dir.name)
        if header.producer_id >= 0:  # idempotence hook: dedup / sequence / transaction checks (KIP-98)
            duplicate = self.producer_state.check_client_append(header, origin, marker)
            if duplicate is not None:
                return producer_state.duplicate_append_info(duplicate, self.log_start_offset)
        first = self.log_end_offset
        last = first + header.last_offset_delta
        log_append_time_ms = -1
        if config.log_append_time:  # the batch is stamped (and copied if it is a view)
            if not isinstance(batch, bytearray):
                batch = bytearray(batch)
            log_append_time_ms = int(time.time() * 1000)
            set_log_append_time(batch, log_append_time_ms)
            header = read_header(batch)
        if isinstance(batch, bytearray):
            assign_offsets(batch, first, leader_epoch)
            head: bytearray | None = None
        else:
            head = bytearray(batch[:BATCH_PATCH_BYTES])
            assign_offsets(head, first, leader_epoch)
        self.leader_epoch_cache.assign(leader_epoch, first)  # replication hook
        seg = self._maybe_roll(len(batch), first, last, header.max_timestamp)
        if head is None:
            seg.append(batch, first, last, header.max_timestamp)
        else:
            seg.append(batch[BATCH_PATCH_BYTES:], first, last, header.max_timestamp, head=head)
        self.log_end_offset = last + 1
        aborted = self.producer_state.on_append(header, first, last, marker)  # idempotence hook
        if aborted is not None:  # transaction hook: an ABORT marker
            seg.txn_index.append(aborted)
        self._maybe_flush()
        return LogAppendInfo(
            first_offset=first,
            last_offset=last,
            max_timestamp_ms=header.max_timestamp,
            log_append_time_ms=log_append_time_ms,
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
        batches, pos = validated_stored_batches(records, self.log_end_offset, self.dir.name)
        if not batches:
            return None
        view = memoryview(records)
        for _, h in batches:  # replication hook: epochs stamped by the leader
            self.leader_epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        self.local_log.append_stored_batches(view, batches, self._maybe_roll)
        self.log_end_offset = batches[-1][1].next_offset
        producer_state.on_replicated_batches(self, self.producer_state, view, batches)  # idempotence hook
        self._maybe_flush()
        return LogAppendInfo(
            first_offset=batches[0][1].base_offset,
            last_offset=batches[-1][1].last_offset,
            max_timestamp_ms=max(h.max_timestamp for _, h in batches),
            valid_bytes=pos,
            records_count=sum(h.records_count for _, h in batches),
            log_start_offset=self.log_start_offset,
        )

    def _maybe_roll(
        self, size_bytes: int, first_offset: int, last_offset: int, max_timestamp_ms: int = -1
    ) -> LogSegment:
        """The segment to append to, rolling first when the batch would overflow
        ``segment.bytes`` or an index, or the active segment is older than ``segment.ms`` by
        the batches' timestamps (Kafka's ``LogSegment.shouldRoll``)."""
        seg = self.local_log.segments[-1]
        config = self._config
        if (
            seg.can_append(size_bytes, last_offset, config.segment_bytes)
            and first_offset >= seg.base_offset
            and not (
                seg.size_bytes
                and seg.time_waited_for_roll_ms(self.time_ms(), max_timestamp_ms) > config.segment_ms
            )
        ):
            return seg
        return self.roll(first_offset)

    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``new_base_offset`` (default log_end_offset). An empty
        active segment is replaced rather than kept. No fsync here: as Kafka does after a roll,
        ``pending_flush_offset`` asks the log manager's background flush to fsync the rolled
        segments and advance the recovery point to the new base offset."""
        base = self.log_end_offset if new_base_offset is None else new_base_offset
        active = self.local_log.active_segment
        seg = self.local_log.roll(base)
        if seg is active:  # an empty active segment already at ``base``
            return seg
        producer_state.snapshot_on_roll(self.producer_state, base)  # idempotence hook
        if base > self.recovery_point:
            self.pending_flush_offset = max(self.pending_flush_offset or 0, base)
            if self._on_unflushed is not None:
                self._on_unflushed(self)
        logger.debug("%s: rolled new segment at offset %d", self.dir.name, base)
        return seg

    def _maybe_flush(self) -> None:
        config = self._config
        interval = config.flush_interval_messages
        if interval is not None and self.log_end_offset - self.recovery_point >= interval:
            self.flush()
        elif self._on_unflushed is not None and config.flush_ms is not None:
            self._on_unflushed(self)

    def awaits_background_flush(self) -> bool:
        """True while data below the log end offset is not yet durable and a background flush
        will make it so: a rolled segment (``pending_flush_offset``) or ``flush.ms`` set."""
        return self.log_end_offset > self.recovery_point and (
            self.pending_flush_offset is not None or self.config.flush_ms is not None
        )

    # -- read ------------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        include_aborted_txns: bool = False,
        defer_above: int | None = None,
    ) -> FetchDataInfo:
        """Whole batches from the one containing ``fetch_offset``, at most ``max_bytes`` (except
        that with ``min_one_message`` the first batch is always whole, KIP-74), never a batch whose
        base offset is >= ``max_offset`` (the high watermark for consumers, the LSO for
        read_committed ones). Continues into the next segments while room remains. One ``pread``
        per segment in the common case. With ``include_aborted_txns`` (read_committed) the result
        carries the aborted transactions overlapping [fetch_offset, offset after the data read)
        (Kafka's ``LocalLog.read`` with ``FetchIsolation.TXN_COMMITTED``). With ``defer_above``
        (bytes), a segment read above it is left in the file: ``records`` is then a
        :class:`~broker.log.file_slices.DeferredRecords` of the exact size, whose ``load()`` (on a
        worker thread) returns the bytes.

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
            return FetchDataInfo(b"", aborted_transactions=[] if include_aborted_txns else None)
        return self.local_log.read(
            fetch_offset, max_bytes, limit, min_one_message, include_aborted_txns, defer_above
        )

    def fetch_offset_by_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record at or after log_start_offset whose
        timestamp is >= ``timestamp_ms``, or None (Kafka's ``fetchOffsetByTimestamp`` for a
        non-negative target). Binary search over segments by their (running) max timestamp,
        then the segment's time and offset indexes: see :mod:`broker.log.timestamp_lookup`."""
        return self.local_log.fetch_offset_by_timestamp(self.log_start_offset, timestamp_ms)

    def latest_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp_ms) of the first record with the largest timestamp (ListOffsets
        MAX_TIMESTAMP, KIP-734), or None for a log without timestamps."""
        return self.local_log.latest_timestamp(self.log_start_offset)

    # -- log start offset, retention -------------------------------------------------------

    def maybe_increment_log_start_offset(self, new_offset: int) -> bool:
        """Raise ``log_start_offset`` to ``new_offset`` (Kafka's
        ``UnifiedLog.maybeIncrementLogStartOffset``); returns True if it moved. Whole segments
        below it are deleted by the next :meth:`delete_old_segments`.

        Raises:
            OffsetOutOfRangeError: ``new_offset`` is above the high watermark.
        """
        if new_offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"{self.dir.name}: cannot move the log start offset to {new_offset}, "
                f"above the high watermark {self.high_watermark}"
            )
        if new_offset <= self.log_start_offset:
            return False
        logger.info("%s: log start offset %d -> %d", self.dir.name, self.log_start_offset, new_offset)
        self.log_start_offset = new_offset
        self.leader_epoch_cache.truncate_from_start(new_offset)  # replication hook
        return True

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset (never moving it back) and delete
        the segments wholly below it. Returns the new log start offset (the low watermark).

        Raises:
            OffsetOutOfRangeError: ``offset`` is above the high watermark or negative.
        """
        if offset < 0:
            raise OffsetOutOfRangeError(f"{self.dir.name}: cannot delete records before offset {offset}")
        self.maybe_increment_log_start_offset(offset)
        self.delete_leading_segments(retention.log_start_offset_breached(self), "log start offset breach")
        return self.log_start_offset

    def delete_old_segments(self) -> int:
        """Kafka's ``UnifiedLog.deleteOldSegments``: delete the leading segments that are below
        the log start offset, then (with ``cleanup.policy`` ``delete``) those beyond
        ``retention.bytes`` and those older than ``retention.ms`` (by ``time_ms``). Returns the
        number of segments deleted."""
        deleted = self.delete_leading_segments(
            retention.log_start_offset_breached(self), "log start offset breach"
        )
        if self.config.delete:
            deleted += self.delete_leading_segments(
                retention.retention_size_breached(self), "retention size breach"
            )
            deleted += self.delete_leading_segments(
                retention.retention_ms_breached(self, self.time_ms()), "retention time breach"
            )
        return deleted

    def delete_leading_segments(self, count: int, reason: str) -> int:
        """Delete the first ``count`` segments (rolling a new active segment first when all go)
        and advance ``log_start_offset`` to the new first segment's base offset."""
        if count <= 0:
            return 0
        if count >= len(self.segments):
            count = len(self.segments)
            self.roll()
        self.local_log.remove_leading_segments(count, reason)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self.update_high_watermark(self.high_watermark)
        return count

    # -- compaction swap -------------------------------------------------------------------

    def replace_segments(self, old: Sequence[LogSegment], cleaned: LogSegment) -> LogSegment:
        """Swap the closed cleaner output ``cleaned`` (files ``<base>.*.cleaned``, base offset
        = ``old[0].base_offset``) in for the consecutive inactive segments ``old`` (Kafka's
        ``LocalLog.replaceSegments``): rename its files to ``.swap`` (the commit point: a
        restart completes the swap, see :mod:`broker.log.log_loader`), delete the old
        segments, drop the ``.swap`` suffix, and open the result. Runs on the loop thread, so
        readers never see a partial state.

        Raises:
            ValueError: ``old`` is no longer a run of inactive segments of this log (the caller
                discards ``cleaned``).
        """
        if self._closed:
            raise ValueError(f"{self.dir.name}: the log is closed")
        return self.local_log.replace_segments(old, cleaned)

    # -- truncation ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at offsets >= ``offset`` (a follower diverging from its leader).
        A batch containing ``offset`` is removed whole. Returns False if no record was removed.

        At or beyond the log end nothing is removed, but the leader epoch cache is still truncated
        at the log end offset, as Kafka's ``UnifiedLog.truncateTo`` does: a broker that became
        leader (assigning its epoch at the LEO) and appended nothing before losing leadership
        keeps an empty trailing epoch the new leader never had; left there, every fetch it sends
        carries that epoch and is answered with the same diverging epoch forever (issue #14)."""
        if offset >= self.log_end_offset:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            return False
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self.log_end_offset = self.local_log.truncate_to(offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.update_high_watermark(self.high_watermark)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)  # replication hook
        producer_state.reload_producer_state(self, self.producer_state)  # idempotence hook
        self.producer_state.on_high_watermark_updated(self.high_watermark)  # transaction hook
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data and restart the log empty at ``offset`` (all offsets become ``offset``)."""
        self.local_log.truncate_fully_and_start_at(offset)
        self.log_start_offset = self.log_end_offset = self.recovery_point = offset
        self.high_watermark = offset
        if self._on_high_watermark_changed is not None:
            self._on_high_watermark_changed()
        self.leader_epoch_cache.clear()  # replication hook
        self.producer_state.truncate_fully_and_start_at(offset)  # idempotence hook

    # -- lifecycle -------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync every segment holding offsets >= recovery_point; recovery_point becomes
        log_end_offset."""
        for seg in self.local_log.segments_from(self.recovery_point):
            seg.flush()
        self.recovery_point = self.log_end_offset
        self.last_flush_ms = self.time_ms()
        self.pending_flush_offset = None

    def flush_target(self) -> int | None:
        """The offset a background flush should make durable now, or None: the log end offset
        when ``flush.ms`` has passed since the last flush (Kafka's ``flushDirtyLogs``), else the
        base offset of the last rolled segment (Kafka's flush after ``roll``)."""
        if self.log_end_offset <= self.recovery_point:
            self.pending_flush_offset = None
            return None
        flush_ms = self.config.flush_ms
        if flush_ms is not None and self.time_ms() - self.last_flush_ms >= flush_ms:
            return self.log_end_offset
        return self.pending_flush_offset

    def segments_to_flush(self, up_to: int) -> list[LogSegment]:
        """Segments holding offsets in [recovery_point, up_to)."""
        return self.local_log.segments_from(self.recovery_point, up_to)

    def mark_flushed(self, up_to: int) -> None:
        """Record that everything below ``up_to`` was fsynced (by a background flush of
        ``segments_to_flush(up_to)``): the recovery point advances to it."""
        if up_to > self.recovery_point:
            self.recovery_point = min(up_to, self.log_end_offset)
        if self.pending_flush_offset is not None and self.pending_flush_offset <= up_to:
            self.pending_flush_offset = None
        self.last_flush_ms = self.time_ms()

    def close(self) -> None:
        """Close all files (no flush; call ``flush`` first for durability)."""
        if self._closed:
            return
        producer_state.snapshot_on_close(self.producer_state, self.log_end_offset)  # idempotence hook
        self.local_log.close()
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
