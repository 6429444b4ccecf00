"""``KafkaServer``: wires config, storage, metadata, controller and the socket server.

Startup (Kafka's ``BrokerServer.startup`` order, reduced to one node):
0. lock every log dir (``<log dir>/.lock``, held for the process lifetime; see ``dir_lock``);
1. check / write ``meta.properties`` in every log dir (cluster id, node id);
2. ``LogManager.startup()`` (recovers logs after an unclean shutdown);
3. bind the listeners (port 0 = a free port) and compute the advertised endpoints;
4. rebuild the metadata image from the logs on disk (``topics_on_disk``) via the controller;
   on one node the high watermark of every log is its log end offset;
5. write ``<first log dir>/.broker-endpoints.json`` atomically (see contracts.md).

Shutdown: stop accepting and close connections, wake parked fetches, flush and close the logs
(LogManager writes the checkpoints and the clean-shutdown marker), remove the endpoints file.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from pathlib import Path

from broker.apis.context import BrokerContext
from broker.apis.fetch_purgatory import FetchPurgatory
from broker.apis.kafka_apis import KafkaApis
from broker.config import LONG_MAX, Endpoint, KafkaConfig, parse_properties
from broker.controller.metadata_image import MetadataImage, MetadataRecord
from broker.controller.single_node_controller import SingleNodeController
from broker.controller.topic_publisher import TopicMetadataPublisher
from broker.log.dir_lock import LogDirLockError, LogDirLocks
from broker.log.log_cleaner import LogCleaner
from broker.log.log_config import LogConfig
from broker.log.log_manager import LogManager
from broker.log.log_tasks import LogTaskSettings, run_log_tasks
from broker.network.socket_server import SocketServer

__all__ = ["KafkaServer", "StartupError", "ENDPOINTS_FILE", "META_PROPERTIES_FILE", "log_config_from"]

logger = logging.getLogger(__name__)

ENDPOINTS_FILE = ".broker-endpoints.json"
META_PROPERTIES_FILE = "meta.properties"


class StartupError(RuntimeError):
    """The broker cannot start (e.g. node id mismatch in meta.properties, port in use)."""


def log_config_from(config: KafkaConfig) -> LogConfig:
    """The default ``LogConfig`` from broker keys (log.segment.bytes, log.index.interval.bytes,
    message.max.bytes, log.flush.interval.messages, log.index.size.max.bytes, log.roll.ms/hours,
    log.retention.ms/minutes/hours, log.retention.bytes, log.cleanup.policy,
    log.flush.interval.ms, min.insync.replicas, log.message.timestamp.before/after.max.ms)."""
    flush_messages = config["log.flush.interval.messages"]
    flush_ms = config.log_flush_interval_ms
    return LogConfig(
        segment_bytes=config["log.segment.bytes"],
        index_interval_bytes=config["log.index.interval.bytes"],
        max_message_bytes=config.message_max_bytes,
        flush_interval_messages=None if flush_messages >= LONG_MAX else flush_messages,
        segment_index_bytes=config["log.index.size.max.bytes"],
        segment_ms=config.log_roll_ms,
        retention_ms=config.log_retention_ms,
        retention_bytes=config["log.retention.bytes"],
        cleanup_policy=tuple(config["log.cleanup.policy"]),
        flush_ms=None if flush_ms >= LONG_MAX else flush_ms,
        min_insync_replicas=config["min.insync.replicas"],
        message_timestamp_before_max_ms=config["log.message.timestamp.before.max.ms"],
        message_timestamp_after_max_ms=config["log.message.timestamp.after.max.ms"],
    )


def log_task_settings_from(config: KafkaConfig) -> LogTaskSettings:
    """Intervals of the log background jobs (log.retention.check.interval.ms,
    log.initial.task.delay.ms, log.flush.scheduler.interval.ms capped at 1 s, log.cleaner.backoff.ms)."""
    flush_check_ms = config["log.flush.scheduler.interval.ms"]
    return LogTaskSettings(
        retention_check_interval_ms=config["log.retention.check.interval.ms"],
        initial_task_delay_ms=config["log.initial.task.delay.ms"],
        flush_check_interval_ms=min(flush_check_ms, 1000, max(config.log_flush_interval_ms, 10)),
        cleaner_backoff_ms=config.values.get("log.cleaner.backoff.ms", 15000),
    )


def _new_cluster_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: base64url, 22 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def ensure_meta_properties(log_dirs: list[Path], node_id: int) -> str:
    """Read (or create) ``meta.properties`` in every log dir and return the cluster id.

    Raises:
        StartupError: a dir belongs to another node id or the dirs disagree on the cluster id.
    """
    cluster_id: str | None = None
    missing: list[Path] = []
    for log_dir in log_dirs:
        log_dir.mkdir(parents=True, exist_ok=True)
        path = log_dir / META_PROPERTIES_FILE
        if not path.exists():
            missing.append(path)
            continue
        props = parse_properties(path.read_text(encoding="utf-8"), str(path))
        stored_node = props.get("node.id")
        if stored_node is not None and int(stored_node) != node_id:
            raise StartupError(
                f"Stored node id {stored_node} in {path} doesn't match the configured node.id {node_id}"
            )
        stored_cluster = props.get("cluster.id")
        if stored_cluster:
            if cluster_id is not None and stored_cluster != cluster_id:
                raise StartupError(
                    f"Log dirs disagree on the cluster id: {cluster_id} vs {stored_cluster} ({path})"
                )
            cluster_id = stored_cluster
    if cluster_id is None:
        cluster_id = _new_cluster_id()
    for path in missing:
        text = (
            "#\n#" + time.strftime("%a %b %d %H:%M:%S %Z %Y") + "\n"
            f"cluster.id={cluster_id}\ndirectory.id={_new_cluster_id()}\nnode.id={node_id}\nversion=1\n"
        )
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    return cluster_id


def _advertised_host(host: str) -> str:
    if host in ("", "0.0.0.0", "::"):
        return socket.getfqdn()
    return host


class KafkaServer:
    """One broker process (KRaft combined mode on a single node).

    Attributes (after :meth:`startup`):
        bound: listener name -> (host, port) actually bound.
        advertised: listener name -> (host, port) advertised to clients.
        ctx: the :class:`BrokerContext` request handlers use.
    """

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.log_manager: LogManager | None = None
        self.socket_server: SocketServer | None = None
        self.ctx: BrokerContext | None = None
        self.bound: dict[str, tuple[str, int]] = {}
        self.advertised: dict[str, tuple[str, int]] = {}
        self._background: list[asyncio.Task[None]] = []
        self._topic_publisher: TopicMetadataPublisher | None = None
        self._endpoints_file = config.log_dirs[0] / ENDPOINTS_FILE
        self._dir_locks = LogDirLocks()

    # -- metadata -------------------------------------------------------------------------------
    def _commit(self, records: list[MetadataRecord]) -> None:
        """Apply records to the image and publish the delta: create logs for new partitions led
        here, delete logs of removed topics (Kafka's ``BrokerMetadataPublisher``)."""
        assert self.ctx is not None and self.log_manager is not None
        image, delta = self.ctx.image.apply(records)
        self.ctx.image = image
        if self._topic_publisher is not None:  # topic configs + new partitions (CreatePartitions)
            self._topic_publisher.publish(image, delta)
        for topic in delta.created_topics:
            for partition in topic.partitions.values():
                if partition.leader == self.node_id or self.node_id in partition.replicas:
                    log = self.log_manager.get_or_create_log(topic.name, partition.partition, topic.topic_id)
                    log.update_high_watermark(log.log_end_offset)
        for topic in delta.deleted_topics:
            for partition in topic.partitions:
                self.log_manager.delete_log(topic.name, partition)
                self.ctx.fetch_purgatory.notify((topic.name, partition))

    # -- lifecycle ------------------------------------------------------------------------------
    async def startup(self) -> None:
        """Start everything; raises :class:`StartupError` (or OSError from binding)."""
        config = self.config
        started = time.monotonic()
        logger.info("starting broker node %d with config:\n%s", self.node_id, config.describe())
        try:
            self._dir_locks.acquire(config.log_dirs)
        except LogDirLockError as exc:
            raise StartupError(f"{exc} (log.dirs={','.join(str(d) for d in config.log_dirs)})") from None
        cluster_id = ensure_meta_properties(config.log_dirs, self.node_id)
        self._endpoints_file.unlink(missing_ok=True)
        self.log_manager = LogManager(config.log_dirs, log_config_from(config))
        self.log_manager.startup()
        self._topic_publisher = TopicMetadataPublisher.for_broker(config, self.log_manager)
        image = MetadataImage(cluster_id=cluster_id, controller_id=self.node_id)
        controller = SingleNodeController(
            self.node_id,
            lambda: self._image(),
            self._commit,
            default_num_partitions=config.num_partitions,
            default_replication_factor=config.default_replication_factor,
            delete_topic_enable=config.delete_topic_enable,
        )
        self.ctx = BrokerContext(config, self.node_id, image, controller, self.log_manager, FetchPurgatory())
        self.socket_server = SocketServer(
            config.listeners,
            KafkaApis(self.ctx),
            max_request_bytes=config.socket_request_max_bytes,
            connections_max_idle_ms=config["connections.max.idle.ms"],
            backlog=config["socket.listen.backlog.size"],
        )
        try:
            self.bound = await self.socket_server.startup(start_serving=False)
        except OSError as exc:
            await self.socket_server.shutdown()
            self.log_manager.shutdown()
            raise StartupError(f"cannot bind listeners {[str(e) for e in config.listeners]}: {exc}") from exc
        self.advertised = self._advertised_endpoints(config.advertised_listeners)
        records = controller.bootstrap_records(
            self.advertised,
            config.broker_rack,
            self.log_manager.topics_on_disk(),
            topic_configs=self._topic_publisher.stored_topic_configs(),
        )
        self._commit(records)
        for log in self.log_manager.all_logs().values():
            # One replica: everything in the log is committed (acks=all waited for nothing else).
            log.update_high_watermark(log.log_end_offset)
        self._background.append(asyncio.create_task(self._checkpoint_loop(), name="log-checkpoints"))
        cleaner = LogCleaner(self.log_manager) if config["log.cleaner.enable"] else None
        self._background.append(
            asyncio.create_task(
                run_log_tasks(self.log_manager, log_task_settings_from(config), cleaner and cleaner.clean_once),
                name="log-tasks",
            )
        )
        await self.socket_server.start_serving()
        self._write_endpoints_file()
        logger.info(
            "broker node %d started in %.0f ms: cluster %s, %d topic(s), listeners %s",
            self.node_id,
            (time.monotonic() - started) * 1000,
            cluster_id,
            len(self.ctx.image.topics),
            {name: f"{h}:{p}" for name, (h, p) in self.advertised.items()},
        )

    def _image(self) -> MetadataImage:
        assert self.ctx is not None
        return self.ctx.image

    def _advertised_endpoints(self, advertised: list[Endpoint]) -> dict[str, tuple[str, int]]:
        out: dict[str, tuple[str, int]] = {}
        for endpoint in advertised:
            bound_host, bound_port = self.bound[endpoint.listener_name]
            port = endpoint.port or bound_port
            out[endpoint.listener_name] = (_advertised_host(endpoint.host or bound_host), port)
        return out

    def _write_endpoints_file(self) -> None:
        payload = {
            "node_id": self.node_id,
            "pid": os.getpid(),
            "listeners": {name: f"{host}:{port}" for name, (host, port) in self.advertised.items()},
        }
        tmp = self._endpoints_file.with_name(self._endpoints_file.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(tmp, self._endpoints_file)

    async def _checkpoint_loop(self) -> None:
        """Periodic work of Kafka's LogManager / ReplicaManager schedulers: HW checkpoints
        (replica.high.watermark.checkpoint.interval.ms), recovery-point checkpoints
        (log.flush.offset.checkpoint.interval.ms). Time-based flushes (per-log ``flush.ms``,
        default log.flush.interval.ms) are a job of :func:`broker.log.log_tasks.run_log_tasks`."""
        assert self.log_manager is not None
        config = self.config
        hw_s = config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        rp_s = max(config["log.flush.offset.checkpoint.interval.ms"], 1) / 1000
        last_hw = last_rp = time.monotonic()
        tick = min(x for x in (hw_s, rp_s, 1.0) if x > 0)
        while True:
            await asyncio.sleep(tick)
            now = time.monotonic()
            try:
                if now - last_hw >= hw_s:
                    self.log_manager.checkpoint_high_watermarks()
                    last_hw = now
                if now - last_rp >= rp_s:
                    self.log_manager.checkpoint_recovery_points()
                    self.log_manager.checkpoint_log_start_offsets()
                    last_rp = now
            except OSError:
                logger.exception("checkpoint failed")

    async def shutdown(self) -> None:
        """Clean shutdown; safe to call after a partial startup."""
        logger.info("shutting down broker node %d", self.node_id)
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._background.clear()
        if self.ctx is not None:
            self.ctx.fetch_purgatory.notify_all()
        if self.socket_server is not None:
            await self.socket_server.shutdown()
        if self.log_manager is not None:
            self.log_manager.shutdown()
            self.log_manager = None
        if self._dir_locks.held:
            # Only the owner of the log dirs may touch their files (another broker may hold them).
            with contextlib.suppress(OSError):
                self._endpoints_file.unlink(missing_ok=True)
            self._dir_locks.release()
        logger.info("broker node %d shut down cleanly", self.node_id)
