"""Chaos soak (issue #14 item 5): seeded, bounded random faults on three real broker processes
under an idempotent ``acks=all`` load, with the invariants checked after every fault.

Setup: :class:`~fault.chaos_cluster.ChaosCluster` (3 ``python -m broker`` processes, KRaft
combined mode, every broker-to-broker, Raft and client link through a
:class:`~fault.chaos_proxy.LinkProxy`); one topic of ``--partitions`` partitions, RF 3,
``min.insync.replicas=2``; confluent-kafka (librdkafka, idempotent, ``acks=all``) producing
``--rate`` records/s in its own process (:mod:`fault.chaos_load`; ``--client kafkalite``: our
producer instead).

Each cycle: wait until every partition's ISR is full, pick a fault with the seeded RNG, hold it
``--fault-s`` seconds (uniform in the range), heal it, and measure the **heal time** (from the
start of the heal until all three brokers report every partition with a full ISR); then check that
the three replicas' segment files agree byte for byte below the high watermark (each replica's
committed batches a prefix of the longest replica's, a difference counted when it persists 10 s;
all equal at the end). Faults (target = the leader of a random partition, one of its followers, or the
active controller):

- ``kill9`` (SIGKILL, then start), ``pause`` (SIGSTOP, then SIGCONT), ``restart`` (SIGTERM:
  controlled shutdown, then start);
- ``partition-followers``: the leader's Kafka links to both followers cut (replication stops);
- ``partition-controller``: the leader's Raft link to the active controller cut (its heartbeats
  stop); when the leader is the active controller, its Raft links to both voters;
- ``isolate-leader``: every link of the leader cut (clients, replication, Raft);
- ``partition-client``: the producer's link to the leader cut.

Partitions cut links by ``drop`` (connections reset, new ones refused) or ``blackhole`` (bytes
held, delivered late when healed), chosen at random. At the end: the load stops, every record is
read back (confluent-kafka consumer) and checked: every acknowledged record present exactly once at
its acknowledged offset, offsets increasing, send order kept; all replicas byte-identical.

Short run in the test suite: ``tests/fault/test_chaos_soak.py``. Long run (one command; figures
go in BENCHMARKS.md, "Chaos soak")::

    taskset -c 1 python tests/fault/chaos.py --cycles 100 --seed 1 [--fault-s MIN MAX]
        [--rate RECORDS_PER_S] [--data-dir DIR (kept: broker logs, load.log)] [--json OUT]

Exit status 0 when every invariant held (heal time <= ``--heal-bound-s``, default 15 s).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __name__ == "__main__":  # run as a script: make ``fault.*`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic
from fault.chaos_cluster import AckRecord, ChaosCluster, Verdict, compare_replicas, verify_acks
from fault.chaos_proxy import BLACKHOLE, CLIENT, DROP, KAFKA, RAFT
from fault.replication_helpers import consume_all

__all__ = ["FAULTS", "ChaosSoak", "FaultRecord", "main"]

FAULTS = (
    "kill9",
    "pause",
    "restart",
    "partition-followers",
    "partition-controller",
    "isolate-leader",
    "partition-client",
)
_PROCESS_FAULTS = ("kill9", "pause", "restart")


@dataclass
class FaultRecord:
    cycle: int
    fault: str
    target: int
    role: str  # leader / follower / controller (of partition ``partition`` / the quorum)
    partition: int
    mode: str  # drop / blackhole for partitions, "" otherwise
    hold_s: float
    heal_s: float | None = None  # None: never healed within the wait
    isr_short_at_heal: bool = False  # the fault had shrunk an ISR (or stopped a broker)
    replica_problems: list[str] = field(default_factory=list)
    note: str = ""


class ChaosSoak:
    """One soak run (see the module docstring). ``log`` receives one line per event."""

    def __init__(
        self,
        data_dir: Path,
        seed: int,
        partitions: int = 3,
        rate_per_s: float = 200.0,
        fault_s: tuple[float, float] = (5.0, 8.0),
        heal_wait_s: float = 60.0,
        faults: tuple[str, ...] = FAULTS,
        client: str = "confluent",
        log=print,  # noqa: ANN001
    ) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.partitions = partitions
        self.rate_per_s = rate_per_s
        self.fault_s = fault_s
        self.heal_wait_s = heal_wait_s
        self.faults = faults
        self.client = client
        self.log = log
        self.cluster = ChaosCluster(data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        self._load_log = open(data_dir / "load.log", "ab")  # noqa: SIM115 - closed in close()
        self.topic = f"chaos-{seed}-{uuid.uuid4().hex[:6]}"
        self.records: list[FaultRecord] = []
        self.acked: list[AckRecord] = []
        self.failed: list[tuple[str, str]] = []
        self.load_events: list[str] = []
        self.late_shrinks: list[str] = []
        self.liveness: list[str] = []
        self._load: subprocess.Popen[str] | None = None
        self._load_runs = 0
        self._lock = threading.Lock()
        self.harness_errors: list[str] = []
        self.verdict: Verdict | None = None
        self.final_replica_problems: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self.cluster.start()
        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers})
        new = NewTopic(self.topic, self.partitions, 3, config={"min.insync.replicas": "2"})
        admin.create_topics([new])[self.topic].result(30)
        self._wait_isr(30.0)
        self._start_load()

    def close(self) -> None:
        self._stop_load()
        self.cluster.stop()
        self._load_log.close()

    def _start_load(self) -> None:
        self._load_runs += 1
        run_id = f"r{self._load_runs}"
        self._load = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("chaos_load.py")),
                self.cluster.client_bootstrap,
                self.topic,
                str(self.partitions),
                str(self.rate_per_s),
                run_id,
                self.client,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._load_log,
            text=True,
        )
        self.cluster.client_pid = self._load.pid
        threading.Thread(target=self._read_load, args=(self._load,), daemon=True).start()

    def _read_load(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            kind, _, rest = line.rstrip("\n").partition(" ")
            with self._lock:
                if kind == "A":
                    p, o, v = rest.split(" ", 2)
                    self.acked.append(AckRecord(int(p), int(o), v.encode()))
                elif kind == "F":
                    v, _, err = rest.partition(" ")
                    self.failed.append((v, err))
                else:
                    self.load_events.append(rest)
                    self.log(f"load: {rest}")

    def _stop_load(self) -> None:
        proc, self._load = self._load, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(90)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _ensure_load(self) -> None:
        if self._load is not None and self._load.poll() is not None:
            self.liveness.append(f"producer exited with {self._load.returncode}; restarted")
            self._start_load()

    # -- observations ---------------------------------------------------------------------------
    def _wait_isr(self, timeout_s: float) -> float | None:
        """Seconds until every partition's ISR is full on every broker; None on timeout."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if self.cluster.isr_full(self.topic, self.partitions):
                return time.monotonic() - start
            time.sleep(0.2)
        return None

    def _leader_of(self, partition: int) -> int:
        return self.cluster.wait_for_leader(self.topic, partition, timeout_s=30)

    def _evidence(self) -> str:
        """The last warnings/errors of each broker's output (for a liveness report)."""
        parts = []
        for i in self.cluster.node_ids:
            lines = [
                x
                for x in self.cluster.output(i).splitlines()
                if "WARNING" in x or "ERROR" in x or "Traceback" in x
            ]
            parts.append(f"broker {i}: " + " | ".join(lines[-4:])[-600:])
        return "\n".join(parts)

    # -- one cycle ------------------------------------------------------------------------------
    def run_cycle(self, cycle: int, fault: str | None = None) -> FaultRecord:
        """One fault (``fault``, or one picked by the seeded RNG) and its checks."""
        pre = self._wait_isr(self.heal_wait_s)
        if pre is None or pre > 1.0:
            msg = f"cycle {cycle}: ISR not full at the start ({'never' if pre is None else f'{pre:.1f} s'})"
            self.late_shrinks.append(msg)
            self.log(msg)
        self._ensure_load()
        fault = fault or self.rng.choice(self.faults)
        partition = self.rng.randrange(self.partitions)
        hold_s = round(self.rng.uniform(*self.fault_s), 2)
        mode = self.rng.choice((DROP, BLACKHOLE)) if fault not in _PROCESS_FAULTS else ""
        leader = self._leader_of(partition)
        controller = self.cluster.controller_id()
        followers = [n for n in self.cluster.node_ids if n != leader]
        if fault in _PROCESS_FAULTS:
            role = self.rng.choice(("leader", "follower", "controller"))
        elif fault == "partition-controller":
            role = "controller" if leader == controller else "leader"
        else:
            role = "leader"
        target = {"leader": leader, "controller": controller}.get(role) or self.rng.choice(followers)
        rec = FaultRecord(cycle, fault, target, role, partition, mode, hold_s)
        heal = self._inject(rec, leader, controller, followers)
        time.sleep(hold_s)
        rec.isr_short_at_heal = not self.cluster.isr_full(self.topic, self.partitions)
        heal_start = time.monotonic()
        heal()
        rec.heal_s = self._wait_isr(self.heal_wait_s)
        if rec.heal_s is not None:
            rec.heal_s = round(time.monotonic() - heal_start, 2)
        else:
            rec.note = "ISR not full after the wait: " + repr(
                self.cluster.isr_views(self.topic, self.partitions)
            )
            self.liveness.append(f"cycle {cycle} {fault} {role} {target}: {rec.note}\n{self._evidence()}")
            self._remediate(rec)
        rec.replica_problems = compare_replicas(self.cluster, self.topic, self.partitions)
        self.records.append(rec)
        with self._lock:
            acked = len(self.acked)
        self.log(
            f"cycle {cycle:3d} {fault:21s} {role:10s} node {target} p{partition} {mode:9s} "
            f"hold {hold_s:4.1f}s {'short' if rec.isr_short_at_heal else 'full '} heal {rec.heal_s if rec.heal_s is not None else 'NEVER'}s acked {acked}"
            + (f" REPLICAS DIFFER {rec.replica_problems}" if rec.replica_problems else "")
        )
        return rec

    def _inject(self, rec: FaultRecord, leader: int, controller: int, followers: list[int]):  # noqa: ANN202
        """Start fault ``rec``; returns the function that heals it."""
        cluster, links, target = self.cluster, self.cluster.links, rec.target
        if rec.fault == "kill9":
            cluster.kill(target)
            return lambda: cluster.start_nodes(target)
        if rec.fault == "pause":
            cluster.pause(target)
            return lambda: cluster.resume(target)
        if rec.fault == "restart":
            cluster.terminate(target)
            return lambda: cluster.start_nodes(target)
        if rec.fault == "partition-followers":
            for f in followers:
                links.block(KAFKA, leader, f, rec.mode)
        elif rec.fault == "partition-controller":
            others = [controller] if leader != controller else followers
            for o in others:
                links.block(RAFT, leader, o, rec.mode)
        elif rec.fault == "isolate-leader":
            for f in followers:
                links.block(KAFKA, leader, f, rec.mode)
                links.block(RAFT, leader, f, rec.mode)
            links.block(KAFKA, leader, CLIENT, rec.mode)
        elif rec.fault == "partition-client":
            links.block(KAFKA, leader, CLIENT, rec.mode)
        return links.heal_all

    def _remediate(self, rec: FaultRecord) -> None:
        """A partition that did not heal: restart the brokers missing from an ISR (recorded in
        ``liveness``) so the soak can go on; abort if that does not help either."""
        views = self.cluster.isr_views(self.topic, self.partitions)
        missing = set(self.cluster.node_ids) - set(self.cluster.running_node_ids())
        for view in views.values():
            if isinstance(view, dict):
                for _leader, isr in view.values():
                    missing |= set(self.cluster.node_ids) - set(isr)
        for node in sorted(missing):
            self.log(f"remediation: restarting broker {node}")
            self.cluster.restart(node)
        if self._wait_isr(self.heal_wait_s) is None:
            raise RuntimeError(f"cycle {rec.cycle}: the ISR stays short even after restarts: {rec.note}")

    def heal_everything(self) -> None:
        """Undo any fault left behind (after a harness error): links, paused and stopped brokers."""
        self.cluster.links.heal_all()
        for node in self.cluster.node_ids:
            self.cluster.resume(node)
        stopped = [n for n in self.cluster.node_ids if not self.cluster.is_running(n)]
        if stopped:
            self.cluster.start_nodes(*stopped)

    # -- end ------------------------------------------------------------------------------------
    def finish(self) -> Verdict:
        """Stop the load, heal everything, read every record back and compare all replicas."""
        self.cluster.links.heal_all()
        self._stop_load()
        if self._wait_isr(self.heal_wait_s) is None:
            self.liveness.append(f"end: ISR not full: {self.cluster.isr_views(self.topic, self.partitions)}")
        for attempt in range(10):  # librdkafka may not know the partitions yet right after faults
            try:
                consumed = consume_all(self.cluster, self.topic, self.partitions, timeout_s=120)
                break
            except KafkaException as exc:
                self.log(f"read-back attempt {attempt + 1} failed: {exc}")
                if attempt == 9:
                    raise
                time.sleep(2.0)
        with self._lock:
            self.verdict = verify_acks(list(self.acked), consumed)
        self.final_replica_problems = compare_replicas(
            self.cluster, self.topic, self.partitions, require_equal=True, wait_s=15
        )
        return self.verdict

    def _log_counts(self) -> dict[str, int]:
        """Lines of interest in the brokers' output over the whole run (liveness evidence)."""
        patterns = ("Traceback", " ERROR ", "diverging epoch", "under-replicated", "fetcher")
        counts = dict.fromkeys(patterns, 0)
        for i in self.cluster.node_ids:
            for line in self.cluster.output(i).splitlines():
                for pattern in patterns:
                    if pattern in line:
                        counts[pattern] += 1
        return counts

    def summary(self) -> dict[str, object]:
        heals = sorted(r.heal_s for r in self.records if r.heal_s is not None)
        short = sorted(r.heal_s for r in self.records if r.heal_s is not None and r.isr_short_at_heal)
        v = self.verdict or Verdict()
        return {
            "seed": self.seed,
            "client": self.client,
            "cycles": len(self.records),
            "faults": dict(Counter(f"{r.fault}{'/' + r.mode if r.mode else ''}" for r in self.records)),
            "targets": dict(Counter(r.role for r in self.records)),
            "acked": v.acked,
            "failed_deliveries": len(self.failed),
            "stored": v.stored,
            "lost": len(v.lost),
            "duplicated": len(v.duplicated),
            "wrong_offset": len(v.wrong_offset),
            "out_of_order_partitions": v.out_of_order,
            "offsets_not_increasing": v.offsets_not_increasing,
            "replica_diffs_per_cycle": sum(1 for r in self.records if r.replica_problems),
            "replica_diffs_final": self.final_replica_problems,
            "heal_s_max": max(heals) if heals else None,
            "heal_s_p50": statistics.median(heals) if heals else None,
            "faults_with_short_isr_at_heal": len(short),
            "heal_s_p50_short_isr": statistics.median(short) if short else None,
            "heal_by_fault_s_max": {
                k: max((r.heal_s or 0.0) for r in self.records if r.fault == k)
                for k in sorted({r.fault for r in self.records})
            },
            "heal_over_15s": [
                (r.cycle, r.fault, r.role, r.heal_s)
                for r in self.records
                if r.heal_s is None or r.heal_s > 15
            ],
            "never_healed": sum(1 for r in self.records if r.heal_s is None),
            "late_isr_shrinks": self.late_shrinks,
            "liveness": self.liveness,
            "harness_errors": self.harness_errors,
            "load_events": self.load_events,
            "broker_log_counts": self._log_counts(),
            "examples": {
                "lost": v.lost[:5],
                "duplicated": v.duplicated[:5],
                "wrong_offset": v.wrong_offset[:5],
            },
        }


