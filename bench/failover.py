"""Failover time with ``LocalCluster``'s own settings (issue #14 item 4; goal: p50 <= 3 s).

A three-broker ``LocalCluster`` (real processes, combined broker + controller nodes, no config
overrides: its multi-node defaults are what is measured). Per trial: a new 1-partition RF=3
topic (``min.insync.replicas=2``), a paced idempotent ``acks=all`` load (500 records/s) from our
producer (``spark_kafkalite.client.KafkaProducer``, or ``--client confluent`` for librdkafka), then
``kill -9`` of the partition leader; the failover time is from the kill to the first
acknowledgement of a record *sent after the kill* (by then a new leader was elected and the
producer found it). It includes the controller noticing the dead broker
(``broker.session.timeout.ms``), a Raft election when the killed broker was the active
controller, the election of the new partition leader, and the producer's metadata refresh.
The killed broker is restarted and rejoins the ISR before the next trial.

There is no external peer for this figure: the session timeout and the goal are printed beside it.

    python bench/failover.py [--trials 10] [--client ours|confluent]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from typing import Any

from _common import console, emit_table, machine_summary
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.table import Table

from spark_kafkalite.client import KafkaProducer
from spark_kafkalite.local_cluster import MULTI_NODE_DEFAULTS, LocalCluster

GOAL_P50_S = 3.0
RATE_PER_S = 500


def _create(cluster: LocalCluster) -> str:
    topic = f"failover-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    cluster.wait_for_leader(topic, 0, timeout_s=30)
    cluster.wait_for_isr(topic, 0, 3, timeout_s=30)
    return topic


class _Load:
    """A paced acks=all idempotent load; records the (sequence, ack time) of every ack."""

    def __init__(self, cluster: LocalCluster, topic: str, client: str) -> None:
        self.topic = topic
        self.client = client
        self.acked: list[tuple[int, float]] = []
        self.errors: list[str] = []
        self.sent = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        if client == "ours":
            self.producer: Any = KafkaProducer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 2,
                    "delivery.timeout.ms": 60000,
                }
            )
        else:
            self.producer = Producer(
                {
                    "bootstrap.servers": cluster.bootstrap_servers,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 2,
                    "message.timeout.ms": 60000,
                }
            )
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _ack(self, seq: int, error: Any) -> None:
        now = time.monotonic()
        with self.lock:
            if error is None:
                self.acked.append((seq, now))
            else:
                self.errors.append(str(error))

    def _run(self) -> None:
        seq = 0
        next_t = time.monotonic()
        while not self.stop.is_set():
            s = seq
            if self.client == "ours":
                self.producer.send(self.topic, b"%d" % s, callback=lambda _m, e, s=s: self._ack(s, e))
            else:
                self.producer.produce(self.topic, b"%d" % s, callback=lambda e, _m, s=s: self._ack(s, e))
                self.producer.poll(0)
            seq += 1
            self.sent = seq
            next_t += 1 / RATE_PER_S
            time.sleep(max(0.0, next_t - time.monotonic()))

    def first_ack_from(self, seq: int) -> float | None:
        with self.lock:
            return next((t for s, t in self.acked if s >= seq), None)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.producer.flush(60)
        if self.client == "ours":
            self.producer.close(10)


def _trial(cluster: LocalCluster, client: str) -> tuple[float, int, bool]:
    """(seconds, killed broker, was it the active controller)."""
    topic = _create(cluster)
    leader = cluster.wait_for_leader(topic, 0)
    was_controller = cluster.controller_id() == leader
    load = _Load(cluster, topic, client)
    try:
        deadline = time.monotonic() + 30
        while len(load.acked) < RATE_PER_S and time.monotonic() < deadline:
            time.sleep(0.01)
        killed_at = time.monotonic()
        cluster.kill(leader)
        sent_at_kill = load.sent
        first = None
        while first is None and time.monotonic() < killed_at + 60:
            first = load.first_ack_from(sent_at_kill)
            time.sleep(0.002)
    finally:
        load.close()
    if first is None:
        raise RuntimeError("no record sent after the kill was acknowledged within 60 s")
    if load.errors:
        console.print(f"  [yellow]{len(load.errors)} produce error(s), e.g. {load.errors[0]}[/yellow]")
    cluster.restart(leader)
    cluster.wait_for_isr(topic, 0, 3, timeout_s=60)
    return first - killed_at, leader, was_controller


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--client", choices=("ours", "confluent"), default="ours")
    args = parser.parse_args()
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as data_dir:
        cluster = LocalCluster(brokers=3, data_dir=data_dir).start()
        try:
            for i in range(args.trials):
                seconds, killed, was_controller = _trial(cluster, args.client)
                times.append(seconds)
                role = " (also the active controller)" if was_controller else ""
                console.print(
                    f"trial {i + 1}: kill -9 of leader {killed}{role} -> first ack after {seconds:.2f} s"
                )
        finally:
            cluster.stop()
    p50, p95 = statistics.median(times), _percentile(times, 0.95)
    settings = ", ".join(f"{k}={v}" for k, v in MULTI_NODE_DEFAULTS.items())
    title = f"kill -9 of the leader -> first acked produce on the new leader ({len(times)} trials)"
    columns = ["run", "p50 s", "p95 s", "max s", "note"]
    session_s = int(MULTI_NODE_DEFAULTS["broker.session.timeout.ms"]) / 1000
    rows = [
        [f"{args.client} client", f"{p50:.2f}", f"{p95:.2f}", f"{max(times):.2f}", settings],
        ["goal (issue #14)", f"{GOAL_P50_S:.2f}", "", "", f"session timeout {session_s:.1f} s"],
    ]
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column in ("run", "note") else "right")
    for row in rows:
        table.add_row(*row)
    emit_table(title, columns, rows)
    console.print(table)
    console.print(f"[dim]{machine_summary()}[/dim]")
    console.print(
        f"failover (kill -9 of the leader -> first acked produce on the new leader), {args.client} client, "
        f"{len(times)} trials: p50 {p50:.2f} s, p95 {p95:.2f} s, max {max(times):.2f} s; "
        f"goal p50 <= {GOAL_P50_S:.1f} s ({'met' if p50 <= GOAL_P50_S else 'NOT met'}); LocalCluster: {settings}"
    )


if __name__ == "__main__":
    main()
