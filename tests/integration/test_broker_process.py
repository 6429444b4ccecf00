"""The broker as a process: startup failures (bad configuration: exit 2; a port in use, a log dir
of another node: exit 1) end with a message naming the problem and no traceback; the
LocalCluster contract."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import spark_kafkalite
from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(60)


def write_config(path: Path, log_dir: Path, listeners: str, node_id: int = 1) -> Path:
    path.write_text(f"node.id={node_id}\nlisteners={listeners}\nlog.dirs={log_dir}\n", encoding="utf-8")
    return path


def run_broker(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m broker *args`` to completion (a start-up that fails), its output captured."""
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True, text=True, timeout=30)


def test_port_in_use_exits_1_without_traceback(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = write_config(tmp_path / "b.properties", tmp_path / "logs", f"PLAINTEXT://127.0.0.1:{port}")
        result = run_broker("--config", str(config))
    assert result.returncode == 1
    assert "cannot bind" in result.stderr
    assert "Traceback" not in result.stderr


def test_raft_port_in_use_fails_startup(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = tmp_path / "b.properties"
        path.write_text(
            f"node.id=1\nlisteners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}\n"
            f"controller.listener.names=CONTROLLER\ncontroller.quorum.voters=1@127.0.0.1:{port},2@127.0.0.1:1\n"
            f"log.dirs={tmp_path / 'logs'}\n"
        )
        result = run_broker("--config", str(path))
    assert result.returncode == 1
    assert (
        f"CONTROLLER (Raft) listener 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
    )


def test_broker_exits_2_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text(
        "node.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\ncontroller.quorum.voters=1@nowhere\nlog.dirs="
        + str(tmp_path)
    )
    result = run_broker("--config", str(path))
    assert result.returncode == 2
    assert "controller.quorum.voters" in result.stderr and "Traceback" not in result.stderr


def test_cli_rejects_unknown_key_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "b.properties"
    path.write_text(f"node.id=1\nlog.dirs={tmp_path}/d\nlisteners=PLAINTEXT://127.0.0.1:0\nfoo.bar=1\n")
    result = run_broker("--config", str(path))
    assert result.returncode == 2
    assert "foo.bar" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_rejects_bad_override_value_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "b.properties"
    path.write_text(f"node.id=1\nlog.dirs={tmp_path}/d\nlisteners=PLAINTEXT://127.0.0.1:0\n")
    result = run_broker("--config", str(path), "--override", "num.partitions=-3")
    assert result.returncode == 2
    assert "num.partitions" in result.stderr
    assert "Traceback" not in result.stderr
    missing = run_broker("--config", str(tmp_path / "nope.properties"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_node_id_mismatch_with_meta_properties(tmp_path: Path) -> None:
    with LocalCluster(data_dir=tmp_path / "c") as cluster:
        log_dir = cluster.log_dir(1)
        cluster_id = dict(
            line.split("=", 1)
            for line in (log_dir / "meta.properties").read_text().splitlines()
            if "=" in line
        )["cluster.id"]
        assert len(cluster_id) == 22
    config = write_config(tmp_path / "other.properties", log_dir, "PLAINTEXT://127.0.0.1:0", node_id=2)
    result = run_broker("--config", str(config))
    assert result.returncode == 1
    assert "doesn't match the configured node.id 2" in result.stderr
    assert "Traceback" not in result.stderr


def _uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def test_local_cluster_contract(tmp_path: Path) -> None:
    assert spark_kafkalite.LocalCluster is LocalCluster
    with pytest.raises(ValueError, match="at least one broker"):
        LocalCluster(brokers=0)
    data_dir = tmp_path / "kept"
    cluster = LocalCluster(data_dir=data_dir, config_overrides={"num.partitions": "3"})
    with cluster:
        host, port = cluster.bootstrap_servers.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        endpoints = json.loads((cluster.log_dir(1) / ".broker-endpoints.json").read_text())
        assert endpoints == {
            "node_id": 1,
            "pid": cluster.pid(1),
            "listeners": {"PLAINTEXT": cluster.bootstrap_servers},
            "metrics": cluster.metrics_urls[0],  # kafkalite.metrics.listener, always on here
        }
        metrics_urls = cluster.metrics_urls
        assert cluster.is_running(1)
        # the broker process runs on uvloop wherever it is installed (pyproject: not on Windows)
        loop_line = "event loop: uvloop.Loop" if _uvloop_installed() else "event loop: asyncio."
        assert loop_line in (data_dir / "broker-1.log").read_text(encoding="utf-8")
        cluster.kill(1)
        assert not cluster.is_running(1)
        cluster.restart(1)
        assert cluster.is_running(1)
        assert cluster.bootstrap_servers == f"{host}:{port}"
        assert cluster.metrics_urls == metrics_urls  # a restarted broker keeps its metrics port
    assert not cluster.is_running(1)
    assert data_dir.exists()  # a data dir given by the caller is kept
    temp = LocalCluster().start()
    temp_dir = temp.data_dir
    temp.stop()
    assert not temp_dir.exists()  # a temporary one is removed


def test_idle_connections_are_closed(tmp_path: Path) -> None:
    with LocalCluster(
        data_dir=tmp_path / "c", config_overrides={"connections.max.idle.ms": "300"}
    ) as cluster:
        host, port = cluster.bootstrap_servers.split(":")
        with socket.create_connection((host, int(port)), timeout=5) as idle:
            idle.settimeout(5)
            assert idle.recv(1) == b""  # closed by the broker after ~0.3 s of silence


def _alive(pid: int) -> bool:
    """False once ``pid`` is gone or a zombie (an orphan's reaper may be slow)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_broker_exits_when_local_cluster_owner_dies(tmp_path: Path) -> None:
    """LocalCluster brokers must not outlive a crashed owner (they run with --exit-with-parent)."""
    script = (
        "import os, sys\n"
        "from spark_kafkalite.local_cluster import LocalCluster\n"
        f"c = LocalCluster(data_dir={str(tmp_path / 'c')!r}).start()\n"
        "print(c.pid(1), flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    broker_pid = int(result.stdout.strip())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _alive(broker_pid):
            break
        time.sleep(0.1)
    else:
        os.kill(broker_pid, signal.SIGKILL)
        pytest.fail("broker outlived its LocalCluster owner")
    assert (tmp_path / "c" / "broker-1" / ".kafka_cleanshutdown").exists()  # it shut down cleanly
