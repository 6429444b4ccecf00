"""Replication cost and failover time on a three-broker ``LocalCluster`` (real processes).

1. Throughput: confluent-kafka (librdkafka) produces N records of 100 bytes with ``acks=all``
   (idempotent) to an RF=1 topic and to an RF=3 topic (``min.insync.replicas=2``) of the same
   cluster, in the same run; each is warmed up first; timed from the first ``produce`` to the
   end of ``flush``; every record must be acknowledged.
2. Failover: a paced ``acks=all`` load (2,000 records/s) runs against a 1-partition RF=3 topic;
   the leader is killed with SIGKILL; the time from the kill to the first acknowledgement of a
   record *sent after the kill* is the failover time (it includes the controller noticing the
   dead broker after ``broker.session.timeout.ms``, the election, the new leader's HW catching
   up, and librdkafka's metadata refresh). Repeated ``--failovers`` times (a killed broker is
   restarted and rejoins the ISR before the next round).

    python bench/replication.py [--records 100000] [--failovers 2] [--session-timeout-ms 4000]
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
import uuid

from _common import Result, base_parser, console, make_value, print_table
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from spark_kafkalite.local_cluster import LocalCluster


def _create(cluster: LocalCluster, rf: int, partitions: int) -> str:
    topic = f"bench-rf{rf}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    configs = {"min.insync.replicas": "2"} if rf > 1 else {}
    admin.create_topics([NewTopic(topic, partitions, rf, config=configs)])[topic].result(30)
    for p in range(partitions):
        cluster.wait_for_leader(topic, p, timeout_s=30)
        cluster.wait_for_isr(topic, p, rf, timeout_s=30)
    return topic


def _producer(cluster: LocalCluster) -> Producer:
    return Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.size": 65536,
            "message.timeout.ms": 60000,
        }
    )


def _throughput(cluster: LocalCluster, rf: int, records: int, partitions: int) -> Result:
    topic = _create(cluster, rf, partitions)
    producer = _producer(cluster)
    value = make_value()
    failed: list[str] = []

    def cb(err, _msg) -> None:  # type: ignore[no-untyped-def]
        if err is not None:
            failed.append(str(err))

    for _ in range(2000):  # warm-up
        producer.produce(topic, value, callback=cb)
    producer.flush(60)
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, callback=cb)
                break
            except BufferError:
                producer.poll(0.001)
        producer.poll(0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or failed:
        raise RuntimeError(f"RF={rf}: {remaining} unflushed, {len(failed)} failed (e.g. {failed[:2]})")
    return Result(
        f"confluent-kafka acks=all RF={rf}",
        records,
        elapsed,
        records * len(value),
        note=f"{partitions} partitions" + (", min.insync.replicas=2" if rf > 1 else ""),
    )


def _failover_once(cluster: LocalCluster) -> tuple[float, int]:
    topic = _create(cluster, 3, 1)
    leader = cluster.wait_for_leader(topic, 0)
    producer = _producer(cluster)
    stop = threading.Event()
    acked: list[tuple[int, float]] = []
    sent = [0]
    lock = threading.Lock()

    def cb(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            with lock:
                acked.append((int(msg.value()), time.monotonic()))

    def load() -> None:
        seq = 0
        next_t = time.monotonic()
        while not stop.is_set():
            producer.produce(topic, str(seq).encode(), callback=cb)
            seq += 1
            sent[0] = seq
            producer.poll(0)
            next_t += 1 / 2000
            time.sleep(max(0.0, next_t - time.monotonic()))
        producer.flush(60)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    while len(acked) < 2000:
        time.sleep(0.01)
    killed_at = time.monotonic()
    cluster.kill(leader)
    sent_at_kill = sent[0]
    deadline = killed_at + 60
    first: float | None = None
    while first is None and time.monotonic() < deadline:
        with lock:
            first = next((t for seq, t in acked if seq >= sent_at_kill), None)
        time.sleep(0.005)
    stop.set()
    thread.join(60)
    if first is None:
        raise RuntimeError("no record sent after the kill was acknowledged within 60 s")
    cluster.restart(leader)
    cluster.wait_for_isr(topic, 0, 3, timeout_s=60)
    return first - killed_at, leader


def main() -> None:
    parser = base_parser(__doc__ or "", default_records=100_000)
    parser.add_argument("--failovers", type=int, default=2)
    parser.add_argument("--session-timeout-ms", type=int, default=4000, help="broker.session.timeout.ms")
    args = parser.parse_args()
    overrides = {
        "broker.session.timeout.ms": str(args.session_timeout_ms),
        "broker.heartbeat.interval.ms": str(max(args.session_timeout_ms // 8, 100)),
    }
    with tempfile.TemporaryDirectory(prefix="bench-repl-") as data_dir:
        cluster = LocalCluster(brokers=3, data_dir=data_dir, config_overrides=overrides).start()
        try:
            results = [
                _throughput(cluster, 1, args.records, args.partitions),
                _throughput(cluster, 3, args.records, args.partitions),
            ]
            print_table(f"acks=all produce, {args.records:,} x 100-byte records, 3 broker processes", results)
            times = []
            for i in range(args.failovers):
                seconds, killed = _failover_once(cluster)
                times.append(seconds)
                console.print(
                    f"failover {i + 1}: kill -9 of leader {killed} -> first ack after {seconds:.2f} s"
                )
            if times:
                console.print(
                    f"failover time (kill -9 of the leader -> first acknowledged produce on the new leader): "
                    f"median {statistics.median(times):.2f} s, max {max(times):.2f} s over {len(times)} run(s); "
                    f"broker.session.timeout.ms={args.session_timeout_ms}"
                )
        finally:
            cluster.stop()


if __name__ == "__main__":
    main()
