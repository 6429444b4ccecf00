"""``kafkalite cluster up | status | down`` with real background broker processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest

from spark_kafkalite.cli.cluster import _alive

pytestmark = pytest.mark.timeout(180)


def kafkalite(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spark_kafkalite.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def _kill_leftovers(data_dir: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        state = json.loads((data_dir / "cluster.json").read_text())
        for info in state["nodes"].values():
            with contextlib.suppress(ProcessLookupError, TypeError):
                os.kill(int(info["pid"]), signal.SIGKILL)


def test_cluster_up_status_down(tmp_path: Path) -> None:
    data_dir = tmp_path / "cluster"
    try:
        up = kafkalite("cluster", "up", "--brokers", "3", "--data-dir", str(data_dir))
        assert up.returncode == 0, up.stderr
        state = json.loads((data_dir / "cluster.json").read_text())
        assert sorted(state["nodes"]) == ["1", "2", "3"]
        bootstrap = state["bootstrap_servers"]
        assert bootstrap in up.stdout
        again = kafkalite("cluster", "up", "--brokers", "3", "--data-dir", str(data_dir))
        assert again.returncode == 1 and "already running" in again.stderr

        created = kafkalite(
            "topics",
            "create",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--replication-factor",
            "3",
        )
        assert created.returncode == 0, created.stderr
        status = kafkalite("cluster", "status", "--data-dir", str(data_dir))
        assert status.returncode == 0, status.stderr
        assert "active controller" in status.stdout
        assert status.stdout.count("orders") == 3
        # 'up' had __consumer_offsets and __transaction_state created (4 partitions each, RF 3)
        # while all brokers were live
        assert status.stdout.count("__consumer_offsets") == 4
        assert status.stdout.count("__transaction_state") == 4
        assert "3 live broker(s), 11 partition(s), 0 under-replicated" in status.stdout
        assert status.stdout.count("max lag") == 3  # each broker's event loop (loop-lag.json)
        remote = kafkalite("cluster", "status", "--bootstrap-server", bootstrap.split(",")[0])
        assert remote.returncode == 0, remote.stderr
        assert "active controller" in remote.stdout and remote.stdout.count("orders") == 3

        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce("orders", value=b"o-%d" % i, partition=i % 3)
        assert producer.flush(30) == 0

        os.kill(int(state["nodes"]["3"]["pid"]), signal.SIGKILL)
        # broker 3 is reported not running; its partitions become under-replicated once fenced
        for _ in range(100):
            status = kafkalite("cluster", "status", "--data-dir", str(data_dir))
            if "2 live broker(s), 11 partition(s), 11 under-replicated" in status.stdout:
                break
        assert "not running" in status.stdout
        assert "2 live broker(s), 11 partition(s), 11 under-replicated" in status.stdout

        # A transactional producer that first appears after the failure still gets a coordinator.
        txn_producer = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": "after-failure", "acks": "all"}
        )
        txn_producer.init_transactions(60)
        txn_producer.begin_transaction()
        txn_producer.produce("orders", value=b"t-0", partition=0)
        txn_producer.commit_transaction(60)

        # A consumer group that first appears after the failure still gets a coordinator.
        consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "after-failure", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["orders"])
        got: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(got) < 31 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.add(message.value())
        consumer.close()
        assert got == {b"o-%d" % i for i in range(30)} | {b"t-0"}

        down = kafkalite("cluster", "down", "--data-dir", str(data_dir))
        assert down.returncode == 0 and "stopped 2 broker(s)" in down.stdout
        for info in state["nodes"].values():
            assert not _alive(int(info["pid"]))  # gone (or a zombie nobody reaps)
        stopped = kafkalite("cluster", "status", "--data-dir", str(data_dir))
        assert stopped.returncode == 1 and "stopped" in stopped.stderr
    finally:
        _kill_leftovers(data_dir)


def test_cluster_up_secure_prints_a_client_config_librdkafka_uses(tmp_path: Path) -> None:
    """``up --secure``: SASL_SSL only, a throwaway CA, an admin user with SCRAM-SHA-512 (created
    through AlterUserScramCredentials), ``client.properties`` (0600) that confluent-kafka takes as
    is; ``status`` reads it."""
    data_dir = tmp_path / "secure"
    try:
        up = kafkalite("cluster", "up", "--brokers", "1", "--secure", "--data-dir", str(data_dir))
        assert up.returncode == 0, up.stderr
        properties = data_dir / "client.properties"
        assert properties.stat().st_mode & 0o777 == 0o600
        config = dict(
            line.split("=", 1)
            for line in properties.read_text().splitlines()
            if line and not line.startswith("#")
        )
        assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512"
        assert f"sasl.password={config['sasl.password']}" in up.stdout
        assert json.loads((data_dir / "cluster.json").read_text())["security_protocol"] == "SASL_SSL"
        producer = confluent_kafka.Producer(config)
        producer.produce("secured", b"hello")
        assert producer.flush(20) == 0
        assert "secured" in confluent_kafka.admin.AdminClient(config).list_topics(timeout=10).topics
        status = kafkalite("cluster", "status", "--data-dir", str(data_dir))
        assert status.returncode == 0, status.stderr
        assert "secured" in status.stdout

    finally:
        kafkalite("cluster", "down", "--data-dir", str(data_dir), "--timeout", "5")
        _kill_leftovers(data_dir)
