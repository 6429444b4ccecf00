"""Per-log storage settings (Kafka's ``LogConfig``, the subset the log layer needs).

Topic-level keys (``segment.ms``, ``retention.ms``, ``cleanup.policy`` ...) map one-to-one on the
fields below; the broker builds the default from its ``log.*`` keys (``broker.config.log_config_from``)
and per-topic overrides replace fields with ``dataclasses.replace``.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_kafkalite.protocol.compression import COMPRESSION_CODECS

__all__ = ["LogConfig", "LONG_MAX", "CLEANUP_POLICIES", "BROKER_COMPRESSION_TYPES"]

LONG_MAX = 2**63 - 1
CLEANUP_POLICIES = ("delete", "compact")
BROKER_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
"""Values of ``compression.type`` (Kafka's ``BrokerCompressionType``)."""


@dataclass(frozen=True)
class LogConfig:
    """Storage settings of one partition log.

    Attributes:
        segment_bytes: roll to a new segment when an append would grow the active segment
            past this size (Kafka ``segment.bytes`` / ``log.segment.bytes``, default 1 GiB).
        index_interval_bytes: bytes of batches between two offset-index / time-index entries
            (``index.interval.bytes``, default 4096).
        max_message_bytes: largest RecordBatch the broker accepts (``max.message.bytes``,
            default 1048588). The log does not enforce it; request validation does.
        flush_interval_messages: fsync the log after this many appended records
            (``flush.messages``); ``None`` never fsyncs on the write path (Kafka's default).
        segment_index_bytes: maximum offset-index size; the segment rolls when its index is
            full (``segment.index.bytes``, default 10 MiB, i.e. 1310720 entries).
        segment_ms: roll the active segment once its first batch is this old, by the batches'
            max timestamps (``segment.ms`` / ``log.roll.ms``, default 7 days).
        retention_ms: delete whole non-active segments whose largest timestamp is older than
            this (``retention.ms`` / ``log.retention.ms``; -1 = forever, default 7 days).
        retention_bytes: delete the oldest whole segments while the partition is larger than
            this (``retention.bytes`` / ``log.retention.bytes``; -1 = unlimited, the default).
        cleanup_policy: ``("delete",)``, ``("compact",)`` or both (``cleanup.policy``).
        delete_retention_ms: how long the cleaner keeps tombstones (null-value records) and
            transaction markers after the cleaning pass that first keeps them (a tombstone that
            is its key's latest record, a marker whose transaction is gone): that pass stores
            the delete horizon now + this in the batch, whatever the records' own timestamps
            (KIP-534) (``delete.retention.ms``, default 1 day). A value whose horizon would pass
            the int64 range (e.g. ``LONG_MAX``) keeps them for ever: no horizon is stored.
        min_compaction_lag_ms: records younger than this are never compacted
            (``min.compaction.lag.ms``, default 0).
        min_cleanable_dirty_ratio: clean a log when dirty bytes / cleanable bytes reaches this
            (``min.cleanable.dirty.ratio``, default 0.5).
        flush_ms: fsync the log when its oldest unflushed append is this old (``flush.ms`` /
            ``log.flush.interval.ms``); ``None`` = never (Kafka's default, Long.MAX_VALUE).
        min_insync_replicas: smallest ISR that acks=all produce accepts, else
            NOT_ENOUGH_REPLICAS (``min.insync.replicas``, default 1). Enforced by produce.
        message_timestamp_before_max_ms: oldest CreateTime a produced batch may carry, in ms
            before now (``message.timestamp.before.max.ms``, default Long.MAX_VALUE = no limit);
            older -> INVALID_TIMESTAMP. Enforced by produce.
        message_timestamp_after_max_ms: latest CreateTime a produced batch may carry, in ms
            after now (``message.timestamp.after.max.ms``, default 1 hour). Enforced by produce.
        file_delete_delay_ms: how long the files of a segment removed by retention or
            compaction stay renamed ``.deleted`` before they are unlinked off the event loop
            (``file.delete.delay.ms`` / ``log.segment.delete.delay.ms``, default 1 minute).
        message_timestamp_type: ``CreateTime`` (the producer's timestamps, default) or
            ``LogAppendTime``: the leader stamps every batch it appends with its clock
            (``message.timestamp.type``; Kafka's ``LogValidator``). See :attr:`log_append_time`.
        compression_type: the codec the leader stores produced batches with
            (``compression.type``, one of :data:`BROKER_COMPRESSION_TYPES`): ``producer``
            (the default) keeps each batch's own codec; any other value rebuilds a batch whose
            codec differs (see :attr:`compression`). Enforced by produce.
        compression_gzip_level, compression_lz4_level, compression_zstd_level: the level of
            that codec when it is ``compression_type`` (``compression.gzip.level`` -1,
            ``compression.lz4.level`` 9, ``compression.zstd.level`` 3; KIP-390).
    """

    segment_bytes: int = 1073741824
    index_interval_bytes: int = 4096
    max_message_bytes: int = 1048588
    flush_interval_messages: int | None = None
    segment_index_bytes: int = 10485760
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    min_cleanable_dirty_ratio: float = 0.5
    flush_ms: int | None = None
    min_insync_replicas: int = 1
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    message_timestamp_type: str = "CreateTime"
    file_delete_delay_ms: int = 60000
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3

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
        if self.segment_ms < 1:
            raise ValueError(f"segment_ms must be >= 1, got {self.segment_ms}")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            raise ValueError(
                f"retention_ms/retention_bytes must be >= -1, got {self.retention_ms}/{self.retention_bytes}"
            )
        if isinstance(self.cleanup_policy, str):  # tolerate "compact,delete"
            object.__setattr__(
                self, "cleanup_policy", tuple(p.strip() for p in self.cleanup_policy.split(",") if p.strip())
            )
        for policy in self.cleanup_policy:
            if policy not in CLEANUP_POLICIES:
                raise ValueError(f"unknown cleanup policy {policy!r} (expected delete and/or compact)")
        if self.delete_retention_ms < 0 or self.min_compaction_lag_ms < 0:
            raise ValueError("delete_retention_ms and min_compaction_lag_ms must be >= 0")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise ValueError(
                f"min_cleanable_dirty_ratio must be in [0, 1], got {self.min_cleanable_dirty_ratio}"
            )
        if self.flush_ms is not None and self.flush_ms < 0:
            raise ValueError(f"flush_ms must be >= 0 or None, got {self.flush_ms}")
        if self.compression_type not in BROKER_COMPRESSION_TYPES:
            raise ValueError(
                f"compression_type must be one of {', '.join(BROKER_COMPRESSION_TYPES)}, got {self.compression_type!r}"
            )

    @property
    def log_append_time(self) -> bool:
        """``message.timestamp.type=LogAppendTime``: batches appended as leader get the broker's
        time as their timestamp, and the producer's timestamps are not range-checked."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compression(self) -> tuple[int, int | None] | None:
        """``(codec id, level)`` the leader rebuilds produced batches with when theirs differs
        (Kafka's ``LogConfig.compression`` and ``BrokerCompressionType.targetCompression``);
        None for ``producer`` (batches stay as sent). ``uncompressed`` is codec 0 (level None),
        snappy has no level."""
        name = self.compression_type
        if name == "producer":
            return None
        levels = {
            "gzip": self.compression_gzip_level,
            "lz4": self.compression_lz4_level,
            "zstd": self.compression_zstd_level,
        }
        return COMPRESSION_CODECS["none" if name == "uncompressed" else name], levels.get(name)

    def level_for(self, compression_type: int) -> int | None:
        """The level to compress with codec ``compression_type`` (an id, 0-4): the topic's when
        that codec is its ``compression.type``, else None (the codec's default; Kafka builds
        ``Compression.of(type)`` with default levels wherever the topic's codec is not in play)."""
        target = self.compression
        return target[1] if target is not None and target[0] == compression_type else None

    @property
    def compact(self) -> bool:
        """True when ``cleanup.policy`` includes ``compact``."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """True when ``cleanup.policy`` includes ``delete`` (time/size retention applies)."""
        return "delete" in self.cleanup_policy
