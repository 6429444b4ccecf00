"""The broker's on-disk partition logs (Kafka's ``kafka.log`` / ``storage.internals.log``)."""

from __future__ import annotations

from .log_config import LogConfig
from .log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from .log_segment import LogSegment, SegmentRead
from .offset_index import OffsetIndex
from .unified_log import FetchDataInfo, LogAppendInfo, UnifiedLog

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "FetchDataInfo",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "SegmentRead",
    "UnifiedLog",
]
