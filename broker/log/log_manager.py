"""All partition logs of a broker across its log dirs (Kafka's ``LogManager``).

Each log dir holds ``<topic>-<partition>/`` directories plus Kafka's checkpoint files
(``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``) and, after a clean shutdown, the ``.kafka_cleanshutdown``
marker. ``startup`` loads every partition directory; without the marker the logs are recovered
from their recovery points (batch-by-batch validation, truncation at the first bad batch).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from spark_kafkalite.protocol.errors import KafkaStorageError
from spark_kafkalite.protocol.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from spark_kafkalite.protocol.types import TopicPartitionKey

from .checkpoints import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from .log_config import LogConfig
from .log_file_writer import LogFileWriter
from .unified_log import UnifiedLog, parse_topic_partition_dir, topic_partition_dir_name

__all__ = ["LogManager", "CLEAN_SHUTDOWN_FILE", "DELETE_DIR_SUFFIX"]

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"


def _fsync_paths(paths: Sequence[Path]) -> None:
    """fsync each file (skipping files deleted meanwhile, e.g. by retention)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _holds_logs(log_dir: Path) -> bool:
    """True when ``log_dir`` contains a partition directory (a log, possibly being deleted), so
    a missing clean-shutdown marker means a crash rather than a brand-new dir."""
    with os.scandir(log_dir) as entries:
        return any(
            entry.is_dir()
            and (entry.name.endswith(DELETE_DIR_SUFFIX) or parse_topic_partition_dir(entry.name) is not None)
            for entry in entries
        )


