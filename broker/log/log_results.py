"""Results of log appends and reads (Kafka's ``LogAppendInfo`` and ``FetchDataInfo``)."""

from __future__ import annotations

from dataclasses import dataclass

from .file_slices import DeferredRecords
from .transaction_index import AbortedTxn

__all__ = ["LogAppendInfo", "FetchDataInfo"]


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
    start before the fetch offset; clients skip records below it. ``aborted_transactions``:
    for read_committed reads, the aborted transactions overlapping the range read (else None)."""

    records: bytes | memoryview | DeferredRecords  # DeferredRecords: only with ``defer_above``
    first_batch_offset: int = -1
    aborted_transactions: list[AbortedTxn] | None = None
