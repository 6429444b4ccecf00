"""``UnifiedLog`` glue of the producer state (kept here so that unified_log.py only carries
one-line hooks): loading with a header replay (and the ``.txnindex`` rebuild it drives),
follower appends, snapshots at roll and close, the duplicate-batch answer.

A segment whose ``txn_index_needs_rebuild`` is set (recovered, indexes rebuilt, or a corrupt
``.txnindex``) gets its aborted-transaction index rebuilt while loading: the replay then starts
from a producer snapshot at or below that segment's base offset (or the log start), and every
ABORT it completes inside such a segment is appended to its index (Kafka's
``LogLoader.recoverSegment`` -> ``LogSegment.recover`` with the producer state at the segment's
start).
"""

from __future__ import annotations

import logging
from bisect import bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from spark_kafkalite.protocol.control_records import EndTransactionMarker, read_end_txn_marker
from spark_kafkalite.protocol.errors import KafkaError
from spark_kafkalite.protocol.record_batch import BatchHeader, Buffer

from .log_results import LogAppendInfo
from .producer_state_entry import BatchMetadata
from .producer_state_manager import DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerStateManager, ReplayItem
from .transaction_index import AbortedTxn

__all__ = [
    "load_producer_state",
    "new_producer_state",
    "reload_producer_state",
    "on_replicated_batches",
    "index_aborted_txn",
    "marker_of",
    "snapshot_on_close",
    "snapshot_on_roll",
    "duplicate_append_info",
]

logger = logging.getLogger(__name__)


class _LogView(Protocol):
    """What the glue needs from a ``UnifiedLog`` (structural typing: no import cycle)."""

    dir: Path
    log_start_offset: int
    log_end_offset: int
    time_ms: Callable[[], int]

    @property
    def segments(self) -> list[Any]: ...


def marker_of(buf: Buffer, pos: int, header: BatchHeader, where: str) -> EndTransactionMarker | None:
    """The end-transaction marker of a stored control batch, or None (not a control batch, an
    empty or unknown one, or a malformed control record, which is logged and ignored)."""
    if not header.is_control:
        return None
    try:
        return read_end_txn_marker(buf, pos, header)
    except KafkaError as exc:
        logger.warning("%s: ignoring control batch at offset %d: %s", where, header.base_offset, exc)
        return None


def _replay_from(log: _LogView) -> Callable[[int], Iterable[ReplayItem]]:
    def replay(from_offset: int) -> Iterable[ReplayItem]:
        if from_offset >= log.log_end_offset:
            return
        segments = list(log.segments)
        first = 0
        for i, seg in enumerate(segments):  # the segment holding from_offset (by base offsets only)
            if seg.base_offset <= from_offset:
                first = i
        for i, seg in enumerate(segments[first:]):
            position = 0
            if i == 0 and seg.base_offset < from_offset:
                found = seg.find_batch(from_offset)  # via the offset index
                if found is None:
                    continue
                position = found[0]
            for pos, header in seg.iter_batches(position):
                if header.base_offset >= from_offset:
                    marker = None
                    if header.is_control:
                        marker = marker_of(seg.read_bytes(pos, header.size_bytes), 0, header, log.dir.name)
                    yield header, marker

    return replay


def _segment_for(log: _LogView, offset: int) -> Any:
    segments = log.segments
    i = bisect_right([seg.base_offset for seg in segments], offset) - 1
    return segments[max(i, 0)]


def index_aborted_txn(log: _LogView, txn: AbortedTxn) -> None:
    """Append ``txn`` to the ``.txnindex`` of the segment holding its marker."""
    _segment_for(log, txn.last_offset).txn_index.append(txn)


