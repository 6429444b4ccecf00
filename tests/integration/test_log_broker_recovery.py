"""Recovery after ``kill -9``: a process that appended through LogManager and was killed loses
no acknowledged record (its segments are recovered on the next startup); on a real broker,
rolled segments are fsynced in the background and the recovery point checkpointed, so only the
segments after it are rescanned; after a clean stop nothing is."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from broker.log.checkpoints import RECOVERY_POINT_CHECKPOINT_FILE, read_offset_checkpoint
from broker.log.log_config import LogConfig
from broker.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.record_batch import decode_batches

pytestmark = pytest.mark.timeout(90)

TOPIC = "rp"


_CRASH_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, uuid
    from pathlib import Path
    from broker.log.log_config import LogConfig
    from broker.log.log_manager import LogManager
    from spark_kafkalite.protocol.record_batch_writer import encode_batch

    mgr = LogManager([Path(sys.argv[1])], LogConfig(segment_bytes=3000, index_interval_bytes=200))
    mgr.startup()
    log = mgr.get_or_create_log("crash", 0, uuid.UUID(sys.argv[2]))
    for i in range(200):
        info = log.append_as_leader(bytearray(encode_batch([(None, b"v%d" % i, 1000 + i, [])])), 0)
    print(info.last_offset, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_kill_9_keeps_acknowledged_data(tmp_path: Path) -> None:
    tid = uuid.uuid4()
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH_SCRIPT, str(tmp_path), str(tid)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert int(proc.stdout.strip()) == 199
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    mgr = LogManager([tmp_path], LogConfig(segment_bytes=3000, index_interval_bytes=200))
    mgr.startup()
    log = mgr.get_log("crash", 0)
    assert log is not None and log.topic_id == tid
    assert log.recovered_segments == len(log.segments) > 1
    assert log.log_end_offset == 200
    values = [v for b in decode_batches(log.read(0, 10**7).records) for v in b.values]
    assert values == [b"v%d" % i for i in range(200)]
    assert mgr.topics_on_disk() == {"crash": (tid, 1)}
    mgr.shutdown()
    assert os.path.exists(tmp_path / CLEAN_SHUTDOWN_FILE)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(data_dir=tmp_path / "cluster", config_overrides={"log.segment.bytes": "4000"})
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def produce(bootstrap: str, count: int, start: int = 0) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.num.messages": 5}
    )
    for i in range(start, start + count):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"v%06d" % i + bytes(80), partition=0)
        producer.poll(0)
    assert producer.flush(15) == 0


def consume_values(bootstrap: str, end: int) -> list[bytes]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "rp-test", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
    out: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while len(out) < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg.value()[:7])
    finally:
        consumer.close()
    return out


def recovered_segments(output: str) -> list[int]:
    """The ``recovered N segment(s)`` counts the broker logged for partition rp-0."""
    return [int(n) for n in re.findall(r"loaded log rp-0: .*\(recovered (\d+) segment\(s\)\)", output)]


def test_kill_rescans_only_after_the_recovery_point(local: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": local.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(timeout=15)
    produce(local.bootstrap_servers, 400)
    segments = len(list((local.log_dir(1) / "rp-0").glob("*.log")))
    assert segments >= 8
    checkpoint = local.log_dir(1) / RECOVERY_POINT_CHECKPOINT_FILE
    deadline = time.monotonic() + 10
    recovery_point = 0
    while time.monotonic() < deadline:  # the background flush runs about every second
        recovery_point = read_offset_checkpoint(checkpoint).get((TOPIC, 0), 0)
        if recovery_point >= 300:
            break
        time.sleep(0.1)
    assert recovery_point >= 300
    local.kill(1)
    local.restart(1)
    counts = recovered_segments(local.output(1))
    assert counts and 1 <= counts[-1] <= 2, counts  # not all the segments
    produce(local.bootstrap_servers, 10, start=400)
    assert consume_values(local.bootstrap_servers, 410) == [b"v%06d" % i for i in range(410)]
    local.restart(1)  # SIGTERM: clean, nothing rescanned
    assert "loaded log rp-0: " in local.output(1).rsplit("starting broker", 1)[-1]
    assert not re.search(r"loaded log rp-0: .*recovered", local.output(1).rsplit("starting broker", 1)[-1])