class LogManager:
    """Owns the ``UnifiedLog`` of every partition on this broker.

    Args:
        log_dirs: Kafka's ``log.dirs`` (created when missing).
        config: the default ``LogConfig`` (from the broker's ``log.*`` keys).
        time_ms: wall clock in ms, injectable for tests (retention, rolls, cleaning).

    Per-topic configs: ``update_topic_config(topic, LogConfig)`` sets the config of every
    partition log of ``topic`` now and of partitions created or loaded later;
    ``remove_topic_config(topic)`` goes back to the default. Both cost the topic's partitions,
    not every log of the broker (the logs are indexed by topic).

    Log dir failures (Kafka's ``LogDirFailureChannel``): ``mark_log_dir_offline`` takes the dir
    of a partition offline after an I/O error; produce refuses logs in offline dirs
    (``offline_dir_of``), new logs go to online dirs, and shutdown writes neither checkpoints nor
    the clean-shutdown marker there, so the next start recovers (truncates) those logs.

    Attributes:
        had_clean_shutdown: after ``startup``, True if every log dir carried the clean-shutdown
            marker.
        offline_log_dirs: log dirs taken offline by an I/O error since startup.
    """

    def __init__(
        self,
        log_dirs: Sequence[Path | str],
        config: LogConfig,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.config = config
        self.time_ms: Callable[[], int] = time_ms or (lambda: int(time.time() * 1000))
        self._topic_configs: dict[str, LogConfig] = {}
        self._logs: dict[TopicPartitionKey, UnifiedLog] = {}
        self._logs_of_topic: dict[str, dict[int, UnifiedLog]] = {}  # topic -> partition -> log
        #: logs created (not loaded) since startup (a count for logs and tests)
        self.logs_created = 0
        self._log_dir_of: dict[TopicPartitionKey, Path] = {}
        self._logs_in_dir: dict[Path, int] = {}  # log dir -> logs in it (where new logs go)
        #: the fsyncs and writes kept off the event loop (partition.metadata,
        #: leader-epoch-checkpoint, delayed segment deletes, periodic checkpoints)
        self.file_writer = LogFileWriter()
        #: logs a background flush must visit (UnifiedLog.awaits_background_flush): an idle
        #: broker's flush pass costs nothing however many logs it holds.
        self._unflushed: set[TopicPartitionKey] = set()
        #: (checkpoint file, log dir) -> the offsets last written there: an unchanged
        #: checkpoint is not rewritten.
        self._checkpointed: dict[tuple[str, Path], dict[TopicPartitionKey, int]] = {}
        #: the logs whose config compacts (the log cleaner's candidates)
        self._compacted: dict[TopicPartitionKey, UnifiedLog] = {}
        #: a high watermark changed (or a log came or went) since the last HW checkpoint
        self._high_watermarks_changed = True
        self.had_clean_shutdown = True
        self.offline_log_dirs: set[Path] = set()
        self._started = False
        #: called with the key of each log whose start offset a retention pass moved (the
        #: broker wakes the fetches and fetch sessions of the partition: the new log start
        #: offset is news to followers and consumers).
        self.log_start_listener: Callable[[TopicPartitionKey], None] | None = None

    # -- startup / shutdown ----------------------------------------------------------------

    def startup(self) -> None:
        """Load every ``<topic>-<partition>`` directory of every log dir (recovering logs when
        the dir lacks ``.kafka_cleanshutdown``), then delete the markers. Leftover
        ``*-delete`` directories from an interrupted delete are removed.

        Raises:
            KafkaStorageError: the same partition exists in two log dirs.
        """
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            self.had_clean_shutdown &= clean
            recovery_points = read_offset_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
            start_offsets = read_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE)
            high_watermarks = read_offset_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE)
            if not clean and _holds_logs(log_dir):
                logger.warning("log dir %s was not shut down cleanly: recovering its logs", log_dir)
            for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
                if not entry.is_dir():
                    continue
                if entry.name.endswith(DELETE_DIR_SUFFIX):
                    logger.info("removing leftover deleted log %s", entry.path)
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                key = parse_topic_partition_dir(entry.name)
                if (
                    key is None or key[0] == CLUSTER_METADATA_TOPIC_NAME
                ):  # the Raft journal (controller quorum)
                    continue
                if key in self._logs:
                    raise KafkaStorageError(
                        f"partition {key[0]}-{key[1]} exists in both {self._log_dir_of[key]} and {log_dir}"
                    )
                log = UnifiedLog(
                    Path(entry.path),
                    self.config_for(key[0]),
                    recovery_point=recovery_points.get(key, 0),
                    log_start_offset=start_offsets.get(key),
                    high_watermark=high_watermarks.get(key),
                    had_clean_shutdown=clean,
                    time_ms=self.time_ms,
                    write_later=self.file_writer.write_later,
                    delete_later=self.file_writer.delete_later,
                    on_unflushed=self._note_unflushed,
                    on_high_watermark_changed=self._note_high_watermark_changed,
                    on_config_changed=self._note_config,
                )
                self._logs[key] = self._logs_of_topic.setdefault(key[0], {})[key[1]] = log
                self._log_dir_of[key] = log_dir
                self._logs_in_dir[log_dir] = self._logs_in_dir.get(log_dir, 0) + 1
                self._note_config(log)
            if clean:
                marker.unlink()
        self._started = True
        logger.info("log manager started: %d log(s) in %s", len(self._logs), [str(d) for d in self.log_dirs])

    def shutdown(self) -> None:
        """Flush (fsync) and close every log, write the checkpoint files, then the
        clean-shutdown marker in each log dir. The manager is empty afterwards."""
        for log in self._logs.values():
            try:
                log.flush()
            except OSError:
                logger.exception("failed to flush %s", log.dir)
        self.flush_file_writes()  # an older deferred checkpoint must not replace the final one
        self._write_checkpoints(sync=True)
        for log in self._logs.values():
            log.close()
        self.flush_file_writes()  # deferred partition.metadata / leader-epoch-checkpoint writes
        self.file_writer.cancel_pending_deletes()  # their .deleted files go at the next load
        self._logs.clear()
        self._logs_of_topic.clear()
        self._log_dir_of.clear()
        self._unflushed.clear()
        self._checkpointed.clear()
        self._compacted.clear()
        self._logs_in_dir.clear()
        for log_dir in self.log_dirs:
            if log_dir in self.offline_log_dirs:
                logger.warning(
                    "log dir %s is offline: no clean-shutdown marker, it recovers on restart", log_dir
                )
                continue
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            with open(marker, "w") as f:
                os.fsync(f.fileno())
        self._started = False
        logger.info("log manager shut down cleanly")

    # -- lookup / create / delete ----------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        """The log of ``topic``-``partition`` on this broker, or None."""
        return self._logs.get((topic, partition))

    # -- per-topic configs -----------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        """The topic's ``LogConfig`` (its override, else the broker default)."""
        return self._topic_configs.get(topic, self.config)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        """Use ``config`` for every partition log of ``topic`` (existing and future)."""
        self._topic_configs[topic] = config
        for log in self._logs_of_topic.get(topic, {}).values():
            log.config = config

    def remove_topic_config(self, topic: str) -> None:
        """Drop the topic's override (its logs go back to the broker default)."""
        if self._topic_configs.pop(topic, None) is not None:
            for log in self._logs_of_topic.get(topic, {}).values():
                log.config = self.config

    def _note_config(self, log: UnifiedLog) -> None:
        """At each assignment of a log's config (and its creation): keep
        :meth:`compacted_logs` current, and let the flush pass visit a log whose unflushed data
        a new ``flush.ms`` now applies to."""
        key = (log.topic, log.partition)
        if self._logs.get(key) is not log:  # a log no longer held here
            return
        if log.config.compact:
            self._compacted[key] = log
        else:
            self._compacted.pop(key, None)
        if log.awaits_background_flush():
            self._unflushed.add(key)

    def compacted_logs(self) -> dict[TopicPartitionKey, UnifiedLog]:
        """{(topic, partition): log} of the logs whose config compacts (a copy), kept as
        configs change, so the log cleaner's pass costs nothing per log that never compacts."""
        return dict(self._compacted)

    def get_or_create_log(self, topic: str, partition: int, topic_id: uuid.UUID) -> UnifiedLog:
        """The log of (topic, partition), created empty in the log dir with the fewest logs when
        missing, with the topic's config (``config_for``). Records ``topic_id`` in
        ``partition.metadata``.

        Raises:
            InconsistentTopicIdError: an existing log belongs to another topic id.
        """
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            if log.topic_id != topic_id:
                log.set_topic_id(topic_id)
            return log
        candidates = [d for d in self.log_dirs if d not in self.offline_log_dirs] or self.log_dirs
        log_dir = min(candidates, key=lambda d: self._logs_in_dir.get(d, 0))
        path = log_dir / topic_partition_dir_name(topic, partition)
        try:  # a new directory is empty: the log is created without reading anything
            os.mkdir(path)
            created = True
        except FileExistsError:  # left by an earlier incarnation: loaded as on startup
            created = False
        except FileNotFoundError:  # the log dir itself is missing (not started up)
            log_dir.mkdir(parents=True, exist_ok=True)
            os.mkdir(path)
            created = True
        log = UnifiedLog(
            path,
            self.config_for(topic),
            topic_id=topic_id,
            time_ms=self.time_ms,
            write_later=self.file_writer.write_later,
            delete_later=self.file_writer.delete_later,
            on_unflushed=self._note_unflushed,
            on_high_watermark_changed=self._note_high_watermark_changed,
            on_config_changed=self._note_config,
            created=created,
        )
        self._logs[key] = self._logs_of_topic.setdefault(topic, {})[partition] = log
        self.logs_created += created
        self._high_watermarks_changed = True
        self._note_config(log)
        self._log_dir_of[key] = log_dir
        self._logs_in_dir[log_dir] = self._logs_in_dir.get(log_dir, 0) + 1
        logger.debug("created log %s (topic id %s) in %s", log.dir.name, topic_id, log_dir)
        return log

    def _note_unflushed(self, log: UnifiedLog) -> None:
        self._unflushed.add((log.topic, log.partition))

    def _note_high_watermark_changed(self) -> None:
        self._high_watermarks_changed = True

    def flush_file_writes(self) -> None:
        """Wait until every deferred file write (``file_writer``) is done."""
        self.file_writer.flush()

    def delete_log(self, topic: str, partition: int) -> bool:
        """Close the log and remove its directory (renamed to ``<name>.<uuid>-delete`` first, so
        a crash mid-delete never leaves a half log behind). Returns False if there was none."""
        key = (topic, partition)
        log = self._logs.pop(key, None)
        of_topic = self._logs_of_topic.get(topic)
        if of_topic is not None:
            of_topic.pop(partition, None)
            if not of_topic:
                del self._logs_of_topic[topic]
        log_dir = self._log_dir_of.pop(key, None)
        self._high_watermarks_changed = True
        self._compacted.pop(key, None)
        if log_dir is not None:
            self._logs_in_dir[log_dir] -= 1
        if log is None:
            return False
        log.close()
        doomed = log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            os.replace(log.dir, doomed)
        except OSError:
            doomed = log.dir
        shutil.rmtree(doomed, ignore_errors=True)
        logger.info("deleted log %s", log.dir.name)
        return True

    # -- log dir failures ------------------------------------------------------------------

    def offline_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir of (topic, partition) if it is offline, else None."""
        log_dir = self._log_dir_of.get((topic, partition))
        return log_dir if log_dir in self.offline_log_dirs else None

    def mark_log_dir_offline(self, topic: str, partition: int, error: BaseException) -> Path | None:
        """Take the log dir of (topic, partition) offline after ``error`` (an I/O error while
        writing it) and return it (None if the partition has no log here). Idempotent."""
        log_dir = self._log_dir_of.get((topic, partition))
        if log_dir is not None and log_dir not in self.offline_log_dirs:
            self.offline_log_dirs.add(log_dir)
            logger.error(
                "log dir %s is offline after an I/O error on %s-%d: %s (produce to its %d log(s) "
                "now fails with KAFKA_STORAGE_ERROR)",
                log_dir,
                topic,
                partition,
                error,
                sum(1 for d in self._log_dir_of.values() if d == log_dir),
            )
        return log_dir

    def all_logs(self) -> dict[TopicPartitionKey, UnifiedLog]:
        """{(topic, partition): log} (a copy)."""
        return dict(self._logs)

    def topics_on_disk(self) -> dict[str, tuple[uuid.UUID, int]]:
        """{topic: (topic_id, number of partitions = highest partition on disk + 1)} for logs with
        a ``partition.metadata`` topic id, so the broker can rebuild its topic table."""
        result: dict[str, tuple[uuid.UUID, int]] = {}
        for (topic, partition), log in sorted(self._logs.items()):
            if log.topic_id is None:
                logger.warning("log %s has no topic id; not reported", log.dir.name)
                continue
            known = result.get(topic)
            if known is None:
                result[topic] = (log.topic_id, partition + 1)
            elif known[0] != log.topic_id:
                logger.warning("log %s has topic id %s, expected %s", log.dir.name, log.topic_id, known[0])
            else:
                result[topic] = (known[0], max(known[1], partition + 1))
        return result

    # -- retention -------------------------------------------------------------------------

    def cleanup_logs(self) -> int:
        """One retention pass (Kafka's ``LogManager.cleanupLogs``): every log deletes the old
        segments its config allows (``UnifiedLog.delete_old_segments``); when any went, the
        log start offsets are checkpointed. Returns the number of segments deleted. A log that
        fails (e.g. an I/O error) is logged and skipped."""
        total = 0
        for key, log in list(self._logs.items()):
            try:
                deleted = log.delete_old_segments()
            except OSError:
                logger.exception("retention failed for %s", log.dir.name)
                continue
            total += deleted
            if deleted and self.log_start_listener is not None:
                self.log_start_listener(key)
        if total:
            logger.info("retention deleted %d segment(s)", total)
            self.checkpoint_log_start_offsets()
        return total

    # -- flushing / checkpoints ------------------------------------------------------------

    def flush_all(self) -> None:
        """fsync every log (recovery points advance to the log end offsets) and write the
        recovery-point checkpoint."""
        for log in self._logs.values():
            log.flush()
        self.checkpoint_recovery_points()

    async def flush_logs_due(self) -> int:
        """Background flush (Kafka's ``kafka-log-flusher`` and post-roll ``flush-log`` tasks):
        for every log with a ``flush_target`` (``flush.ms`` passed, or segments rolled), fsync
        the files of its unflushed segments in a worker thread, then advance its recovery point
        and checkpoint the recovery points. Returns the number of logs flushed.

        Only the logs that reported unflushed data (``UnifiedLog.awaits_background_flush``) are
        visited, so the pass costs in proportion to the logs written since, not to the logs
        held; a log leaves that set once nothing of it awaits a background flush."""
        flushed = 0
        for key in list(self._unflushed):
            log = self._logs.get(key)
            if log is None:
                self._unflushed.discard(key)
                continue
            target = log.flush_target()
            if target is not None:
                paths = [path for seg in log.segments_to_flush(target) for path in seg.file_paths]
                try:
                    await asyncio.to_thread(_fsync_paths, paths)
                except OSError:
                    logger.exception("flush failed for %s", log.dir.name)
                    continue
                if self._logs.get(key) is not log:
                    continue
                log.mark_flushed(target)
                flushed += 1
            if not log.awaits_background_flush():
                self._unflushed.discard(key)
        if flushed:
            self.checkpoint_recovery_points()
        return flushed

    def checkpoint_recovery_points(self) -> None:
        """Write ``recovery-point-offset-checkpoint`` in each log dir (no fsync)."""
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT_FILE, "recovery_point", sync=False)

    def checkpoint_log_start_offsets(self) -> None:
        """Write ``log-start-offset-checkpoint`` in each log dir (no fsync)."""
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE, "log_start_offset", sync=False)

    def checkpoint_high_watermarks(self) -> None:
        """Write ``replication-offset-checkpoint`` (high watermarks) in each log dir (no fsync);
        Kafka's ReplicaManager does this every 5 s. Nothing is done (not even a snapshot) when
        no high watermark changed and no log came or went since the last call."""
        if not self._high_watermarks_changed:
            return
        self._high_watermarks_changed = False
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT_FILE, "high_watermark", sync=False)

    def _write_checkpoints(self, *, sync: bool) -> None:
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT_FILE, "recovery_point", sync=sync)
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT_FILE, "log_start_offset", sync=sync)
        self._write_checkpoint(REPLICATION_OFFSET_CHECKPOINT_FILE, "high_watermark", sync=sync)

    def _write_checkpoint(self, file_name: str, field: str, *, sync: bool) -> None:
        """Snapshot ``log.<field>`` of every log of each online log dir here (on the caller's thread);
        with ``sync`` write and fsync the file now, else write it on the file-writer thread in
        submission order (Kafka's ``OffsetCheckpointFile`` writes run on the scheduler's
        threads, never on a request path), so a periodic checkpoint of thousands of partitions
        costs the event loop only the snapshot. Without ``sync``, a file whose offsets are those
        it was last written with is left as it is (an idle broker rewrites no checkpoint)."""
        for log_dir in self.log_dirs:
            if log_dir in self.offline_log_dirs:
                continue
            offsets = self._offsets_in(log_dir, field)
            written = (file_name, log_dir)
            if sync:
                write_offset_checkpoint(log_dir / file_name, offsets, sync=True)
                self._checkpointed[written] = offsets
            elif self._checkpointed.get(written) != offsets:
                self.file_writer.write_later(
                    functools.partial(self._write_offset_checkpoint, written, offsets)
                )

    def _offsets_in(self, log_dir: Path, field: str) -> dict[TopicPartitionKey, int]:
        """{key: ``log.<field>``} of the logs in ``log_dir`` (every log when there is one dir)."""
        value = operator.attrgetter(field)
        if len(self.log_dirs) == 1:
            return {key: value(log) for key, log in self._logs.items()}
        dir_of = self._log_dir_of
        return {key: value(log) for key, log in self._logs.items() if dir_of[key] is log_dir}

    def _write_offset_checkpoint(
        self, written: tuple[str, Path], offsets: dict[TopicPartitionKey, int]
    ) -> None:
        """File-writer thread: write the checkpoint, then remember what the file holds."""
        file_name, log_dir = written
        self._checkpointed.pop(written, None)  # unknown while being replaced
        try:
            write_offset_checkpoint(log_dir / file_name, offsets)
        except OSError:
            if file_name == REPLICATION_OFFSET_CHECKPOINT_FILE:
                self._high_watermarks_changed = True  # retried at the next pass
            raise
        self._checkpointed[written] = offsets