def run(
    cycles: int, seed: int, data_dir: Path, **kwargs: object
) -> tuple[dict[str, object], list[FaultRecord]]:
    soak = ChaosSoak(data_dir, seed, **kwargs)  # type: ignore[arg-type]
    try:
        soak.start()
        for cycle in range(1, cycles + 1):
            try:
                soak.run_cycle(cycle)
            except Exception as exc:  # noqa: BLE001 - recorded, the soak goes on (bounded)
                soak.harness_errors.append(f"cycle {cycle}: {exc!r}"[:500])
                soak.log(f"cycle {cycle}: harness error {exc!r}")
                if len(soak.harness_errors) > 3:
                    raise
                soak.heal_everything()
        soak.finish()
        return soak.summary(), soak.records
    finally:
        soak.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=float, default=200.0, help="records/s of the load")
    parser.add_argument("--fault-s", type=float, nargs=2, default=(5.0, 8.0), metavar=("MIN", "MAX"))
    parser.add_argument(
        "--client", choices=("confluent", "kafkalite"), default="confluent", help="the producer of the load"
    )
    parser.add_argument("--heal-bound-s", type=float, default=15.0)
    parser.add_argument(
        "--data-dir", type=Path, default=None, help="kept after the run (default: a temp dir, removed)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="write the summary and every fault record here"
    )
    args = parser.parse_args(argv)
    started = time.monotonic()

    def stamp(line: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {line}", flush=True)

    with tempfile.TemporaryDirectory(prefix="kafkalite-chaos-") as tmp:
        data_dir = args.data_dir or Path(tmp)
        summary, records = run(
            args.cycles,
            args.seed,
            data_dir,
            partitions=args.partitions,
            rate_per_s=args.rate,
            fault_s=tuple(args.fault_s),
            client=args.client,
            log=stamp,
        )
    summary["elapsed_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(summary, indent=2, default=str))
    if args.json:
        args.json.write_text(
            json.dumps({"summary": summary, "records": [asdict(r) for r in records]}, indent=2, default=str)
        )
    ok = (
        not summary["lost"]
        and not summary["duplicated"]
        and not summary["wrong_offset"]
        and not summary["out_of_order_partitions"]
        and not summary["offsets_not_increasing"]
        and not summary["replica_diffs_per_cycle"]
        and not summary["replica_diffs_final"]
        and not summary["never_healed"]
        and not summary["harness_errors"]
        and (summary["heal_s_max"] or 0) <= args.heal_bound_s
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
