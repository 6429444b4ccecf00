"""``KafkaServer``: wires config, storage, metadata, controller and the socket server.

Startup (Kafka's ``BrokerServer.startup`` order, reduced to one node):
0. lock every log dir (``<log dir>/.lock``, held for the process lifetime; see ``dir_lock``);
1. check / write ``meta.properties`` in every log dir (cluster id, node id);
2. ``LogManager.startup()`` (recovers logs after an unclean shutdown);
3. bind the listeners (port 0 = a free port) and compute the advertised endpoints;
4. rebuild the metadata image from the logs on disk (``topics_on_disk``) via the controller;
   on one node the high watermark of every log is its log end offset;
5. write ``<first log dir>/.broker-endpoints.json`` atomically (see contracts.md).

Multi-node (``controller.quorum.voters`` set; KRaft combined mode): the cluster id of a new
node is derived from the voters (every node agrees without a format step); instead of step 4 the
broker starts its controller quorum node (:class:`~broker.controller.quorum_controller.QuorumController`:
Raft journal replay, then catch-up), registers (broker epoch), and waits until the controller
unfences it (caught up with the metadata log) before it serves clients; metadata then arrives as
committed records or whole snapshots, applied by the
:class:`~broker.metadata_publisher.BrokerMetadataPublisher`. Logs on disk are not
declared committed (the ReplicaManager decides high watermarks). Shutdown starts with a
controlled shutdown (leaderships move away first) and leaves the quorum before the logs close.

Shutdown: stop accepting and close connections, wake parked fetches, flush and close the logs
(LogManager writes the checkpoints and the clean-shutdown marker), remove the endpoints file.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from broker.apis.context import BrokerContext
from broker.apis.init_producer_id import producer_id_manager
from broker.apis.kafka_apis import KafkaApis
from broker.config import KafkaConfig, log_config_from, log_task_settings_from
from broker.controller.acl_store import ACLS_FILE
from broker.controller.controller import Controller
from broker.controller.metadata_image import MetadataImage
from broker.controller.producer_id_block import PRODUCER_ID_BLOCK_FILE
from broker.controller.publish_queue import MetadataPublishQueue
from broker.controller.quorum import METADATA_DIR_NAME
from broker.controller.quorum_controller import QuorumController
from broker.controller.replication_control import ControllerSettings
from broker.controller.resource_config_store import RESOURCE_CONFIGS_FILE
from broker.controller.scram_control import ScramUpsertion, scram_credential
from broker.controller.scram_store import SCRAM_FILE
from broker.controller.single_node_controller import SingleNodeController
from broker.controller.topic_publisher import TopicMetadataPublisher
from broker.coordinator.group.service import GroupCoordinatorService
from broker.coordinator.transaction.service import TransactionCoordinatorService
from broker.dynamic_broker_config import DynamicBrokerConfig
from broker.event_loop_monitor import EventLoopMonitor
from broker.gc_pauses import GcPauseStats
from broker.log.dir_lock import LogDirLockError, LogDirLocks
from broker.log.log_cleaner import LogCleaner
from broker.log.log_manager import LogManager
from broker.log.log_tasks import run_log_tasks
from broker.meta_properties import (
    MetaPropertiesError,
    ensure_meta_properties,
    quorum_cluster_id,
    quorum_password,
)
from broker.metadata_publisher import BrokerMetadataPublisher
from broker.network.endpoint import Endpoint
from broker.network.socket_server import SocketServer
from broker.prometheus.broker_collector import BrokerCollector, BrokerSources
from broker.prometheus.consumer_lag import ConsumerLagCollector
from broker.prometheus.endpoint import MetricsEndpoint, parse_listener
from broker.replication.delayed_fetch import FetchPurgatory
from broker.replication.replica_manager import ReplicaManager
from broker.security.authorizer import authorizer_for
from broker.tasks import await_cancelled
from spark_kafkalite.atomic_file import write_atomically
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["KafkaServer", "StartupError", "ENDPOINTS_FILE"]

logger = logging.getLogger(__name__)

ENDPOINTS_FILE = ".broker-endpoints.json"
LOOP_LAG_FILE = "loop-lag.json"
"""The event loop's lag figures (``LoopLagStats.snapshot``), in the first log dir."""
LOOP_LAG_FILE_INTERVAL_S = 5.0
#: a large metadata delta is applied for at most this long per event-loop step
PUBLISH_SLICE_MS = 20.0


