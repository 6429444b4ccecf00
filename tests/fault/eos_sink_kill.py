"""Exactly-once sink under driver crashes (issue #12 item 5, "done when"): a Spark streaming query
topic ``in`` -> ``kafkalite`` sink -> topic ``out`` whose driver process group (Python driver,
JVM, Python workers) is SIGKILLed at random points and restarted from its checkpoint
``--kills`` times, with the leader of ``out``-0 SIGKILLed once mid-stream (and restarted after
the next driver kill); meanwhile a confluent-kafka producer (idempotent, acks=all) feeds ``in``
(at least ``--records`` records, and on until the last kill, so every kill falls mid-stream:
the summary counts ``kills_mid_stream``).

Setup: ``LocalCluster(brokers=3)`` (``--brokers 1`` for a quick run), topics ``in`` and ``out``
with 2 partitions, RF = brokers, ``min.insync.replicas`` = min(2, brokers). Each cycle starts
the driver (:mod:`fault.eos_sink_driver`, a processing-time trigger, ``maxOffsetsPerTrigger``
100), waits for its first micro-batch with rows, then a random 0..``--max-delay-s`` seconds
(seeded), and kills it: the kill lands while a batch is planned, written, committed by the
sink's tasks, or recorded in Spark's offset/commit logs. After the last kill and once every
source record is acknowledged, a final driver drains ``in`` (``Trigger.AvailableNow``).

Check: a confluent-kafka consumer with ``isolation.level=read_committed`` reads ``out``: every
acknowledged source value must be there exactly once (``--mode exactly-once``); with
``--mode at-least-once`` none may be missing and the duplicates are counted (what the README
documents for the default mode). Exit status 0 when the mode's invariant held.

    taskset -c 1 python tests/fault/eos_sink_kill.py --kills 10 --seed 1 [--mode at-least-once]
        [--brokers 3] [--records 4000] [--rate 60] [--max-offsets 100] [--data-dir DIR (kept)]
        [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # run as a script: make ``fault.*`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from fault.replication_helpers import FAULT_OVERRIDES, AckLog, confluent_producer

from spark_kafkalite.local_cluster import LocalCluster

DRIVER = Path(__file__).resolve().parent / "eos_sink_driver.py"
SRC, OUT = "in", "out"
DRAIN_MAX_OFFSETS = 20000


def log(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


class Driver:
    """One driver process (its own session: the kill reaches the JVM and the Python workers)."""

    def __init__(
        self,
        cluster: LocalCluster,
        checkpoint: Path,
        mode: str,
        drain: bool,
        out_log: Path,
        max_offsets: int,
    ) -> None:
        argv = [
            sys.executable,
            str(DRIVER),
            "--bootstrap",
            cluster.bootstrap_servers,
            "--src",
            SRC,
            "--out",
            OUT,
            "--checkpoint",
            str(checkpoint),
            "--mode",
            mode,
            "--max-offsets",
            str(max_offsets),
        ]
        if drain:
            argv.append("--drain")
        self.lines: list[str] = []
        self.batches = 0
        self.started = threading.Event()
        self.first_batch = threading.Event()
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")]),
        }
        self._log = out_log.open("a")
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            start_new_session=True,
            env=env,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.strip()
            self.lines.append(line)
            self._log.write(f"DRIVER {line}\n")
            self._log.flush()
            if line == "RUNNING":
                self.started.set()
            elif line.startswith("BATCH "):
                self.batches += 1
                self.first_batch.set()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.kill()


def read_committed(cluster: LocalCluster, partitions: int, timeout_s: float = 120.0) -> list[bytes]:
    """Every value of ``out`` a read_committed confluent-kafka consumer returns, to each partition's end."""
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "verify-" + uuid.uuid4().hex[:6],
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        consumer.assign([TopicPartition(OUT, p, 0) for p in range(partitions)])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                elif not msg.error().retriable():
                    raise RuntimeError(f"consumer error on {OUT}: {msg.error()}")
                continue
            at_end.discard(msg.partition())
            values.append(msg.value())
        if len(at_end) < partitions:
            raise RuntimeError(f"{OUT}: only partitions {sorted(at_end)} reached their end")
        return values
    finally:
        consumer.close()


