"""Per-log storage settings (Kafka's ``LogConfig``, the subset the log layer needs)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LogConfig"]


@dataclass(frozen=True)
class LogConfig:
    """Storage settings of one partition log.

    Attributes:
        segment_bytes: roll to a new segment when an append would grow the active segment
            past this size (Kafka ``segment.bytes`` / ``log.segment.bytes``, default 1 GiB).
        index_interval_bytes: bytes of batches between two offset-index entries
            (``index.interval.bytes``, default 4096).
        max_message_bytes: largest RecordBatch the broker accepts (``max.message.bytes``,
            default 1048588). The log does not enforce it; request validation does.
        flush_interval_messages: fsync the log after this many appended records
            (``flush.messages``); ``None`` never fsyncs on the write path (Kafka's default).
        segment_index_bytes: maximum offset-index size; the segment rolls when its index is
            full (``segment.index.bytes``, default 10 MiB, i.e. 1310720 entries).
    """

    segment_bytes: int = 1073741824
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    flush_interval_messages: int | None = None
    segment_index_bytes: int = 10485760

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:
            raise ValueError(f"segment_bytes must be >= 14, got {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes must be >= 0, got {self.index_interval_bytes}")
        if self.segment_index_bytes < 8:
            raise ValueError(f"segment_index_bytes must be >= 8, got {self.segment_index_bytes}")
        if self.flush_interval_messages is not None and self.flush_interval_messages < 1:
            raise ValueError(
                f"flush_interval_messages must be >= 1 or None, got {self.flush_interval_messages}"
            )
