"""``kafkalite cluster up | status | down``: a multi-broker cluster on this machine.

::

    kafkalite cluster up     [--brokers 3] [--data-dir DIR] [--config KEY=VALUE ...]
                             [--secure [--security-protocol SASL_SSL|SSL|SASL_PLAINTEXT]]
    kafkalite cluster status [--data-dir DIR | --bootstrap-server HOST:PORT] [--partitions]
    kafkalite cluster down   [--data-dir DIR]

``up`` starts ``--brokers`` broker processes in the background (KRaft combined mode: each one
is a broker and a controller quorum voter; :class:`~spark_kafkalite.local_cluster.LocalCluster`
writes their configs), waits until all are registered and unfenced, and records them in
``DIR/cluster.json`` (pids, ports). Brokers keep running after the command exits; their logs are
``DIR/broker-<id>.log``. Running ``up`` again on the same DIR reuses its ports and data.
With several brokers, ``up`` also has the coordinators create ``__consumer_offsets`` and
``__transaction_state`` (one FindCoordinator each, as the first consumer group and the first
transactional producer would) while every broker is registered: Kafka creates them lazily with
``offsets.topic.replication.factor`` / ``transaction.state.log.replication.factor`` replicas and
refuses while fewer brokers are live, so a cluster whose first group or transaction arrives after
a broker died would have no coordinator until that broker came back.

``status`` shows the nodes (process alive, address, Raft port, whether the controller lists the
broker as live, its event loop's worst lag and stall episodes), the active controller, and every
partition with leader, replicas, ISR and offline replicas, plus the number of under-replicated
partitions (ISR smaller than replicas) and the leaders per broker, as ``rich`` tables. Above
``PARTITION_ROWS_MAX`` partitions it prints one summary row per topic (partitions, replication
factor, under-replicated, without a leader, leaders per broker) and only the partitions without
a leader; ``--partitions`` lists every one. ``down`` stops every broker (SIGTERM: controlled
shutdown; SIGKILL after ``--timeout`` s) and marks ``cluster.json`` stopped (data and ports stay for the next ``up``).

``up --secure`` (issue #13) serves clients over SASL_SSL only (or ``--security-protocol``): a
throwaway CA and broker certificates under ``DIR/tls/`` (made with ``cryptography``), an ``admin``
user with a random password (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512), and the client settings in
``DIR/client.properties`` (mode 0600: ``security.protocol``, ``ssl.ca.location``,
``sasl.mechanism=SCRAM-SHA-512``, ``sasl.username``, ``sasl.password``), printed and usable as
``--command-config`` or by confluent-kafka. ``up`` again on the same DIR keeps the CA and the
password; ``status`` reads ``client.properties`` by itself.

DIR defaults to ``$KAFKALITE_CLUSTER_DIR`` or ``~/.kafkalite/cluster``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from spark_kafkalite.atomic_file import write_atomically
from spark_kafkalite.cli.cluster_status import fetch_metadata, loop_lag_summary, print_partitions, status_of
from spark_kafkalite.cli.common import command_config
from spark_kafkalite.cli.topics import PARTITION_ROWS_MAX

__all__ = ["add_cluster_parser", "cmd_cluster", "STATE_FILE", "CLIENT_PROPERTIES"]

STATE_FILE = "cluster.json"
CLIENT_PROPERTIES = "client.properties"
LOOP_LAG_FILE = "loop-lag.json"  # written by each broker in its first log dir
_ENV_DIR = "KAFKALITE_CLUSTER_DIR"
"""Above this many partitions ``status`` prints a summary per topic instead of one row each."""


class ClusterCliError(Exception):
    """A user-facing error (printed as one line by ``kafkalite``)."""


def _default_dir() -> Path:
    return Path(os.environ.get(_ENV_DIR) or Path.home() / ".kafkalite" / "cluster")


def add_cluster_parser(commands: Any) -> None:
    """Register ``cluster up|status|down`` on the ``kafkalite`` subparsers."""
    cluster = commands.add_parser("cluster", help="start, inspect or stop a local multi-broker cluster")
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start brokers in the background")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument(
        "--data-dir", type=Path, help=f"data directory (default ${_ENV_DIR} or ~/.kafkalite/cluster)"
    )
    up.add_argument(
        "--config", action="append", metavar="KEY=VALUE", help="broker config for every node (repeatable)"
    )
    up.add_argument(
        "--timeout", type=float, default=60.0, help="seconds to wait for the brokers (default 60)"
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="TLS + SASL: a throwaway CA, an admin user, the client settings in DIR/client.properties",
    )
    up.add_argument(
        "--security-protocol",
        choices=("SASL_SSL", "SSL", "SASL_PLAINTEXT"),
        default="SASL_SSL",
        help="the client listener's protocol with --secure (default SASL_SSL)",
    )
    status = actions.add_parser("status", help="nodes, active controller, partitions")
    status.add_argument("--data-dir", type=Path)
    status.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="inspect any running cluster (e.g. started with python -m broker --config conf/broker-N.properties)",
    )
    status.add_argument(
        "--command-config", metavar="FILE", help="properties file of client configs (with --bootstrap-server)"
    )
    status.add_argument(
        "--partitions",
        action="store_true",
        help=f"list every partition (default: only up to {PARTITION_ROWS_MAX}; a summary per topic above)",
    )
    down = actions.add_parser("down", help="stop the brokers")
    down.add_argument("--data-dir", type=Path)
    down.add_argument("--timeout", type=float, default=15.0, help="seconds before SIGKILL (default 15)")


def _state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def _read_state(data_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads(_state_path(data_dir).read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ClusterCliError(f"cannot read {_state_path(data_dir)}: {exc}") from None


def _write_state(data_dir: Path, state: dict[str, Any]) -> None:
    """Replace cluster.json atomically and durably (the one writer of the state file, through
    :func:`~spark_kafkalite.atomic_file.write_atomically`): a crash leaves the old or the new
    state, never a torn file that 'cluster down' cannot read."""
    write_atomically(_state_path(data_dir), json.dumps(state, indent=1))


def _alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie (a killed broker whose parent, the
    exited ``cluster up``, was reparented to an init that does not reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True  # no procfs: trust the signal check
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _running_nodes(state: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(n): info for n, info in state["nodes"].items() if _alive(int(info["pid"]))}


def cmd_cluster(args: argparse.Namespace, out: Any) -> int:
    """Run ``kafkalite cluster ...``; returns the exit status."""
    data_dir = (args.data_dir or _default_dir()).expanduser().resolve()
    if args.cluster_command == "up":
        return _up(args, data_dir, out)
    if args.cluster_command == "status":
        if args.bootstrap_server:
            return status_of(args.bootstrap_server, out, command_config(args), args.partitions)
        return _status(data_dir, out, args.partitions)
    return _down(args, data_dir, out)


# -------------------------------------------------------------------------------------------- up
def _up(args: argparse.Namespace, data_dir: Path, out: Any) -> int:
    from spark_kafkalite.local_cluster import LocalCluster

    if args.brokers < 1:
        raise ClusterCliError("--brokers must be at least 1")
    state = _read_state(data_dir)
    ports: dict[int, tuple[int, int]] = {}
    if state is not None and not state.get("stopped"):
        running = _running_nodes(state)
        if running:
            raise ClusterCliError(
                f"a cluster is already running in {data_dir} (nodes {sorted(running)}); "
                "use 'kafkalite cluster status' or 'kafkalite cluster down'"
            )
    if state is not None and int(state.get("brokers", 0)) == args.brokers:
        ports = {int(n): (int(i["port"]), int(i["controller_port"])) for n, i in state["nodes"].items()}
    overrides: dict[str, str] = {}
    for pair in args.config or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ClusterCliError(f"--config {pair!r} is not KEY=VALUE")
        overrides[key.strip()] = value
    data_dir.mkdir(parents=True, exist_ok=True)
    security = _security(args, data_dir)
    cluster = LocalCluster(
        brokers=args.brokers,
        data_dir=data_dir,
        config_overrides=overrides,
        startup_timeout_s=args.timeout,
        exit_with_parent=False,
        ports=ports,
        security=security,
    )
    cluster.start()  # raises RuntimeError (with the broker's output) when a broker fails
    cluster.detach()
    nodes = {}
    for node_id in cluster.node_ids:
        port, controller_port = cluster.ports(node_id)
        nodes[str(node_id)] = {
            "pid": cluster.pid(node_id),
            "host": "127.0.0.1",
            "port": port,
            "controller_port": controller_port,
            "log_dir": str(cluster.log_dir(node_id)),
            "output": str(data_dir / f"broker-{node_id}.log"),
        }
    payload: dict[str, Any] = {
        "brokers": args.brokers,
        "bootstrap_servers": cluster.bootstrap_servers,
        "nodes": nodes,
    }
    if security is not None:
        payload["security_protocol"] = security.protocol
    _write_state(data_dir, payload)
    client = cluster.client_config()
    if security is not None:
        _write_client_properties(data_dir, client)
    if args.brokers > 1:  # after cluster.json: on failure, 'cluster down' still finds the brokers
        _create_offsets_topic(client, timeout_s=args.timeout)
        _create_transaction_state_topic(client, timeout_s=args.timeout)
    out.write(f"cluster of {args.brokers} broker(s) running in {data_dir}\n")
    out.write(f"bootstrap servers: {cluster.bootstrap_servers}\n")
    out.write(f"export KAFKALITE_BOOTSTRAP_SERVERS={cluster.bootstrap_servers}\n")
    if security is not None:
        path = data_dir / CLIENT_PROPERTIES
        out.write(
            f"client config ({security.protocol}; also in {path}, pass it as --command-config {path}):\n"
        )
        for key, value in client.items():
            out.write(f"  {key}={value}\n")
    return 0


def _security(args: argparse.Namespace, data_dir: Path) -> Any:
    """The ``ClusterSecurity`` of ``up --secure`` (None without), reusing the admin password of
    an earlier ``up`` in ``data_dir`` (its SCRAM credential is in the cluster metadata)."""
    if not args.secure:
        return None
    from spark_kafkalite.local_cluster import ClusterSecurity

    previous = read_client_properties(data_dir)
    password = previous.get("sasl.password")
    if password:
        return ClusterSecurity(args.security_protocol, password=password)
    return ClusterSecurity(args.security_protocol)


def _write_client_properties(data_dir: Path, config: dict[str, Any]) -> None:
    """``DIR/client.properties`` (0600): Java properties, one ``key=value`` per line."""
    path = data_dir / CLIENT_PROPERTIES
    text = "# written by kafkalite cluster up --secure\n" + "".join(f"{k}={v}\n" for k, v in config.items())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, 0o600)


def read_client_properties(data_dir: Path) -> dict[str, str]:
    """The settings of ``DIR/client.properties`` ({} when there is none)."""
    try:
        lines = (data_dir / CLIENT_PROPERTIES).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    config: dict[str, str] = {}
    for line in lines:
        if line.strip() and not line.lstrip().startswith(("#", "!")):
            key, _, value = line.partition("=")
            config[key.strip()] = value.strip()
    return config


def _create_offsets_topic(client: dict[str, Any], timeout_s: float) -> None:
    """Have the brokers create ``__consumer_offsets`` now: FindCoordinator (through OffsetFetch
    of a group that commits nothing) makes the coordinator create it, retrying
    COORDINATOR_NOT_AVAILABLE until every broker is registered (Kafka's GroupCoordinator
    behaviour; KIP-115 forbids creating it with fewer replicas).

    Raises:
        ClusterCliError: the offsets topic did not come up within ``timeout_s``.
    """
    from spark_kafkalite.client.admin import KafkaAdminClient
    from spark_kafkalite.protocol.errors import KafkaError

    admin = KafkaAdminClient(client)
    try:
        admin.list_consumer_group_offsets("kafkalite-cluster-up", timeout_ms=timeout_s * 1000)
    except KafkaError as exc:
        raise ClusterCliError(f"the brokers are up but __consumer_offsets was not created: {exc}") from exc
    finally:
        admin.close()


def _create_transaction_state_topic(client: dict[str, Any], timeout_s: float) -> None:
    """Have the brokers create ``__transaction_state`` now: FindCoordinator key type 1 (through
    DescribeTransactions of an id nobody uses) makes the transaction coordinator create it,
    retrying COORDINATOR_NOT_AVAILABLE until every broker is registered (Kafka's
    ``KafkaApis.getCoordinator``; KIP-115 forbids creating it with fewer replicas). The coordinator
    then answers TRANSACTIONAL_ID_NOT_FOUND for the unused id, which is the expected outcome.

    Raises:
        ClusterCliError: the transaction state topic did not come up within ``timeout_s``.
    """
    from spark_kafkalite.client.admin import KafkaAdminClient
    from spark_kafkalite.protocol.errors import KafkaError, TransactionalIdNotFoundError

    admin = KafkaAdminClient(client)
    try:
        admin.describe_transactions(["kafkalite-cluster-up"], timeout_ms=timeout_s * 1000)
    except TransactionalIdNotFoundError:
        pass  # the coordinator answered: the topic exists and has a leader
    except KafkaError as exc:
        raise ClusterCliError(f"the brokers are up but __transaction_state was not created: {exc}") from exc
    finally:
        admin.close()


# ---------------------------------------------------------------------------------------- status
def _status(data_dir: Path, out: Any, every_partition: bool = False) -> int:
    from rich.console import Console
    from rich.table import Table

    state = _read_state(data_dir)
    if state is None:
        raise ClusterCliError(f"no cluster in {data_dir} (start one with 'kafkalite cluster up')")
    if state.get("stopped"):
        raise ClusterCliError(f"the cluster in {data_dir} is stopped (start it with 'kafkalite cluster up')")
    console = Console(file=out, width=120)
    running = _running_nodes(state)
    metadata = None
    error = ""
    if running:
        metadata, error = fetch_metadata(
            ",".join(f"{i['host']}:{i['port']}" for i in running.values()),
            read_client_properties(data_dir) if state.get("security_protocol") else None,
        )
    nodes = Table(title=f"Nodes ({data_dir})")
    for column in ("node", "process", "address", "raft port", "broker", "role", "event loop"):
        nodes.add_column(column)
    controller = metadata.controller_id if metadata is not None else -1
    for node_id, info in sorted((int(n), i) for n, i in state["nodes"].items()):
        alive = node_id in running
        live = metadata is not None and node_id in metadata.nodes
        nodes.add_row(
            str(node_id),
            f"running (pid {info['pid']})" if alive else "[red]not running[/red]",
            f"{info['host']}:{info['port']}",
            str(info["controller_port"] or "-"),
            "[green]live[/green]" if live else ("[yellow]fenced[/yellow]" if alive else "[red]offline[/red]"),
            "[bold]active controller[/bold]" if node_id == controller else "voter",
            loop_lag_summary(data_dir / f"broker-{node_id}" / LOOP_LAG_FILE) if alive else "-",
        )
    console.print(nodes)
    if metadata is None:
        console.print(f"[red]no broker answered[/red] {error}".rstrip())
        return 1
    code = print_partitions(console, metadata, every_partition)
    console.print(f"bootstrap servers: {state['bootstrap_servers']}")
    return code


# ------------------------------------------------------------------------------------------ down
def _down(args: argparse.Namespace, data_dir: Path, out: Any) -> int:
    state = _read_state(data_dir)
    if state is None:
        raise ClusterCliError(f"no cluster in {data_dir}")
    if state.get("stopped"):
        out.write(f"the cluster in {data_dir} is already stopped\n")
        return 0
    running = _running_nodes(state)
    for info in running.values():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(info["pid"]), signal.SIGCONT)  # a paused broker must see the SIGTERM
            os.kill(int(info["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and any(_alive(int(i["pid"])) for i in running.values()):
        time.sleep(0.1)
    killed = []
    for node_id, info in running.items():
        if _alive(int(info["pid"])):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(info["pid"]), signal.SIGKILL)
            killed.append(node_id)
    state["stopped"] = True
    _write_state(data_dir, state)
    message = f"stopped {len(running)} broker(s) in {data_dir}"
    if killed:
        message += f" (killed {sorted(killed)} after {args.timeout:.0f} s)"
    out.write(message + "\n")
    return 0
