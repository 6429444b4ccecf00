"""``kafkalite top`` in a pseudo-terminal against the session broker (with its /metrics): three
refreshes show the broker as controller with its endpoint up, the topic with its high watermark,
and the group with its lag."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

import confluent_kafka

from spark_kafkalite.local_cluster import LocalCluster

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_top_shows_brokers_topics_and_lag_in_a_terminal(cluster: LocalCluster, unique_topic: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(25):
        producer.produce(unique_topic, b"%d" % i)
    assert producer.flush(15) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": unique_topic}
    )
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(unique_topic, 0, 5)], asynchronous=False)
    finally:
        consumer.close()

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 200, 0, 0))  # rows, columns
    command = [
        sys.executable,
        "-m",
        "spark_kafkalite.cli",
        "top",
        "--bootstrap-server",
        cluster.bootstrap_servers,
    ]
    command += ["--metrics-url", cluster.metrics_urls[0], "--interval", "0.3", "--iterations", "3"]
    process = subprocess.Popen(
        command, stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "TERM": "xterm-256color"}
    )
    os.close(slave)
    output = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the terminal closed: the command exited
                    break
                if not chunk:
                    break
                output += chunk
            elif process.poll() is not None:
                break
        assert process.wait(10) == 0, output.decode(errors="replace")
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
    text = _ANSI.sub("", output.decode(errors="replace"))
    assert "Brokers (controller 1)" in text
    assert re.search(r"│ 1\s+│ " + re.escape(cluster.bootstrap_servers) + r"\s+│ controller\s+│ up", text), (
        text
    )
    assert re.search(re.escape(unique_topic) + r"\s+│ 1\s+│ [0-9,]*\s+│ 25 ", text), text
    assert re.search(
        re.escape(unique_topic) + r"\s+│ Empty\s+│ " + re.escape(unique_topic) + r"\s+│ 20 =", text
    ), text