class StartupError(RuntimeError):
    """The broker cannot start (e.g. node id mismatch in meta.properties, port in use)."""


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

    def __init__(self, config: KafkaConfig, add_scram: Sequence[ScramUpsertion] = ()) -> None:
        self.config = config
        self._add_scram = tuple(add_scram)
        self.node_id = config.node_id
        self.log_manager: LogManager | None = None
        self.socket_server: SocketServer | None = None
        self.ctx: BrokerContext | None = None
        self.bound: dict[str, tuple[str, int]] = {}
        self.advertised: dict[str, tuple[str, int]] = {}
        self._background: list[asyncio.Task[None]] = []
        self.metadata_publisher: BrokerMetadataPublisher | None = None
        self._endpoints_file = config.log_dirs[0] / ENDPOINTS_FILE
        self._dir_locks = LogDirLocks()
        self._publish_queue = MetadataPublishQueue(PUBLISH_SLICE_MS)
        self._group_coordinator: GroupCoordinatorService | None = None
        self._transaction_coordinator: TransactionCoordinatorService | None = None
        #: the event loop's lag and stalls (see broker.event_loop_monitor); started by startup()
        self.loop_monitor = EventLoopMonitor(config["kafkalite.event.loop.stall.threshold.ms"])
        #: the cyclic collector's pauses (see broker.gc_pauses), written with the loop's figures
        self.gc_pauses = GcPauseStats()
        self._loop_lag_file = config.log_dirs[0] / LOOP_LAG_FILE
        self._log_cleaner: LogCleaner | None = None
        #: the /metrics listener (``kafkalite.metrics.listener``), None when not configured
        self.metrics_endpoint: MetricsEndpoint | None = None
        self._consumer_lag: ConsumerLagCollector | None = None

    # -- the parts built by startup ----------------------------------------------------------------
    def _context(self) -> BrokerContext:
        """The running broker's context. Raises ``RuntimeError`` before startup built it."""
        if self.ctx is None:
            raise RuntimeError("the broker is not started: it has no metadata context yet")
        return self.ctx

    def _logs(self) -> LogManager:
        """The running broker's log manager. Raises ``RuntimeError`` before startup or after shutdown."""
        if self.log_manager is None:
            raise RuntimeError("the broker is not running: it has no log manager")
        return self.log_manager

    # -- lifecycle ------------------------------------------------------------------------------
    async def startup(self) -> None:
        """Start everything; raises :class:`StartupError` (or OSError from binding)."""
        config = self.config
        started = time.monotonic()
        logger.info("starting broker node %d with config:\n%s", self.node_id, config.describe())
        self.loop_monitor.start()
        self.gc_pauses.install()
        try:
            self._dir_locks.acquire(config.log_dirs)
        except LogDirLockError as exc:
            raise StartupError(f"{exc} (log.dirs={','.join(str(d) for d in config.log_dirs)})") from None
        quorum = config.quorum_enabled
        try:
            cluster_id = ensure_meta_properties(
                config.log_dirs, self.node_id, quorum_cluster_id(config.quorum_voters) if quorum else None
            )
        except MetaPropertiesError as exc:
            raise StartupError(str(exc)) from None
        self._endpoints_file.unlink(missing_ok=True)
        self._dynamic_config = DynamicBrokerConfig(config, self.node_id)
        self.log_manager = LogManager(config.log_dirs, log_config_from(config))
        self.log_manager.startup()
        topic_publisher = TopicMetadataPublisher.for_broker(config, self.log_manager)
        publisher = self.metadata_publisher = BrokerMetadataPublisher(
            self._context,
            self.log_manager,
            self._publish_queue,
            topic_publisher,
            self._dynamic_config,
            connection_quotas=lambda: self.socket_server.quotas if self.socket_server is not None else None,
            on_topics_deleted=self._on_topics_deleted,
        )
        image = MetadataImage(cluster_id=cluster_id, controller_id=-1 if quorum else self.node_id)
        controller: Controller
        if quorum:
            controller = self._quorum_controller(cluster_id, publisher)
        else:
            log_manager = self.log_manager
            controller = SingleNodeController(
                self.node_id,
                lambda: self._image(),
                publisher.commit,
                default_num_partitions=config.num_partitions,
                default_replication_factor=config.default_replication_factor,
                delete_topic_enable=config.delete_topic_enable,
                topics_on_disk=log_manager.topics_on_disk,
                stored_topic_configs=topic_publisher.stored_topic_configs,
                producer_id_block_file=config.log_dirs[0] / PRODUCER_ID_BLOCK_FILE,
                acls_file=config.metadata_log_dir / ACLS_FILE,
                scram_file=config.metadata_log_dir / SCRAM_FILE,
                resource_configs_file=config.metadata_log_dir / RESOURCE_CONFIGS_FILE,
            )
        fetch_purgatory = FetchPurgatory()
        self.log_manager.log_start_listener = fetch_purgatory.notify
        replica_manager = ReplicaManager(
            config,
            self.node_id,
            self.log_manager,
            fetch_purgatory,
            image=self._image,
            controller=lambda: self.ctx.controller if self.ctx is not None else None,
        )
        self.ctx = BrokerContext(
            config,
            self.node_id,
            image,
            controller,
            self.log_manager,
            fetch_purgatory,
            replica_manager,
            request_workers=ThreadPoolExecutor(config["num.io.threads"], thread_name_prefix="request-worker"),
            metadata_publish_queue=self._publish_queue,
            dynamic_config=self._dynamic_config,
        )
        self.ctx.authorizer = authorizer_for(config.values, lambda: self._image().acls)
        apis = KafkaApis(self.ctx)
        self.socket_server = SocketServer(
            config.broker_listeners,  # the CONTROLLER listener is the Raft port (quorum.py)
            apis,
            error_responder=apis.error_response_frame,
            max_request_bytes=config.socket_request_max_bytes,
            connections_max_idle_ms=config["connections.max.idle.ms"],
            backlog=config["socket.listen.backlog.size"],
            max_connections=config["max.connections"],
            max_connections_per_ip=config["max.connections.per.ip"],
            max_connections_per_ip_overrides=config.max_connections_per_ip_overrides,
            queued_max_requests=config["queued.max.requests"],
            queued_max_request_bytes=config["queued.max.request.bytes"],
            request_receive_timeout_ms=config["kafkalite.socket.request.receive.timeout.ms"],
            inter_broker_listener=config.inter_broker_listener_name,
            security=config.listener_security,
            credentials=lambda user, mechanism: scram_credential(self._image(), user, mechanism),
        )
        try:
            self.bound = await self.socket_server.startup(start_serving=False)
        except OSError as exc:
            await self.socket_server.shutdown()
            self.log_manager.shutdown()
            raise StartupError(f"cannot bind listeners {[str(e) for e in config.listeners]}: {exc}") from exc
        self.advertised = self._advertised_endpoints(config.advertised_listeners)
        # Quorum: metadata comes from the Raft log (journal replay, then the leader); logs on
        # disk are not assumed committed (ReplicaManager decides). The controller registers this
        # broker and waits until it is unfenced (caught up with the metadata log), as Kafka's
        # broker does; the image is built silently until then and publishers get it whole at
        # the end. Single node: the bootstrap records (topics on disk) are applied at once.
        empty = self.ctx.image
        publisher.catching_up = controller.replays_metadata_log
        try:
            await controller.startup(self.advertised, config.broker_rack)
        except OSError as exc:
            raise StartupError(str(exc)) from exc
        if publisher.catching_up:
            publisher.finish_catch_up(empty)  # not serving yet: the whole image at once
        controller.start_background()
        await self._bootstrap_scram_credentials(controller)
        # High watermarks: Partition.make_leader (ISR of one: HW = LEO; else from the
        # replication-offset-checkpoint until the followers catch up).
        self.ctx.replica_manager.startup()
        # Group coordinator: loads the __consumer_offsets partitions led here (leadership listener).
        self._group_coordinator = GroupCoordinatorService(self.ctx)
        self._group_coordinator.startup()
        # Transaction coordinator: loads the __transaction_state partitions led here.
        self._transaction_coordinator = TransactionCoordinatorService(
            self.ctx, producer_id_manager(self.ctx).generate_producer_id
        )
        self._transaction_coordinator.startup()
        self._background.append(asyncio.create_task(self._checkpoint_loop(), name="log-checkpoints"))
        self._background.append(asyncio.create_task(self._loop_lag_file_loop(), name="loop-lag-file"))
        cleaner = self._log_cleaner = LogCleaner(self.log_manager) if config["log.cleaner.enable"] else None
        self._background.append(
            asyncio.create_task(
                run_log_tasks(
                    self.log_manager,
                    log_task_settings_from(config),
                    cleaner.clean_once if cleaner is not None else None,
                ),
                name="log-tasks",
            )
        )
        await self.socket_server.start_serving()
        self._start_metrics_endpoint(apis)
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
        ctx = self._context()
        return ctx.image

    def _on_topics_deleted(self, names: set[str]) -> None:
        """Deleted topics' committed offsets go too (the group coordinator, once started)."""
        if self._group_coordinator is not None:
            self._group_coordinator.on_topics_deleted(names)

    async def _bootstrap_scram_credentials(self, controller: Controller) -> None:
        """``--add-scram`` credentials (Kafka's ``kafka-storage format --add-scram``, KIP-900):
        written through the controller only for users that have no credential of that mechanism
        yet, so a restart never overwrites one changed since with AlterUserScramCredentials.

        Raises:
            StartupError: the controller refused one (e.g. too few iterations).
        """
        image = self._image()
        missing = [u for u in self._add_scram if (u.name, u.mechanism) not in image.scram_credentials]
        if not missing:
            return
        for user, code, message in await controller.alter_user_scram_credentials((), missing):
            if code != ErrorCode.none:
                raise StartupError(f"--add-scram for {user!r} failed: {code.name.upper()} {message or ''}")
        logger.info("added SCRAM credential(s) for %s", sorted({u.name for u in missing}))

    def _quorum_controller(self, cluster_id: str, publisher: BrokerMetadataPublisher) -> QuorumController:
        config = self.config
        metadata_dir = config.metadata_log_dir / METADATA_DIR_NAME
        return QuorumController(
            self.node_id,
            config.quorum_voters,
            metadata_dir,
            cluster_id,
            ControllerSettings(
                config.num_partitions,
                config.default_replication_factor,
                config.delete_topic_enable,
                bool(config["unclean.leader.election.enable"]),
            ),
            self._image,
            publisher.commit,
            publisher.reset_image,
            election_timeout_ms=config["controller.quorum.election.timeout.ms"],
            password=quorum_password(config, cluster_id),
            heartbeat_interval_ms=config["broker.heartbeat.interval.ms"],
            session_timeout_ms=config["broker.session.timeout.ms"],
            request_timeout_ms=config["controller.quorum.request.timeout.ms"],
            auto_rebalance=bool(config["auto.leader.rebalance.enable"]),
            rebalance_interval_s=float(config["leader.imbalance.check.interval.seconds"]),
            imbalance_percentage=config["leader.imbalance.per.broker.percentage"],
            bind_address=self._controller_bind_address(),
        )

    def _controller_bind_address(self) -> tuple[str, int] | None:
        """The CONTROLLER listener's host:port (the voter entry's host when the listener has none)."""
        endpoint = self.config.controller_endpoint
        if endpoint is None:
            return None
        voter_host = self.config.quorum_voters[self.node_id][0]
        return endpoint.host or voter_host, endpoint.port

    def _advertised_endpoints(self, advertised: list[Endpoint]) -> dict[str, tuple[str, int]]:
        out: dict[str, tuple[str, int]] = {}
        for endpoint in advertised:
            bound_host, bound_port = self.bound[endpoint.listener_name]
            port = endpoint.port or bound_port
            out[endpoint.listener_name] = (_advertised_host(endpoint.host or bound_host), port)
        return out

    def _start_metrics_endpoint(self, apis: KafkaApis) -> None:
        """Serve /metrics on ``kafkalite.metrics.listener`` when it is set.

        Raises:
            StartupError: the listener cannot be bound.
        """
        listener = self.config["kafkalite.metrics.listener"]
        if not listener or self.metadata_publisher is None:
            return
        sources = BrokerSources(
            self.node_id,
            lambda: self.ctx,
            apis,
            lambda: self.socket_server,
            lambda: self._log_cleaner,
            self.metadata_publisher.controller_stats,
            threading.get_native_id(),  # (called on the event loop)
        )
        self._consumer_lag = ConsumerLagCollector(self.node_id, lambda: self.ctx, asyncio.get_running_loop())
        endpoint = MetricsEndpoint([BrokerCollector(sources), self._consumer_lag])
        try:
            host, port = parse_listener(listener)
            endpoint.start(host, port)
        except (OSError, ValueError) as exc:
            raise StartupError(
                f"cannot serve metrics on kafkalite.metrics.listener={listener}: {exc}"
            ) from exc
        self.metrics_endpoint = endpoint

    def _write_endpoints_file(self) -> None:
        payload: dict[str, object] = {
            "node_id": self.node_id,
            "pid": os.getpid(),
            "listeners": {name: f"{host}:{port}" for name, (host, port) in self.advertised.items()},
        }
        if self.metrics_endpoint is not None and self.metrics_endpoint.bound is not None:
            host, port = self.metrics_endpoint.bound
            payload["metrics"] = f"http://{host}:{port}/metrics"
        write_atomically(self._endpoints_file, json.dumps(payload), tmp_suffix=f".{os.getpid()}.tmp")

    async def _checkpoint_loop(self) -> None:
        """Periodic work of Kafka's LogManager / ReplicaManager schedulers: HW checkpoints
        (replica.high.watermark.checkpoint.interval.ms), recovery-point checkpoints
        (log.flush.offset.checkpoint.interval.ms). Time-based flushes (per-log ``flush.ms``,
        default log.flush.interval.ms) are a job of :func:`broker.log.log_tasks.run_log_tasks`."""
        log_manager = self._logs()
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
                    log_manager.checkpoint_high_watermarks()
                    last_hw = now
                if now - last_rp >= rp_s:
                    log_manager.checkpoint_recovery_points()
                    log_manager.checkpoint_log_start_offsets()
                    last_rp = now
            except OSError:
                logger.exception("checkpoint failed")

    async def _loop_lag_file_loop(self) -> None:
        """Rewrite ``loop-lag.json`` (the event loop's lag figures, for ``kafkalite cluster
        status``) every few seconds while they change, off the event loop (a file replace waits
        for the file system's journal: a second or more while thousands of new logs are fsynced)."""
        written: dict[str, Any] | None = None
        while True:
            figures = {**self.loop_monitor.stats.snapshot(), "gc": self.gc_pauses.snapshot()}
            if figures != written:
                try:
                    await asyncio.to_thread(
                        write_atomically, self._loop_lag_file, json.dumps(figures), fsync=False
                    )
                    written = figures
                except OSError as exc:
                    logger.debug("cannot write %s: %s", self._loop_lag_file, exc)
            await asyncio.sleep(LOOP_LAG_FILE_INTERVAL_S)

    async def shutdown(self) -> None:
        """Clean shutdown; safe to call after a partial startup."""
        logger.info("shutting down broker node %d", self.node_id)
        if self.metrics_endpoint is not None:  # (its serving thread ends on its own within 0.5 s)
            self.metrics_endpoint.stop()
            self.metrics_endpoint = None
        if self._consumer_lag is not None:
            await self._consumer_lag.close()
        controller = self.ctx.controller if self.ctx is not None else None
        if controller is not None:
            # Kafka's controlled shutdown: leaderships move away while we still serve fetches.
            await controller.controlled_shutdown(timeout_s=3.0)
        for task in self._background:
            task.cancel()
        for task in self._background:
            await await_cancelled(task, f"background task {task.get_name()}")
        self._background.clear()
        if self._transaction_coordinator is not None:
            await self._transaction_coordinator.shutdown()
            self._transaction_coordinator = None
        if self._group_coordinator is not None:
            await self._group_coordinator.shutdown()
            self._group_coordinator = None
        await self._publish_queue.close()
        if self.ctx is not None:
            await self.ctx.replica_manager.shutdown()
            self.ctx.fetch_purgatory.notify_all()
        if self.socket_server is not None:
            await self.socket_server.shutdown()
        if controller is not None:
            await controller.stop()  # no metadata is applied to the logs after this
        if self.log_manager is not None:
            self.log_manager.shutdown()
            self.log_manager = None
        if self.ctx is not None:
            self.ctx.request_workers.shutdown(wait=False, cancel_futures=True)
        self.loop_monitor.stop()
        self.gc_pauses.uninstall()
        if self._dir_locks.held:
            # Only the owner of the log dirs may touch their files (another broker may hold them).
            with contextlib.suppress(OSError):
                self._endpoints_file.unlink(missing_ok=True)
            self._dir_locks.release()
        logger.info("broker node %d shut down cleanly", self.node_id)
