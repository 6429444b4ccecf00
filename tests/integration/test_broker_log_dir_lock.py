"""Broker process ownership of its log dirs (``<log dir>/.lock``) and the shipped config's
advertised listeners (port 0 advertises the bound port)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from spark_kafkalite.local_cluster import LocalCluster

pytestmark = pytest.mark.timeout(60)

REPO = Path(__file__).resolve().parents[2]


def list_brokers(bootstrap: str) -> dict[int, tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=10)
    return {b.id: (b.host, b.port) for b in metadata.brokers.values()}


def test_second_broker_on_same_log_dir_is_refused(tmp_path: Path) -> None:
    with LocalCluster(data_dir=tmp_path / "c") as cluster:
        log_dir = cluster.log_dir(1)
        endpoints = log_dir / ".broker-endpoints.json"
        before = endpoints.read_text()
        config = tmp_path / "second.properties"
        config.write_text(
            f"node.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={log_dir}\n", encoding="utf-8"
        )
        result = subprocess.run(
            [sys.executable, "-m", "broker", "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 1
        assert "Failed to acquire lock on file .lock" in result.stderr
        assert str(log_dir) in result.stderr and "log.dirs" in result.stderr
        assert "Traceback" not in result.stderr
        # The first broker's files are untouched and it keeps serving.
        assert endpoints.read_text() == before
        assert not (log_dir / ".kafka_cleanshutdown").exists()
        assert list_brokers(cluster.bootstrap_servers) == {
            1: (cluster.bootstrap_servers.split(":")[0], int(cluster.bootstrap_servers.split(":")[1]))
        }
        cluster.kill(1)  # SIGKILL releases the lock: a restart on the same dir works
        cluster.restart(1)
        assert cluster.is_running(1)
        assert 1 in list_brokers(cluster.bootstrap_servers)


def test_shipped_config_with_port_0_advertises_the_bound_port(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    endpoints = log_dir / ".broker-endpoints.json"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "broker",
            "--config",
            str(REPO / "conf" / "broker.properties"),
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"log.dirs={log_dir}",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not endpoints.exists():
            assert process.poll() is None, "broker exited"
            assert time.monotonic() < deadline, "broker did not start"
            time.sleep(0.05)
        host, port_text = json.loads(endpoints.read_text())["listeners"]["PLAINTEXT"].rsplit(":", 1)
        port = int(port_text)
        assert port not in (0, 9092)
        with socket.create_connection((host, port), timeout=5):
            pass  # bound there
        assert list_brokers(f"{host}:{port}") == {1: (host, port)}
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=20)
    assert process.returncode == 0
    assert "not shut down cleanly" not in stderr  # a brand-new log dir is not a crash