def _load(log: _LogView, manager: ProducerStateManager) -> None:
    rebuild = [seg for seg in log.segments if seg.txn_index_needs_rebuild]
    if not rebuild:
        manager.load(log.log_start_offset, log.log_end_offset, _replay_from(log))
        return
    for seg in rebuild:
        seg.txn_index.reset()
    rebuilt = {id(seg) for seg in rebuild}

    def on_aborted(txn: AbortedTxn) -> None:
        seg = _segment_for(log, txn.last_offset)
        if id(seg) in rebuilt:
            seg.txn_index.append(txn)

    manager.load(
        log.log_start_offset,
        log.log_end_offset,
        _replay_from(log),
        replay_from_at_most=rebuild[0].base_offset,
        on_aborted=on_aborted,
    )
    for seg in rebuild:
        seg.txn_index_needs_rebuild = False
    logger.info(
        "%s: rebuilt the transaction index of %d segment(s) (%d aborted transaction(s))",
        log.dir.name,
        len(rebuild),
        sum(len(seg.txn_index.entries) for seg in rebuild),
    )


def new_producer_state(log: _LogView) -> ProducerStateManager:
    """An empty ``ProducerStateManager`` for a log just created empty (nothing to load).
    ``producer.id.expiration.ms`` comes from ``log.config.producer_id_expiration_ms`` when the
    ``LogConfig`` has it (else 24 h)."""
    # getattr: a log view may have no LogConfig (then the default expiration)
    config = getattr(log, "config", None)
    return ProducerStateManager(
        log.dir,
        producer_id_expiration_ms=int(
            getattr(config, "producer_id_expiration_ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS)
        ),
        time_ms=log.time_ms,
    )


def load_producer_state(log: _LogView) -> ProducerStateManager:
    """A ``ProducerStateManager`` for a freshly loaded log: newest snapshot + header replay
    (and the ``.txnindex`` rebuild of segments that need it)."""
    manager = new_producer_state(log)
    _load(log, manager)
    return manager


def reload_producer_state(log: _LogView, manager: ProducerStateManager) -> None:
    """After a truncation: rebuild from the newest snapshot at or below the new log end
    (Kafka's ``truncateAndReload``)."""
    _load(log, manager)


def on_replicated_batches(
    log: _LogView,
    manager: ProducerStateManager,
    records: Buffer,
    batches: Iterable[tuple[int, BatchHeader]],
) -> None:
    """Follower append: update the state from (position in ``records``, header) pairs that
    carry offsets; ABORT markers ending a transaction go to the ``.txnindex``."""
    for pos, header in batches:
        marker = marker_of(records, pos, header, log.dir.name) if header.is_control else None
        aborted = manager.on_append(header, header.base_offset, header.last_offset, marker)
        if aborted is not None:
            index_aborted_txn(log, aborted)


def snapshot_on_close(manager: ProducerStateManager, log_end_offset: int) -> None:
    """Clean shutdown: snapshot at the log end offset (fsynced); I/O errors are logged only."""
    try:
        if manager.map_end_offset == log_end_offset:
            manager.take_snapshot(log_end_offset, sync=True)
    except OSError as exc:
        logger.warning("%s: cannot write producer snapshot: %s", manager.dir.name, exc)


def snapshot_on_roll(manager: ProducerStateManager, new_base_offset: int) -> None:
    """Segment roll: snapshot the state at the new segment's base offset (Kafka's roll)."""
    if manager.map_end_offset > new_base_offset:
        return  # the state covers batches above the roll point (should not happen)
    try:
        manager.take_snapshot(new_base_offset)
    except OSError as exc:
        logger.warning("%s: cannot write producer snapshot: %s", manager.dir.name, exc)


def duplicate_append_info(meta: BatchMetadata, log_start_offset: int) -> LogAppendInfo:
    """The ``LogAppendInfo`` answered for a duplicate batch: the original offsets, nothing
    appended (``records_count`` 0)."""
    return LogAppendInfo(
        first_offset=meta.first_offset,
        last_offset=meta.last_offset,
        max_timestamp_ms=meta.timestamp_ms,
        log_append_time_ms=-1,
        valid_bytes=0,
        records_count=0,
        log_start_offset=log_start_offset,
    )
