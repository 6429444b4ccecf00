"""Replication at scale (issue #19): three broker processes (``LocalCluster``), topics of RF 3
with ``min.insync.replicas=2``, judged by confluent-kafka (librdkafka). Every figure is printed
beside its peer measured in the same run, with the goal and the machine's load average.

Data path, per partition count (``--partitions``, default 1,000 and 4,000; a fresh cluster each,
with the heartbeat, session and Raft timing of ``conf/broker-1.properties``):

1. **idle CPU**: the RF 3 topic of N partitions (3N replicas) is created and every ISR is full;
   after ``IDLE_SETTLE_S`` (the creation's deferred file syncs), the CPU % of each broker process
   over ``--idle-s`` seconds of no client traffic
   (goal <= 2 % at 4,000 partitions).
2. **spread vs 6 partitions**: an idempotent ``acks=all`` producer (100-byte records, records
   assigned round-robin to every partition) into the N-partition topic, beside the same producer
   into a 6-partition RF 3 topic of the same cluster (goal >= 0.5x at 1,000, >= 0.3x at 4,000).
   Beside it, what bounds that ratio: the records per ProduceRequest (librdkafka sends one
   partition's batch per request, and its ``queue.buffering.max.messages`` of 100,000 spread
   over N partitions leaves ~100,000 / N records per batch) and the CPU the three brokers spend
   per ProduceRequest (its append, the followers' fetches and the acks=all completion).
3. **RF 3 vs RF 1**: the same producer shape with ``acks=1`` (not idempotent) into RF 1 topics of
   N and of 6 partitions: RF 3 ``acks=all`` over RF 1 ``acks=1`` (goal >= 0.5x, Kafka's
   replication benchmark measured 0.51x).

Each producer run is warmed up, then sends ``--records`` records or for ``--max-run-s`` seconds,
whichever ends first, and flushes; every record must be acknowledged.

Clients (``--connections``, default 1,000, on a fresh cluster): a probe producer (idempotent,
``acks=all``, ``linger.ms=0``, one record every 10 ms into a 6-partition RF 3 topic) measures its
produce latency (librdkafka's ``msg.latency()``, read in the delivery callback, which is
served by polling until the next send) alone, then while that many raw connections
(driven by a child process, sending pre-encoded frames) stay busy: 40 % producers (one ``acks=1`` Produce of one record per second each, to the leader
of their partition) and 60 % consumers (long-poll Fetch, ``max_wait_ms`` 500, of an empty
partition, sessionless). Goal: p99 with the connections <= 2x p99 alone, and each broker's peak
RSS within the README's bound (50 MB + 2 x (``queued.max.request.bytes`` +
``socket.request.max.bytes``) + ~6 KB per connection, with 32 MiB and 10 MiB configured here).

Control path: when ``bench/scale_cluster.py`` is present its ``measure(partitions)`` runs too
(CreateTopics until every ISR is full, full Metadata p50, failover and restart), so that one
``python -m bench scale`` prints every figure of issue #19.

Everything runs on 127.0.0.1; brokers are killed and their data dirs removed at the end.

    python bench/scale.py [--partitions 1000,4000] [--records 200000] [--connections 1000] [--quick]
    python bench/scale.py --no-data --no-control   # the clients run only
    python bench/scale.py --six-only               # the 6-partition RF 3 / RF 1 pair only (~1 min)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import console, emit_table, machine_summary
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.table import Table

from spark_kafkalite.local_cluster import LocalCluster
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.framing import encode_request
from spark_kafkalite.protocol.record_batch_writer import encode_batch

GOAL_SPREAD = {1000: 0.5, 4000: 0.3}
GOAL_RF3_OVER_RF1 = 0.5
GOAL_IDLE_CPU_PCT = 2.0
#: wait after every ISR is full before the idle window: the creation's deferred file syncs
#: (partition.metadata, leader-epoch-checkpoint of every new log) drain in the background first
IDLE_SETTLE_S = 15.0
GOAL_P99_FACTOR = 2.0
QUEUED_MAX_REQUEST_BYTES = 32 << 20
SOCKET_REQUEST_MAX_BYTES = 10 << 20
RSS_BOUND_MB = 50 + 2 * (QUEUED_MAX_REQUEST_BYTES + SOCKET_REQUEST_MAX_BYTES) / 2**20
VALUE = b"v" * 100
WAIT_S = 240.0
COLUMNS = ["figure", "partitions", "ours", "peer (same run)", "ratio", "goal", "note"]


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


#: Timing keys read from conf/broker-1.properties (the issue's set-up: 3 brokers from conf/).
CONF_TIMING_KEYS = (
    "broker.heartbeat.interval.ms",
    "broker.session.timeout.ms",
    "controller.quorum.election.timeout.ms",
)


def _conf_timing() -> dict[str, str]:
    """The heartbeat, session and Raft timing of ``conf/broker-1.properties`` (Kafka's defaults),
    instead of LocalCluster's test timing (heartbeats 8x as often, the Raft leader's
    AppendEntries 2x as often)."""
    conf = Path(__file__).resolve().parent.parent / "conf" / "broker-1.properties"
    pairs = (line.split("=", 1) for line in conf.read_text().splitlines() if "=" in line)
    values = {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}
    return {key: values[key] for key in CONF_TIMING_KEYS}


def _cluster(data_dir: str, extra: dict[str, str] | None = None) -> LocalCluster:
    overrides = {
        "min.insync.replicas": "2",
        "default.replication.factor": "3",
        "offsets.topic.replication.factor": "3",
        "replica.lag.time.max.ms": "30000",
        **(extra or {}),
    }
    return LocalCluster(
        brokers=3, data_dir=data_dir, config_overrides=overrides, startup_timeout_s=120
    ).start()


def _create(cluster: LocalCluster, topic: str, partitions: int, rf: int) -> float:
    """Create ``topic`` and wait until every broker shows every partition led with a full ISR;
    returns the seconds it took."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "socket.timeout.ms": 60000})
    config = {"min.insync.replicas": "2"} if rf > 1 else {}
    start = time.monotonic()
    admin.create_topics([NewTopic(topic, partitions, rf, config=config)], request_timeout=120)[topic].result(
        WAIT_S
    )
    admins = [AdminClient({"bootstrap.servers": cluster.broker_address(n)}) for n in cluster.node_ids]
    deadline = start + WAIT_S
    while True:
        full = True
        for a in admins:
            t = a.list_topics(topic, timeout=30).topics.get(topic)
            if (
                t is None
                or t.error is not None
                or len(t.partitions) < partitions
                or any(p.leader < 0 or len(p.isrs) < rf for p in t.partitions.values())
            ):
                full = False
                break
        if full:
            return time.monotonic() - start
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: not every ISR full within {WAIT_S:.0f} s")
        time.sleep(0.2)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_cpu(cluster: LocalCluster, window_s: float) -> dict[int, float]:
    """CPU % of each broker process over ``window_s`` seconds."""
    pids = {n: cluster.pid(n) for n in cluster.node_ids}
    before = {n: _cpu_s(p) for n, p in pids.items() if p is not None}
    start = time.monotonic()
    time.sleep(window_s)
    elapsed = time.monotonic() - start
    return {n: 100 * (_cpu_s(pids[n]) - b) / elapsed for n, b in before.items() if pids[n] is not None}