def run(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    rng = random.Random(args.seed)
    rf = args.brokers
    cluster = LocalCluster(
        brokers=args.brokers, data_dir=data_dir / "cluster", config_overrides=dict(FAULT_OVERRIDES)
    ).start()
    drivers: list[Driver] = []
    kills_done = threading.Event()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        topics = [NewTopic(t, 2, rf, config={"min.insync.replicas": str(min(2, rf))}) for t in (SRC, OUT)]
        for future in admin.create_topics(topics).values():
            future.result(30)
        for topic in (SRC, OUT):
            for p in (0, 1):
                cluster.wait_for_isr(topic, p, rf, timeout_s=30)

        acks = AckLog()
        feeder_done = threading.Event()
        produced = [0]

        def feed() -> None:
            # at least --records, and on until the last kill: every kill falls mid-stream
            producer = confluent_producer(cluster)

            def callback(err: Any, msg: Any) -> None:
                if err is None:
                    acks.on_ack(msg.value(), msg.partition(), msg.offset())
                else:
                    acks.on_fail(msg.value(), str(err))

            i = 0
            while i < args.records or not kills_done.is_set():
                producer.produce(SRC, value=b"v-%07d" % i, partition=i % 2, callback=callback)
                producer.poll(0)
                i += 1
                produced[0] = i
                time.sleep(1.0 / args.rate)
            producer.flush(120)
            feeder_done.set()

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        checkpoint = data_dir / "checkpoint"
        driver_log = data_dir / "driver.log"
        killed_leader: int | None = None
        leader_kill_mid_stream = False
        kill_points: list[float] = []
        kills_mid_stream = 0
        for cycle in range(args.kills):
            driver = Driver(cluster, checkpoint, args.mode, False, driver_log, args.max_offsets)
            drivers.append(driver)
            # a batch with rows, or (the source fully fed, nothing new to read) a running query
            deadline = time.monotonic() + 300
            while not driver.first_batch.wait(1.0):
                if feeder_done.is_set() and driver.started.is_set():
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"cycle {cycle}: the driver ran no micro-batch in 300 s: {driver.lines[-5:]}"
                    )
            delay = rng.uniform(0.0, args.max_delay_s)
            time.sleep(delay)
            if cycle == args.kills // 2 and args.brokers > 1 and killed_leader is None:
                killed_leader = cluster.partition(OUT, 0).leader
                log(f"cycle {cycle}: SIGKILL broker {killed_leader} (leader of {OUT}-0)")
                cluster.kill(killed_leader)
                leader_kill_mid_stream = not feeder_done.is_set()
                time.sleep(rng.uniform(1.0, 4.0))
            driver.kill()
            kill_points.append(round(delay, 2))
            kills_mid_stream += 0 if feeder_done.is_set() else 1
            log(
                f"cycle {cycle}: driver SIGKILLed {delay:.1f} s after its first batch"
                f" ({driver.batches} batches, {produced[0]} source records sent)"
            )
            if killed_leader is not None and not cluster.is_running(killed_leader):
                cluster.restart(killed_leader)
                log(f"cycle {cycle}: broker {killed_leader} restarted")
        kills_done.set()
        if not feeder_done.wait(600):
            raise RuntimeError("the feeder did not finish")
        if killed_leader is not None:
            for topic in (SRC, OUT):
                for p in (0, 1):
                    cluster.wait_for_isr(topic, p, rf, timeout_s=60)
        # the drain reads the backlog the restarts left in a few large micro-batches
        final = Driver(cluster, checkpoint, args.mode, True, driver_log, DRAIN_MAX_OFFSETS)
        drivers.append(final)
        status = final.wait(600)
        if status != 0 or "DONE" not in final.lines:
            raise RuntimeError(f"the final driver failed (exit {status}): {final.lines[-5:]}")
        acked = [value for value, _p, _o in acks.acked]
        counts = Counter(read_committed(cluster, 2))
        missing = [v for v in acked if counts[v] == 0]
        duplicated = {v: n for v, n in counts.items() if n > 1}
        unexpected = set(counts) - {b"v-%07d" % i for i in range(produced[0])}
        ok = not missing and not unexpected and (args.mode == "at-least-once" or not duplicated)
        return {
            "mode": args.mode,
            "seed": args.seed,
            "brokers": args.brokers,
            "kills": args.kills,
            "kill_delays_s": kill_points,
            "kills_mid_stream": kills_mid_stream,
            "leader_killed": killed_leader,
            "leader_kill_mid_stream": leader_kill_mid_stream,
            "source_sent": produced[0],
            "source_acked": len(acked),
            "source_failed": len(acks.failed),
            "out_read_committed": sum(counts.values()),
            "missing": len(missing),
            "duplicated_values": len(duplicated),
            "extra_copies": sum(n - 1 for n in duplicated.values()),
            "unexpected": len(unexpected),
            "ok": ok,
        }
    finally:
        kills_done.set()  # the feeder stops (after an error too)
        for driver in drivers:
            if driver.proc.poll() is None:
                driver.kill()
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="exactly-once", choices=["exactly-once", "at-least-once"])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument(
        "--records", type=int, default=4000, help="at least this many; the feed runs on until the last kill"
    )
    parser.add_argument("--rate", type=float, default=60.0, help="source records per second")
    parser.add_argument(
        "--max-offsets", type=int, default=100, help="maxOffsetsPerTrigger of the killed drivers"
    )
    parser.add_argument(
        "--max-delay-s", type=float, default=6.0, help="kill at most this long after the first batch"
    )
    parser.add_argument("--data-dir", type=Path, help="kept: broker logs, driver.log, checkpoint")
    parser.add_argument("--json", type=Path, help="write the summary here")
    args = parser.parse_args(argv)
    if args.data_dir is not None:
        args.data_dir.mkdir(parents=True, exist_ok=True)
        summary = run(args, args.data_dir)
    else:
        with tempfile.TemporaryDirectory(prefix="eos-kill-") as tmp:
            summary = run(args, Path(tmp))
    print(json.dumps(summary, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
