"""``LocalCluster``: broker processes on 127.0.0.1 free ports, for tests, examples and demos.

Each broker runs as ``sys.executable -m broker --config <data_dir>/broker-<id>.properties`` with
its log dir ``<data_dir>/broker-<id>/`` and its output in ``<data_dir>/broker-<id>.log``
(``local_broker_process.BrokerProcess``). A broker is ready when it has written
``<log dir>/.broker-endpoints.json`` (with its own pid) and a TCP connection to the advertised
port succeeds.

``LocalCluster(brokers=1)`` runs a standalone broker (no Raft: the fastest startup).
``LocalCluster(brokers=N)`` with N > 1 runs N nodes in KRaft combined mode: every node is a broker
and a controller quorum voter; the CONTROLLER (Raft) ports are picked up front, the PLAINTEXT
ports are free ports chosen by the brokers (kept across :meth:`restart`). Multi-node defaults
(override any with ``config_overrides``) are tuned for fast tests:

- ``controller.quorum.election.timeout.ms=500`` (Kafka: 1000): a new active controller within
  0.5-1.0 s of losing the old one;
- ``broker.heartbeat.interval.ms=250`` (Kafka: 2000) and ``broker.session.timeout.ms=2000``
  (Kafka: 9000): a dead or paused broker is fenced and its leaderships move after about 2 s
  (kill -9 of a leader -> first acknowledged produce on the new leader: p50 ~2.6 s in
  ``bench/failover.py``, issue #14; the broker's own defaults stay Kafka's);
- ``default.replication.factor``, ``offsets.topic.replication.factor`` and
  ``transaction.state.log.replication.factor`` = min(N, 3), ``transaction.state.log.min.isr`` =
  min(N, 2) (single node: 1 and 1; both internal topics get 4 partitions).

A quorum needs a majority: with 3 nodes one may be down, with 5 two.

Fault injection: :meth:`kill` (SIGKILL), :meth:`pause` / :meth:`resume` (SIGSTOP / SIGCONT),
:meth:`terminate` (SIGTERM: controlled shutdown), :meth:`restart`, :meth:`start_nodes` (bring
back several stopped nodes at once). Cluster state (Metadata requests): :meth:`metadata`,
:meth:`controller_id`, :meth:`partition`, :meth:`wait_for_leader`, :meth:`wait_for_isr`,
:meth:`wait_until`.

Security (issue #13): ``LocalCluster(security="SASL_SSL")`` (or ``"SSL"``, ``"SASL_PLAINTEXT"``,
``True`` for SASL_SSL, or a :class:`~spark_kafkalite.local_security.ClusterSecurity`) serves
clients on a listener of that protocol only, with a throwaway CA under ``<data_dir>/tls/`` and an
admin user (PLAIN and SCRAM-SHA-256/512); :meth:`LocalCluster.client_config` gives the client
settings (``kafka.``-prefixed for the Spark format). Brokers of a multi-node cluster replicate over
the same listener (TLS, SASL PLAIN as the admin user).

Example::

    with LocalCluster(brokers=3) as cluster:
        bootstrap = cluster.bootstrap_servers   # "127.0.0.1:54321,127.0.0.1:54322,..."
        cluster.kill(cluster.controller_id())

    with LocalCluster(security="SASL_SSL") as cluster:
        producer = KafkaProducer(cluster.client_config())
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import signal
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from spark_kafkalite.local_broker_process import BrokerProcess, free_port, free_ports
from spark_kafkalite.local_security import ClusterSecurity

__all__ = ["ClusterSecurity", "LocalCluster", "free_port", "free_ports"]

_LISTENER = "PLAINTEXT"
_CONTROLLER = "CONTROLLER"

#: Config of multi-node LocalClusters (see the module docstring).
MULTI_NODE_DEFAULTS = {
    "controller.quorum.election.timeout.ms": "500",
    "broker.heartbeat.interval.ms": "250",
    "broker.session.timeout.ms": "2000",
}


class LocalCluster:
    """Broker processes on this machine.

    Args:
        brokers: number of brokers (>= 1); more than one forms a controller quorum of all of them.
        data_dir: where logs, configs and broker output go; a temporary directory (removed by
            :meth:`stop`) when None.
        config_overrides: broker config keys applied to every broker (``--override``).
        startup_timeout_s: how long :meth:`start` / :meth:`restart` wait for readiness.
        exit_with_parent: brokers shut down when this process exits (default); False (with
            :meth:`detach`) leaves them running, as ``kafkalite cluster up`` does.
        ports: node id -> (client listener port, CONTROLLER port) to reuse (0 = pick one).
        security: serve clients over ``SSL`` / ``SASL_PLAINTEXT`` / ``SASL_SSL`` (a protocol
            name, ``True`` for SASL_SSL, or a ``ClusterSecurity``); None: PLAINTEXT.
        racks: node id -> its ``broker.rack`` (KIP-392 fetching from the closest replica also
            needs ``replica.selector.class`` in ``config_overrides``).

    Attributes:
        bootstrap_servers: ``"127.0.0.1:port[,...]"`` (valid after :meth:`start`).
        metrics_urls: every broker's Prometheus ``/metrics`` URL, in node-id order.
        data_dir: the data directory.
        security: the ``ClusterSecurity`` or None.
    """

    def __init__(
        self,
        brokers: int = 1,
        data_dir: str | os.PathLike[str] | None = None,
        config_overrides: dict[str, str] | None = None,
        startup_timeout_s: float = 30.0,
        exit_with_parent: bool = True,
        ports: Mapping[int, tuple[int, int]] | None = None,
        security: ClusterSecurity | str | bool | None = None,
        racks: Mapping[int, str] | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"LocalCluster(brokers={brokers}): at least one broker is needed")
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="kafkalite-")) if data_dir is None else Path(data_dir)
        self.config_overrides = dict(config_overrides or {})
        self.racks = dict(racks or {})
        self.startup_timeout_s = startup_timeout_s
        self._nodes = {node_id: BrokerProcess(node_id, self.data_dir) for node_id in range(1, brokers + 1)}
        self.num_brokers = brokers
        self.exit_with_parent = exit_with_parent
        if brokers > 1:
            for node, port in zip(self._nodes.values(), free_ports(brokers), strict=True):
                node.controller_port = port
        for node_id, (port, controller_port) in (ports or {}).items():
            node = self._node(node_id)
            node.port = port or node.port
            node.controller_port = controller_port or node.controller_port
        self.security = ClusterSecurity.of(security) if security not in (None, False) else None
        self.listener = self.security.listener if self.security is not None else _LISTENER
        self.bootstrap_servers = ""
        # Brokers run in their own session (Ctrl-C of the parent does not reach them), so make
        # sure they do not outlive this interpreter.
        self._atexit = functools.partial(_kill_at_exit, weakref.ref(self))
        atexit.register(self._atexit)

    # -- public API ----------------------------------------------------------------------------
    def start(self) -> LocalCluster:
        """Start every broker and wait until all are ready.

        Raises:
            RuntimeError: a broker exited or was not ready within ``startup_timeout_s`` (the
                message includes the end of its output).
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            for node in self._nodes.values():
                self._spawn(node)
            for node in self._nodes.values():
                node.wait_ready(self.listener, self.startup_timeout_s)
        except BaseException:
            self._terminate_all(timeout_s=5.0)
            raise
        self._update_bootstrap()
        if self.security is not None:
            try:
                self.security.create_scram_user(self.data_dir, self.bootstrap_servers, self.startup_timeout_s)
            except BaseException:
                self._terminate_all(timeout_s=5.0)
                raise
        return self

    def client_config(self, prefix: str = "") -> dict[str, Any]:
        """Settings for a client of this cluster: ``bootstrap.servers`` plus, when secured,
        ``security.protocol``, ``ssl.ca.location``, ``sasl.mechanism``, ``sasl.username`` and
        ``sasl.password``. ``prefix="kafka."`` gives the ``kafkalite`` Spark format's options."""
        if self.security is None:
            config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        else:
            config = self.security.client_config(self.data_dir, self.bootstrap_servers)
        return {prefix + key: value for key, value in config.items()}

    def stop(self) -> None:
        """SIGTERM every broker, wait (SIGKILL after 10 s), and remove the data dir if it is a
        temporary one this cluster created."""
        self._terminate_all(timeout_s=10.0)
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self, node_id: int) -> None:
        """SIGKILL broker ``node_id`` (a crash: no clean-shutdown marker, no controlled shutdown)."""
        node = self._node(node_id)
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait()
        node.paused = False

    def detach(self) -> None:
        """Leave the brokers running when this process exits (no atexit kill); use with
        ``exit_with_parent=False``."""
        atexit.unregister(self._atexit)

    def ports(self, node_id: int) -> tuple[int, int]:
        """(PLAINTEXT port, CONTROLLER port; 0 for a single node) of broker ``node_id``."""
        node = self._node(node_id)
        return node.port, node.controller_port

    def pause(self, node_id: int) -> None:
        """SIGSTOP broker ``node_id`` (it stops answering but keeps its sockets open)."""
        node = self._node(node_id)
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGSTOP)
            node.paused = True

    def resume(self, node_id: int) -> None:
        """SIGCONT broker ``node_id`` after :meth:`pause`."""
        node = self._node(node_id)
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGCONT)
        node.paused = False

    @property
    def metrics_urls(self) -> list[str]:
        """``http://127.0.0.1:<port>/metrics`` of every broker's Prometheus endpoint
        (``kafkalite.metrics.listener``), in node-id order (valid after :meth:`start`; a restarted
        broker keeps its port)."""
        return [f"http://127.0.0.1:{self._nodes[n].metrics_port}/metrics" for n in self.node_ids]

    @property
    def node_ids(self) -> list[int]:
        """Ids of all brokers (running or not)."""
        return sorted(self._nodes)

    def running_node_ids(self) -> list[int]:
        """Ids of the brokers whose process is alive and not paused."""
        return [n for n, node in sorted(self._nodes.items()) if self.is_running(n) and not node.paused]

    def broker_address(self, node_id: int) -> str:
        """``host:port`` of broker ``node_id``'s PLAINTEXT listener."""
        node = self._node(node_id)
        return f"{node.host}:{node.port}"

    # -- cluster state (Metadata requests to a running broker) ---------------------------------
    def metadata(self, timeout_s: float = 10.0, node_id: int | None = None) -> Any:
        """A :class:`spark_kafkalite.client.metadata.Cluster` (brokers, controller id, partitions
        with leader / replicas / ISR / offline replicas) from one running broker (``node_id`` or
        any).

        Raises:
            RuntimeError: no broker answered within ``timeout_s``.
        """
        from spark_kafkalite.client.admin import KafkaAdminClient

        targets = [node_id] if node_id is not None else self.running_node_ids()
        if not targets:
            raise RuntimeError("no running broker to ask for metadata")
        bootstrap = ",".join(self.broker_address(n) for n in targets)
        admin = KafkaAdminClient(
            {
                **self.client_config(),
                "bootstrap.servers": bootstrap,
                "default.api.timeout.ms": int(timeout_s * 1000),
                "request.timeout.ms": 5000,
            }
        )
        try:
            return admin._describe(None, timeout_s * 1000)
        except Exception as exc:
            raise RuntimeError(f"cannot fetch metadata from {bootstrap}: {exc}") from exc
        finally:
            admin.close()

    def controller_id(self, timeout_s: float = 10.0) -> int:
        """The active controller's node id (waits until a running broker reports one)."""
        return int(self.wait_until(lambda c: c.controller_id if c.controller_id >= 0 else None, timeout_s))

    def partition(self, topic: str, partition: int, timeout_s: float = 10.0) -> Any:
        """The :class:`~spark_kafkalite.client.metadata.PartitionMetadata` of a partition (leader,
        leader_epoch, replicas, isr, offline_replicas), or None when unknown."""
        return self.metadata(timeout_s).partitions.get(topic, {}).get(partition)

    def wait_until(
        self, predicate: Callable[[Any], Any], timeout_s: float = 30.0, interval_s: float = 0.1
    ) -> Any:
        """Poll metadata until ``predicate(cluster)`` returns a truthy value; returns it.

        Raises:
            TimeoutError: not within ``timeout_s`` (the message shows the last metadata).
        """
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while True:
            try:
                last = self.metadata(timeout_s=max(1.0, min(5.0, deadline - time.monotonic())))
                value = predicate(last)
                if value:
                    return value
            except RuntimeError as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise TimeoutError(f"condition not met within {timeout_s:.1f} s; last metadata: {last!r}")
            time.sleep(interval_s)

    def wait_for_leader(
        self, topic: str, partition: int, not_in: Iterable[int] = (), timeout_s: float = 30.0
    ) -> int:
        """Wait until ``topic``-``partition`` has a leader that is not in ``not_in``; returns it."""
        excluded = set(not_in)

        def leader(cluster: Any) -> int | None:
            p = cluster.partitions.get(topic, {}).get(partition)
            if p is None or p.leader < 0 or p.leader in excluded:
                return None
            return int(p.leader)

        return int(self.wait_until(leader, timeout_s))

    def wait_for_isr(self, topic: str, partition: int, size: int, timeout_s: float = 30.0) -> tuple[int, ...]:
        """Wait until every running broker's metadata shows ``topic``-``partition`` with the
        same leader and an ISR of ``size`` brokers; returns the ISR.

        Every broker, not any one: metadata is eventually consistent, and a broker that was
        paused or cut off keeps answering from its old image (for instance as the partition's
        leader, with its old high watermark) until it has caught up with the controller, so a
        client bootstrapping right after this returns would otherwise be told a stale leader.

        Raises:
            TimeoutError: not within ``timeout_s`` (the message shows each broker's last view).
        """
        deadline = time.monotonic() + timeout_s
        views: dict[int, Any] = {}
        while True:
            views = {}
            for node_id in self.running_node_ids():
                try:
                    cluster = self.metadata(
                        timeout_s=max(1.0, min(5.0, deadline - time.monotonic())), node_id=node_id
                    )
                except RuntimeError as exc:
                    views[node_id] = exc
                    continue
                p = cluster.partitions.get(topic, {}).get(partition)
                views[node_id] = None if p is None else (p.leader, tuple(sorted(p.isr)))
            seen = set(views.values())
            if len(seen) == 1:
                view = seen.pop()
                if isinstance(view, tuple) and len(view[1]) == size:
                    return view[1]
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{topic}-{partition}: no ISR of {size} on every broker within {timeout_s:.1f} s; "
                    f"(leader, ISR) per broker: {views!r}"
                )
            time.sleep(0.1)

    def terminate(self, node_id: int, timeout_s: float = 10.0) -> int | None:
        """SIGTERM broker ``node_id`` and wait for it (SIGKILL after ``timeout_s``); returns its
        exit code (None if it was not running)."""
        node = self._node(node_id)
        return node.terminate(timeout_s)

    def start_nodes(self, *node_ids: int) -> None:
        """Start the given stopped brokers (all stopped ones when none given) together, on their
        ports and data dirs, and wait until each is ready; running ones are left alone. Use it
        to bring back several nodes of a quorum at once (one alone cannot get ready without a
        majority)."""
        wanted = [self._node(n) for n in (node_ids or tuple(self._nodes))]
        started = [node for node in wanted if not self.is_running(node.node_id)]
        try:
            for node in started:
                self._spawn(node)
            for node in started:
                node.wait_ready(self.listener, self.startup_timeout_s)
        except BaseException:
            for node in started:
                node.terminate(5.0)
            raise
        self._update_bootstrap()

    def restart(self, node_id: int) -> None:
        """Stop broker ``node_id`` if it runs (SIGTERM), then start it again on the same port
        and data dir and wait until it is ready."""
        node = self._node(node_id)
        if node.paused:
            self.resume(node_id)
        node.terminate(10.0)
        self._spawn(node)
        try:
            node.wait_ready(self.listener, self.startup_timeout_s)
        except BaseException:
            node.terminate(5.0)
            raise
        self._update_bootstrap()

    def is_running(self, node_id: int) -> bool:
        """True while broker ``node_id``'s process is alive (paused or not)."""
        return self._node(node_id).is_running()

    def pid(self, node_id: int) -> int | None:
        """The process id of broker ``node_id``, or None before its first start."""
        node = self._node(node_id)
        return node.process.pid if node.process is not None else None

    def log_dir(self, node_id: int) -> Path:
        """The log dir (``log.dirs``) of broker ``node_id``."""
        return self._node(node_id).log_dir

    def output(self, node_id: int) -> str:
        """Everything broker ``node_id`` wrote to stdout/stderr so far."""
        return self._node(node_id).output()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _repr_html_(self) -> str:
        """Jupyter's view: brokers, partitions with their ISR, consumer-group lag
        (``spark_kafkalite.notebook_views.cluster_html``)."""
        from spark_kafkalite.notebook_views import cluster_html

        return cluster_html(self)

    def __repr__(self) -> str:
        return f"LocalCluster(bootstrap_servers={self.bootstrap_servers!r}, data_dir={str(self.data_dir)!r})"

    # -- internals -----------------------------------------------------------------------------
    def _node(self, node_id: int) -> BrokerProcess:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise ValueError(f"no broker with node id {node_id} (have {sorted(self._nodes)})") from None

    def _update_bootstrap(self) -> None:
        self.bootstrap_servers = ",".join(f"{n.host}:{n.port}" for n in self._nodes.values() if n.port)

    def _broker_config(self, node: BrokerProcess) -> dict[str, str]:
        """The broker config file's properties for ``node`` (``--override`` entries come on top)."""
        listener = f"{self.listener}://127.0.0.1:{node.port}"
        props = {
            "node.id": str(node.node_id),
            "process.roles": "broker,controller",
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(node.log_dir),
            "kafkalite.metrics.listener": f"127.0.0.1:{node.metrics_port}",
            "num.partitions": "1",
            "default.replication.factor": "1",
            # One broker hosts every group (Kafka's default of 3 would refuse __consumer_offsets).
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "group.initial.rebalance.delay.ms": "0",
            # Likewise __transaction_state (Kafka: 50 partitions, replication 3, min ISR 2).
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
        }
        if self.num_brokers > 1:
            rf = str(min(self.num_brokers, 3))
            props.update(
                {
                    "listeners": f"{listener},{_CONTROLLER}://127.0.0.1:{node.controller_port}",
                    "controller.listener.names": _CONTROLLER,
                    "controller.quorum.voters": ",".join(
                        f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self._nodes.values()
                    ),
                    "inter.broker.listener.name": self.listener,
                    "default.replication.factor": rf,
                    "offsets.topic.replication.factor": rf,
                    "transaction.state.log.replication.factor": rf,
                    "transaction.state.log.min.isr": str(min(self.num_brokers, 3, 2)),
                    **MULTI_NODE_DEFAULTS,
                }
            )
        if node.node_id in self.racks:
            props["broker.rack"] = self.racks[node.node_id]
        if self.security is not None:
            props.update(self.security.broker_config(self.data_dir, node.node_id))
        return props

    def _spawn(self, node: BrokerProcess) -> None:
        node.spawn(self._broker_config(node), self.config_overrides, self.exit_with_parent)

    def _terminate_all(self, timeout_s: float) -> None:
        for node in self._nodes.values():
            if node.paused and node.process is not None and node.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    node.process.send_signal(signal.SIGCONT)
                node.paused = False
        for node in self._nodes.values():
            if node.process is not None and node.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    node.process.send_signal(signal.SIGTERM)
        for node in self._nodes.values():
            node.terminate(timeout_s)


def _kill_at_exit(ref: weakref.ref[LocalCluster]) -> None:
    cluster = ref()
    if cluster is not None:
        cluster._terminate_all(timeout_s=5.0)