def _producer(cluster: LocalCluster, acks_all: bool, **extra: Any) -> Producer:
    config: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap_servers,
        "linger.ms": 5,
        "batch.size": 65536,
        "message.timeout.ms": 120000,
        **extra,
    }
    if acks_all:
        config.update({"acks": "all", "enable.idempotence": True})
    else:
        config.update({"acks": "1", "enable.idempotence": False})
    return Producer(config)


@dataclass(frozen=True)
class Rate:
    records: int
    seconds: float
    #: ProduceRequests librdkafka sent meanwhile (its statistics' per-broker ``req.Produce``) and
    #: the CPU seconds of every broker process meanwhile (0 when unknown)
    requests: int = 0
    broker_cpu_s: float = 0.0

    @property
    def per_s(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def records_per_request(self) -> float:
        return self.records / self.requests if self.requests else 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.broker_cpu_s / self.requests if self.requests else 0.0


class _ProduceRequests:
    """ProduceRequests sent so far by one librdkafka producer, from its statistics callback
    (``statistics.interval.ms``): the sum of every broker's ``req.Produce``. A report is kept
    as text and parsed only when asked for (it names every partition: megabytes at 4,000)."""

    INTERVAL_MS = 1000

    def __init__(self) -> None:
        self.last = ""
        self.updates = 0

    def on_stats(self, stats_json: str) -> None:
        self.last = stats_json
        self.updates += 1

    def fresh(self, producer: Producer) -> int:
        """The count from a report emitted after this call (waits up to one interval); -1 if
        none came. Call it with nothing in flight."""
        seen = self.updates
        deadline = time.monotonic() + 5 * self.INTERVAL_MS / 1000
        while self.updates <= seen and time.monotonic() < deadline:
            producer.poll(0.05)
        if self.updates <= seen:
            return -1
        brokers = json.loads(self.last).get("brokers", {})
        return sum(int(b.get("req", {}).get("Produce", 0)) for b in brokers.values())


def _brokers_cpu_s(cluster: LocalCluster) -> float:
    pids = [cluster.pid(n) for n in cluster.node_ids]
    return sum(_cpu_s(p) for p in pids if p is not None)


def _produce(
    cluster: LocalCluster, topic: str, partitions: int, acks_all: bool, records: int, max_s: float
) -> Rate:
    """Warm up, then produce round-robin over every partition until ``records`` are sent or
    ``max_s`` passed; flush. Raises RuntimeError if any record failed or stayed unflushed."""
    requests = _ProduceRequests()
    producer = _producer(
        cluster,
        acks_all,
        **{"statistics.interval.ms": _ProduceRequests.INTERVAL_MS, "stats_cb": requests.on_stats},
    )
    failed: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    for i in range(max(2000, partitions * 2)):  # warm-up: metadata, producer id, every partition
        _send(producer, topic, i % partitions, on_delivery)
    if producer.flush(WAIT_S):
        raise RuntimeError(f"{topic}: warm-up not flushed")
    requests_before = requests.fresh(producer)
    cpu_before = _brokers_cpu_s(cluster)
    sent = 0
    start = time.perf_counter()
    deadline = start + max_s
    while sent < records:
        _send(producer, topic, sent % partitions, on_delivery)
        sent += 1
        if sent % 1000 == 0:
            producer.poll(0)
            if time.perf_counter() > deadline:
                break
    remaining = producer.flush(WAIT_S)
    elapsed = time.perf_counter() - start
    cpu_s = _brokers_cpu_s(cluster) - cpu_before
    if remaining or failed:
        raise RuntimeError(f"{topic}: {remaining} unflushed, {len(failed)} failed (e.g. {failed[:2]})")
    requests_after = requests.fresh(producer)
    sent_requests = requests_after - requests_before if min(requests_before, requests_after) >= 0 else 0
    return Rate(sent, elapsed, sent_requests, cpu_s)


def _send(producer: Producer, topic: str, partition: int, cb: Any) -> None:
    while True:
        try:
            producer.produce(topic, VALUE, partition=partition, on_delivery=cb)
            return
        except BufferError:
            producer.poll(0.005)


def _row(
    figure: str, partitions: int, ours: str, peer: str, ratio: float | None, goal: str, note: str
) -> list[str]:
    return [figure, f"{partitions:,}", ours, peer, "-" if ratio is None else f"{ratio:.2f}x", goal, note]


def measure_data_path(partitions: int, records: int, max_run_s: float, idle_s: float) -> list[list[str]]:
    """Idle CPU, spread-vs-6 and RF 3-vs-RF 1 for one partition count on a fresh cluster."""
    rows: list[list[str]] = []
    suffix = uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as data_dir:
        cluster = _cluster(data_dir, _conf_timing())
        try:
            spread3 = f"spread-rf3-{suffix}"
            created_s = _create(cluster, spread3, partitions, 3)
            console.print(f"[dim]{partitions} partitions RF 3: every ISR full after {created_s:.1f} s[/dim]")
            time.sleep(IDLE_SETTLE_S)
            cpu = _idle_cpu(cluster, idle_s)
            worst = max(cpu.values())
            rows.append(
                _row(
                    "idle CPU per broker, % (worst broker)",
                    partitions,
                    f"{worst:.1f}",
                    " / ".join(f"{cpu[n]:.1f}" for n in sorted(cpu)),
                    None,
                    f"<= {GOAL_IDLE_CPU_PCT:g} at 4,000",
                    f"{_load()}; {3 * partitions:,} replicas, {idle_s:.0f} s window {IDLE_SETTLE_S:.0f} s after, conf/ timing; peer column: each broker",
                )
            )
            six3, six1, spread1 = f"six-rf3-{suffix}", f"six-rf1-{suffix}", f"spread-rf1-{suffix}"
            _create(cluster, six3, 6, 3)
            _create(cluster, six1, 6, 1)
            _create(cluster, spread1, partitions, 1)
            rate = {
                "spread3": _produce(cluster, spread3, partitions, True, records, max_run_s),
                "six3": _produce(cluster, six3, 6, True, records, max_run_s),
                "spread1": _produce(cluster, spread1, partitions, False, records, max_run_s),
                "six1": _produce(cluster, six1, 6, False, records, max_run_s),
            }
        finally:
            cluster.stop()
    goal = GOAL_SPREAD.get(partitions)
    rows.append(
        _row(
            "acks=all idempotent: spread over N / into 6 partitions, records/s",
            partitions,
            f"{rate['spread3'].per_s:,.0f}",
            f"{rate['six3'].per_s:,.0f}",
            rate["spread3"].per_s / rate["six3"].per_s,
            "-" if goal is None else f">= {goal:g}x",
            f"{_load()}; RF 3, min.insync.replicas=2; {rate['spread3'].records:,} / {rate['six3'].records:,} records",
        )
    )
    spread, six = rate["spread3"], rate["six3"]
    rows.append(
        _row(
            "acks=all idempotent: records per ProduceRequest, spread over N / into 6 partitions",
            partitions,
            f"{spread.records_per_request:,.1f}",
            f"{six.records_per_request:,.1f}",
            spread.records_per_request / six.records_per_request if six.records_per_request else None,
            "-",
            f"librdkafka's statistics; broker CPU per ProduceRequest (3 brokers): {spread.cpu_ms_per_request:.1f} / "
            f"{six.cpu_ms_per_request:.1f} ms; {spread.requests:,} / {six.requests:,} requests",
        )
    )
    for shape, ours, peer in ((f"{partitions:,}", "spread3", "spread1"), ("6", "six3", "six1")):
        rows.append(
            _row(
                f"RF 3 acks=all / RF 1 acks=1, {shape} partitions, records/s",
                partitions,
                f"{rate[ours].per_s:,.0f}",
                f"{rate[peer].per_s:,.0f}",
                rate[ours].per_s / rate[peer].per_s,
                f">= {GOAL_RF3_OVER_RF1:g}x",
                f"{_load()}; same producer, {rate[ours].records:,} / {rate[peer].records:,} records",
            )
        )
    return rows


def measure_six(records: int, max_run_s: float, rounds: int = 2) -> list[list[str]]:
    """The 6-partition RF 3 ``acks=all`` / RF 1 ``acks=1`` pair alone, alternated ``rounds``
    times on one fresh cluster, with the brokers' CPU per MB produced beside each rate."""
    rows: list[list[str]] = []
    suffix = uuid.uuid4().hex[:6]
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as data_dir:
        cluster = _cluster(data_dir, _conf_timing())
        try:
            six3, six1 = f"six-rf3-{suffix}", f"six-rf1-{suffix}"
            _create(cluster, six3, 6, 3)
            _create(cluster, six1, 6, 1)
            pids = [pid for pid in (cluster.pid(n) for n in cluster.node_ids) if pid is not None]
            for _ in range(rounds):
                rate: dict[str, Rate] = {}
                cpu_per_mb: dict[str, float] = {}
                for name, topic, acks_all in (("rf3", six3, True), ("rf1", six1, False)):
                    before = sum(_cpu_s(pid) for pid in pids)
                    rate[name] = _produce(cluster, topic, 6, acks_all, records, max_run_s)
                    megabytes = rate[name].records * len(VALUE) / 1e6
                    cpu_per_mb[name] = (sum(_cpu_s(pid) for pid in pids) - before) / megabytes
                rows.append(
                    _row(
                        "RF 3 acks=all / RF 1 acks=1, 6 partitions, records/s",
                        6,
                        f"{rate['rf3'].per_s:,.0f}",
                        f"{rate['rf1'].per_s:,.0f}",
                        rate["rf3"].per_s / rate["rf1"].per_s,
                        f">= {GOAL_RF3_OVER_RF1:g}x",
                        f"{_load()}; brokers' CPU {cpu_per_mb['rf3']:.3f} / {cpu_per_mb['rf1']:.3f} s per MB "
                        f"of values (warm-up included)",
                    )
                )
        finally:
            cluster.stop()
    return rows


# ---------------------------------------------------------------------------------------------
# many client connections


def _produce_frame(topic: str, partition: int, correlation_id: int) -> bytes:
    cls = request_class(ApiKey.PRODUCE, 3)
    topic_cls = nested(cls, "TopicProduceData")
    part_cls = nested(cls, "PartitionProduceData")
    batch = encode_batch([(None, VALUE, int(time.time() * 1000), [])])
    request = build(
        cls,
        transactional_id=None,
        acks=1,
        timeout=5000,
        topic_data=(topic_cls(name=topic, partition_data=(part_cls(index=partition, records=batch),)),),
    )
    return encode_request(request, correlation_id, "bench-scale-producer")


def _fetch_frame(topic: str, partition: int, correlation_id: int) -> bytes:
    cls = request_class(ApiKey.FETCH, 4)
    topic_cls = nested(cls, "FetchTopic")
    part_cls = nested(cls, "FetchPartition")
    request = build(
        cls,
        replica_id=-1,
        max_wait=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=(
            topic_cls(
                topic=topic,
                partitions=(
                    build(part_cls, partition=partition, fetch_offset=0, partition_max_bytes=1 << 20),
                ),
            ),
        ),
    )
    return encode_request(request, correlation_id, "bench-scale-consumer")


_SIZE = struct.Struct(">i")
_CORRELATION_ID = struct.Struct(">i")
_CORRELATION_ID_OFFSET = 8  # size (4), api_key (2), api_version (2), then the correlation id
_GOLDEN_RATIO_STEP = 0.6180339887498949


class _Load:
    """The raw client connections, driven by a child process (``scale.py --load-driver``, one
    event loop): the driver's Python work never holds the GIL of this process, whose probe
    producer's delivery callbacks (where ``msg.latency()`` is read) must not wait for it.

    Args:
        targets: one ``(host, port, kind, topic, partition)`` per connection, kind ``produce``
            or ``fetch``.
    """

    def __init__(self, targets: list[tuple[str, int, str, str, int]]) -> None:
        self.targets = targets
        self._status: dict[str, Any] = {"connected": 0, "responses": 0, "errors": 0, "last_error": ""}
        self._ready = threading.Event()

    @property
    def connected(self) -> int:
        return int(self._status["connected"])

    @property
    def responses(self) -> int:
        return int(self._status["responses"])

    @property
    def errors(self) -> int:
        return int(self._status["errors"])

    @property
    def last_error(self) -> str:
        return str(self._status["last_error"])

    @property
    def pid(self) -> int:
        return self._proc.pid

    def start(self) -> None:
        """Start the driver and wait until every connection is open or failed.

        Raises:
            TimeoutError: not within ``WAIT_S``.
        """
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--load-driver"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(self.targets) + "\n")
        self._proc.stdin.flush()
        self._reader = threading.Thread(target=self._read_status, daemon=True)
        self._reader.start()
        if not self._ready.wait(WAIT_S):
            self.stop()
            raise TimeoutError("client connections not established")

    def _read_status(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._status = json.loads(line)
            if self._status["ready"]:
                self._ready.set()

    def stop(self) -> None:
        """Close the driver's stdin (it closes its connections and exits) and wait for it."""
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(5)
        self._reader.join(5)


@dataclass
class _LoadDriver:
    """The child side of :class:`_Load`: the connections on one event loop; its counters go to
    stdout as one JSON line every 0.2 s."""

    targets: list[tuple[str, int, str, str, int]]
    connected: int = 0
    responses: int = 0
    errors: int = 0
    last_error: str = ""

    async def main(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        threading.Thread(  # the parent closes our stdin to stop us
            target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(stop.set)), daemon=True
        ).start()
        tasks = []
        for i, target in enumerate(self.targets):
            # Each connection's own phase within the second (golden-ratio steps: spread evenly
            # over any subset, e.g. the consumers of one broker), as independent clients have.
            # One phase per partition would start its 13-20 connections in lock-step: their
            # long polls would expire, and their produces arrive, as one burst each time.
            phase_s = (i * _GOLDEN_RATIO_STEP) % 1.0
            tasks.append(asyncio.create_task(self._client(*target, phase_s)))
            if i % 50 == 49:
                await asyncio.sleep(0.05)  # ramp up (the accept queue is finite)
        while not stop.is_set():
            ready = self.connected + self.errors >= len(self.targets)
            status = {
                "ready": ready,
                "connected": self.connected,
                "responses": self.responses,
                "errors": self.errors,
                "last_error": self.last_error,
            }
            print(json.dumps(status), flush=True)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2 if ready else 0.05)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _client(
        self, host: str, port: int, kind: str, topic: str, partition: int, phase_s: float
    ) -> None:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            self.errors += 1
            return
        self.connected += 1
        # Encoded once; each request is a copy with the next correlation id patched in (the
        # driver shares one event loop with 1,000 connections: re-encoding every request cost it
        # more CPU than the brokers spend answering).
        encode = _produce_frame if kind == "produce" else _fetch_frame
        template = encode(topic, partition, 0)
        frame = bytearray(template)
        correlation_id = 0
        try:
            await asyncio.sleep(phase_s)
            while True:
                correlation_id += 1
                _CORRELATION_ID.pack_into(frame, _CORRELATION_ID_OFFSET, correlation_id)
                writer.write(bytes(frame))  # encode_request includes the size prefix
                if writer.transport.get_write_buffer_size():
                    await writer.drain()
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                await reader.readexactly(size)
                self.responses += 1
                if kind == "produce":
                    await asyncio.sleep(1.0)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - counted and shown in the table's note
            self.errors += 1
            self.last_error = repr(exc)
        finally:
            writer.close()


def _probe(cluster: LocalCluster, topic: str, seconds: float) -> list[float]:
    """Latencies (ms) of one record every 10 ms for ``seconds`` (idempotent acks=all, linger 0)."""
    producer = _producer(cluster, True, **{"linger.ms": 0})
    latencies: list[float] = []
    failed: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            latencies.append(msg.latency() * 1000)

    for i in range(200):  # warm-up
        producer.produce(topic, VALUE, partition=i % 6)
    producer.flush(60)
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        producer.produce(topic, VALUE, partition=i % 6, on_delivery=on_delivery)
        i += 1
        # msg.latency() is taken when the delivery callback runs (librdkafka's
        # rd_kafka_message_latency: now - enqueue time), so the callbacks must be served as soon
        # as their reports arrive: poll until the next send rather than sleep (a sleep would
        # round every latency up to the 10 ms send period)
        while (wait_s := start + i * 0.01 - time.monotonic()) > 0:
            producer.poll(wait_s)
    if producer.flush(60) or failed:
        raise RuntimeError(f"probe: records failed or unflushed (e.g. {failed[:2]})")
    return latencies


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure_clients(connections: int, probe_s: float) -> list[list[str]]:
    """Probe-producer p99 alone vs with ``connections`` busy raw connections, and broker RSS."""
    suffix = uuid.uuid4().hex[:6]
    extra = {
        "queued.max.request.bytes": str(QUEUED_MAX_REQUEST_BYTES),
        "socket.request.max.bytes": str(SOCKET_REQUEST_MAX_BYTES),
    }
    with tempfile.TemporaryDirectory(prefix="bench-scale-clients-") as data_dir:
        cluster = _cluster(data_dir, extra)
        try:
            probe_topic, load_topic, idle_topic = f"probe-{suffix}", f"load-{suffix}", f"idle-{suffix}"
            _create(cluster, probe_topic, 6, 3)
            _create(cluster, load_topic, 30, 3)
            _create(cluster, idle_topic, 30, 3)
            md = cluster.metadata()
            targets = []
            for i in range(connections):
                kind, topic = ("produce", load_topic) if i % 5 < 2 else ("fetch", idle_topic)
                partition = i % 30
                leader = md.partitions[topic][partition].leader
                host, port = cluster.broker_address(leader).rsplit(":", 1)
                targets.append((host, int(port), kind, topic, partition))
            pids = {n: cluster.pid(n) for n in cluster.node_ids}
            alone = _probe(cluster, probe_topic, probe_s)
            rss_before = max(_rss_mb(p) for p in pids.values() if p is not None)
            load = _Load(targets)
            load.start()
            try:
                peak = [0.0]
                sampling = threading.Event()

                def sample() -> None:
                    while not sampling.is_set():
                        peak[0] = max(peak[0], *(_rss_mb(p) for p in pids.values() if p is not None))
                        sampling.wait(0.2)

                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
                time.sleep(2)
                responses_before, loaded_from = load.responses, time.monotonic()
                loaded = _probe(cluster, probe_topic, probe_s)
                responses_per_s = (load.responses - responses_before) / (time.monotonic() - loaded_from)
                sampling.set()
                sampler.join(5)
            finally:
                load.stop()
        finally:
            cluster.stop()
    bound = RSS_BOUND_MB + connections * 6 / 1024
    p99_alone, p99_loaded = _p(alone, 0.99), _p(loaded, 0.99)
    return [
        _row(
            f"probe produce p99 with {connections:,} connections / alone, ms",
            6,
            f"{p99_loaded:.1f}",
            f"{p99_alone:.1f}",
            p99_alone / p99_loaded if p99_loaded else None,
            f">= {1 / GOAL_P99_FACTOR:g}x (p99 <= {GOAL_P99_FACTOR:g}x alone)",
            f"{_load()}; p50 {statistics.median(loaded):.1f} / {statistics.median(alone):.1f} ms; "
            f"{load.connected:,} connected, {load.errors} errors{' ' + load.last_error if load.errors else ''}, "
            f"{responses_per_s:,.0f} responses/s",
        ),
        _row(
            f"peak broker RSS with {connections:,} connections, MB",
            6,
            f"{peak[0]:.0f}",
            f"{rss_before:.0f} before",
            None,
            f"<= {bound:.0f} (README bound)",
            f"queued.max.request.bytes={QUEUED_MAX_REQUEST_BYTES >> 20} MiB, "
            f"socket.request.max.bytes={SOCKET_REQUEST_MAX_BYTES >> 20} MiB",
        ),
    ]


# ---------------------------------------------------------------------------------------------


def print_rows(title: str, rows: list[list[str]]) -> None:
    """Print ``rows`` (``COLUMNS``) as one table and emit it for ``python -m bench``."""
    table = Table(title=title)
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("figure", "note", "goal") else "right")
    for row in rows:
        table.add_row(*row)
    emit_table(title, COLUMNS, rows)
    console.print(table)


