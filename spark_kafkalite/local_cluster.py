"""``LocalCluster``: broker processes on 127.0.0.1 free ports, for tests, examples and demos.

Each broker runs as ``sys.executable -m broker --config <data_dir>/broker-<id>.properties`` with
its log dir ``<data_dir>/broker-<id>/`` and its output in ``<data_dir>/broker-<id>.log``. A broker
is ready when it has written ``<log dir>/.broker-endpoints.json`` (with its own pid) and a TCP
connection to the advertised port succeeds.

Only ``brokers=1`` is supported in this release: replication and the controller quorum arrive
with multi-broker clusters.

Example::

    with LocalCluster() as cluster:
        bootstrap = cluster.bootstrap_servers   # "127.0.0.1:54321"
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from types import TracebackType

__all__ = ["LocalCluster"]

_ENDPOINTS_FILE = ".broker-endpoints.json"
_LISTENER = "PLAINTEXT"


class _Node:
    def __init__(self, node_id: int, data_dir: Path) -> None:
        self.node_id = node_id
        self.log_dir = data_dir / f"broker-{node_id}"
        self.config_path = data_dir / f"broker-{node_id}.properties"
        self.output_path = data_dir / f"broker-{node_id}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.host = "127.0.0.1"


class LocalCluster:
    """Broker processes on this machine.

    Args:
        brokers: number of brokers; only 1 is supported for now (ValueError otherwise).
        data_dir: where logs, configs and broker output go; a temporary directory (removed by
            :meth:`stop`) when None.
        config_overrides: broker config keys applied to every broker (``--override``).
        startup_timeout_s: how long :meth:`start` / :meth:`restart` wait for readiness.

    Attributes:
        bootstrap_servers: ``"127.0.0.1:port[,...]"`` (valid after :meth:`start`).
        data_dir: the data directory.
    """

    def __init__(
        self,
        brokers: int = 1,
        data_dir: str | os.PathLike[str] | None = None,
        config_overrides: dict[str, str] | None = None,
        startup_timeout_s: float = 30.0,
    ) -> None:
        if brokers != 1:
            raise ValueError(
                f"LocalCluster(brokers={brokers}): only single-broker clusters are supported so far "
                "(multi-broker clusters need replication and the controller quorum, a later issue)"
            )
        self._owns_data_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="kafkalite-")) if data_dir is None else Path(data_dir)
        self.config_overrides = dict(config_overrides or {})
        self.startup_timeout_s = startup_timeout_s
        self._nodes = {node_id: _Node(node_id, self.data_dir) for node_id in range(1, brokers + 1)}
        self.bootstrap_servers = ""
        # Brokers run in their own session (Ctrl-C of the parent does not reach them), so make
        # sure they do not outlive this interpreter.
        atexit.register(_kill_at_exit, weakref.ref(self))

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
                self._wait_ready(node)
        except BaseException:
            self._terminate_all(timeout_s=5.0)
            raise
        self._update_bootstrap()
        return self

    def stop(self) -> None:
        """SIGTERM every broker, wait (SIGKILL after 10 s), and remove the data dir if it is a
        temporary one this cluster created."""
        self._terminate_all(timeout_s=10.0)
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def kill(self, node_id: int) -> None:
        """SIGKILL broker ``node_id`` (a crash: no clean-shutdown marker)."""
        node = self._node(node_id)
        if node.process is not None and node.process.poll() is None:
            node.process.send_signal(signal.SIGKILL)
            node.process.wait()

    def terminate(self, node_id: int, timeout_s: float = 10.0) -> int | None:
        """SIGTERM broker ``node_id`` and wait for it (SIGKILL after ``timeout_s``); returns its
        exit code (None if it was not running)."""
        node = self._node(node_id)
        return self._terminate(node, timeout_s)

    def restart(self, node_id: int) -> None:
        """Stop broker ``node_id`` if it runs (SIGTERM), then start it again on the same port
        and data dir and wait until it is ready."""
        node = self._node(node_id)
        self._terminate(node, 10.0)
        self._spawn(node)
        try:
            self._wait_ready(node)
        except BaseException:
            self._terminate(node, 5.0)
            raise
        self._update_bootstrap()

    def is_running(self, node_id: int) -> bool:
        node = self._node(node_id)
        return node.process is not None and node.process.poll() is None

    def pid(self, node_id: int) -> int | None:
        node = self._node(node_id)
        return node.process.pid if node.process is not None else None

    def log_dir(self, node_id: int) -> Path:
        """The log dir (``log.dirs``) of broker ``node_id``."""
        return self._node(node_id).log_dir

    def output(self, node_id: int) -> str:
        """Everything broker ``node_id`` wrote to stdout/stderr so far."""
        try:
            return self._node(node_id).output_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalCluster(bootstrap_servers={self.bootstrap_servers!r}, data_dir={str(self.data_dir)!r})"

    # -- internals -----------------------------------------------------------------------------
    def _node(self, node_id: int) -> _Node:
        try:
            return self._nodes[node_id]
        except KeyError:
            raise ValueError(f"no broker with node id {node_id} (have {sorted(self._nodes)})") from None

    def _update_bootstrap(self) -> None:
        self.bootstrap_servers = ",".join(f"{n.host}:{n.port}" for n in self._nodes.values())

    def _write_config(self, node: _Node) -> None:
        listener = f"{_LISTENER}://127.0.0.1:{node.port}"
        props = {
            "node.id": str(node.node_id),
            "process.roles": "broker,controller",
            "listeners": listener,
            "advertised.listeners": listener,
            "log.dirs": str(node.log_dir),
            "num.partitions": "1",
            "default.replication.factor": "1",
        }
        text = "# generated by spark_kafkalite.LocalCluster\n" + "".join(
            f"{key}={_escape(value)}\n" for key, value in props.items()
        )
        node.config_path.write_text(text, encoding="utf-8")

    def _spawn(self, node: _Node) -> None:
        node.log_dir.mkdir(parents=True, exist_ok=True)
        (node.log_dir / _ENDPOINTS_FILE).unlink(missing_ok=True)
        self._write_config(node)
        cmd = [sys.executable, "-m", "broker", "--config", str(node.config_path), "--exit-with-parent"]
        for key, value in self.config_overrides.items():
            cmd += ["--override", f"{key}={value}"]
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        with open(node.output_path, "ab") as out:
            node.process = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def _wait_ready(self, node: _Node) -> None:
        assert node.process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        path = node.log_dir / _ENDPOINTS_FILE
        delay = 0.005
        while True:
            code = node.process.poll()
            if code is not None:
                raise RuntimeError(
                    f"broker {node.node_id} exited with code {code} during startup:\n{self._tail(node)}"
                )
            endpoint = _read_endpoint(path, node.process.pid)
            if endpoint is not None and _can_connect(*endpoint):
                node.host, node.port = endpoint
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"broker {node.node_id} not ready after {self.startup_timeout_s:.0f} s:\n{self._tail(node)}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _tail(self, node: _Node, lines: int = 40) -> str:
        return "\n".join(self.output(node.node_id).splitlines()[-lines:])

    def _terminate(self, node: _Node, timeout_s: float) -> int | None:
        process = node.process
        if process is None:
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def _terminate_all(self, timeout_s: float) -> None:
        for node in self._nodes.values():
            if node.process is not None and node.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    node.process.send_signal(signal.SIGTERM)
        for node in self._nodes.values():
            self._terminate(node, timeout_s)


def _kill_at_exit(ref: weakref.ref[LocalCluster]) -> None:
    cluster = ref()
    if cluster is not None:
        cluster._terminate_all(timeout_s=5.0)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\")


def _read_endpoint(path: Path, pid: int) -> tuple[str, int] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("pid") != pid:
        return None
    address = data.get("listeners", {}).get(_LISTENER)
    if not address:
        return None
    host, _, port = address.rpartition(":")
    return host, int(port)


def _can_connect(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False
