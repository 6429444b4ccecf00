"""Storage faults on a real broker process: a write that the OS refuses gives KAFKA_STORAGE_ERROR
(56) on produce, takes the log dir offline (Kafka's ``LogDirFailureChannel``), and leaves the
broker up with the stored data readable.

The fault is real, not injected: the broker runs under ``RLIMIT_FSIZE`` (set with ``preexec_fn``),
so a write past the limit fails with EFBIG, exactly like a full disk fails with ENOSPC (the broker
ignores SIGXFSZ). After a restart without the limit the data is intact and produce works again.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
FILE_SIZE_LIMIT_BYTES = 256 * 1024
TOPIC = "faults"


class BrokerProcess:
    """``python -m broker`` with its own config and log dir; ``preexec_fn`` runs in the child."""

    def __init__(self, data_dir: Path) -> None:
        self.log_dir = data_dir / "logs"
        self.config_path = data_dir / "broker.properties"
        self.output_path = data_dir / "broker.out"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self, preexec_fn: Callable[[], None] | None = None) -> str:
        listener = f"PLAINTEXT://127.0.0.1:{self.port}"
        self.config_path.write_text(
            f"node.id=1\nprocess.roles=broker,controller\nlisteners={listener}\n"
            f"advertised.listeners={listener}\nlog.dirs={self.log_dir}\nnum.partitions=1\n"
            "default.replication.factor=1\n",
            encoding="utf-8",
        )
        endpoints = self.log_dir / ".broker-endpoints.json"
        endpoints.unlink(missing_ok=True)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        with open(self.output_path, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "broker", "--config", str(self.config_path), "--exit-with-parent"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                preexec_fn=preexec_fn,
                start_new_session=True,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output()
            try:
                info = json.loads(endpoints.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                time.sleep(0.05)
                continue
            if info.get("pid") == self.process.pid:
                host, port = info["listeners"]["PLAINTEXT"].rsplit(":", 1)
                self.port = int(port)
                socket.create_connection((host, self.port), timeout=5).close()
                return f"{host}:{port}"
            time.sleep(0.05)
        raise AssertionError(f"broker not ready:\n{self.output()}")

    def terminate(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()

    def output(self) -> str:
        try:
            return self.output_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""


def limit_file_size() -> None:
    """Runs in the broker child before exec: writes past the limit fail (EFBIG)."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT_BYTES, FILE_SIZE_LIMIT_BYTES))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path)
    try:
        yield process
    finally:
        process.terminate()


def produce(bootstrap: str, partition: int, values: list[bytes]) -> list[confluent_kafka.KafkaError | None]:
    """Produce ``values`` without retries; the delivery error of each (None = delivered)."""
    results: list[confluent_kafka.KafkaError | None] = []
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "retries": 0,
            "linger.ms": 0,
            "message.timeout.ms": 10000,
            "enable.idempotence": False,
        }
    )
    for value in values:
        producer.produce(
            TOPIC, value=value, partition=partition, on_delivery=lambda err, _m: results.append(err)
        )
        producer.flush(15)
    assert len(results) == len(values)
    return results


def consume_all(bootstrap: str, partition: int, expected: int) -> list[tuple[int | None, bytes | None]]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, partition, confluent_kafka.OFFSET_BEGINNING)])
    out: list[tuple[int | None, bytes | None]] = []
    deadline = time.monotonic() + 15
    try:
        while len(out) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append((msg.offset(), msg.value()))
        _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, partition), timeout=10)
    finally:
        consumer.close()
    assert high == expected
    return out


def test_write_past_file_size_limit_gives_storage_error(broker: BrokerProcess) -> None:
    bootstrap = broker.start(preexec_fn=limit_file_size)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(timeout=15)
    stored = [b"record-%d" % i for i in range(5)]
    assert produce(bootstrap, 0, stored) == [None] * 5

    # 400 KiB do not fit under the 256 KiB file size limit: the segment write fails with EFBIG.
    [error] = produce(bootstrap, 0, [b"x" * 400 * 1024])
    assert error is not None and error.code() == confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR, error
    # The log dir is offline now: a small record to the other partition in it is refused too.
    [error] = produce(bootstrap, 1, [b"small"])
    assert error is not None and error.code() == confluent_kafka.KafkaError.KAFKA_STORAGE_ERROR, error

    # The broker is still up: metadata answers and the stored records are consumable.
    assert broker.process is not None and broker.process.poll() is None
    metadata = admin.list_topics(timeout=10)
    assert sorted(metadata.topics[TOPIC].partitions) == [0, 1]
    assert consume_all(bootstrap, 0, 5) == list(enumerate(stored))
    output = broker.output()
    assert "File too large" in output and "is offline" in output

    # Restarted without the limit, the data is intact and produce works again.
    assert broker.terminate() == 0
    bootstrap = broker.start()
    assert produce(bootstrap, 0, [b"after"]) == [None]
    assert consume_all(bootstrap, 0, 6) == [*enumerate(stored), (5, b"after")]
