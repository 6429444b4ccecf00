"""The broker's on-disk partition logs (Kafka's ``kafka.log`` / ``storage.internals.log``)."""

from __future__ import annotations

from .log_cleaner import LogCleaner
from .log_config import LogConfig
from .log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from .log_segment import LogSegment, SegmentRead
from .log_tasks import LogTaskSettings, run_log_tasks
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .unified_log import FetchDataInfo, LogAppendInfo, UnifiedLog

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "FetchDataInfo",
    "LogAppendInfo",
    "LogCleaner",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "LogTaskSettings",
    "OffsetIndex",
    "SegmentRead",
    "TimeIndex",
    "UnifiedLog",
    "run_log_tasks",
]