def _control_path(partitions: list[int]) -> None:
    """``bench/scale_cluster.py``'s ``measure(partitions) -> rows`` and ``print_rows(title,
    rows)``, when that module is present (the control-path half of issue #19)."""
    if not (Path(__file__).resolve().parent / "scale_cluster.py").exists():
        console.print("[dim]bench/scale_cluster.py not present: control-path figures skipped[/dim]")
        return
    scale_cluster = importlib.import_module("scale_cluster")
    rows: list[list[str]] = []
    for n in partitions:
        console.print(f"[dim]control path, {n:,} partitions ...[/dim]")
        rows.extend(scale_cluster.measure(n))
    scale_cluster.print_rows(
        "control path at scale: 3 brokers, one topic of RF 3, min.insync.replicas=2", rows
    )


def main() -> None:
    if sys.argv[1:] == ["--load-driver"]:  # the child process of _Load
        targets = [tuple(t) for t in json.loads(sys.stdin.readline())]
        asyncio.run(_LoadDriver(targets).main())  # type: ignore[arg-type]
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", default="1000,4000", help="comma-separated partition counts")
    parser.add_argument("--records", type=int, default=300_000, help="records per producer run (at most)")
    parser.add_argument("--max-run-s", type=float, default=20.0, help="stop sending after this long")
    parser.add_argument("--idle-s", type=float, default=15.0, help="idle CPU window")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--probe-s", type=float, default=10.0)
    parser.add_argument("--no-control", action="store_true", help="skip bench/scale_cluster.py")
    parser.add_argument("--no-clients", action="store_true", help="skip the many-connections run")
    parser.add_argument(
        "--no-data", action="store_true", help="skip the data-path runs (idle CPU, spread, RF)"
    )
    parser.add_argument("--quick", action="store_true", help="1,000 partitions, shorter runs (~3 min)")
    parser.add_argument(
        "--six-only",
        action="store_true",
        help="only the 6-partition RF 3 acks=all / RF 1 acks=1 pair, twice (no idle, spread, clients, control)",
    )
    args = parser.parse_args()
    if args.six_only:
        console.print(f"[dim]{machine_summary()}; {_load()} at the start[/dim]")
        print_rows(
            "RF 3 vs RF 1, 6 partitions: 3 brokers, min.insync.replicas=2, same producer",
            measure_six(args.records, args.max_run_s),
        )
        return
    if args.quick:
        args.partitions, args.records, args.max_run_s, args.idle_s = "1000", 100_000, 8.0, 8.0
        args.probe_s, args.no_control = 5.0, True
    partitions = [int(p) for p in args.partitions.split(",") if p.strip()]
    started = time.monotonic()
    console.print(f"[dim]{machine_summary()}; {_load()} at the start[/dim]")
    rows: list[list[str]] = []
    for n in [] if args.no_data else partitions:
        console.print(f"[dim]data path, {n:,} partitions ...[/dim]")
        rows.extend(measure_data_path(n, args.records, args.max_run_s, args.idle_s))
    if rows:
        print_rows("data path at scale: 3 brokers, RF 3 min.insync.replicas=2 vs peers in the same run", rows)
    if not args.no_clients:
        print_rows(
            "many clients: 3 brokers, probe producer alone vs beside busy connections",
            measure_clients(args.connections, args.probe_s),
        )
    if not args.no_control:
        _control_path(partitions)
    console.print(f"[dim]{machine_summary()}; {_load()} at the end; {time.monotonic() - started:.0f} s[/dim]")


if __name__ == "__main__":
    sys.exit(main())
