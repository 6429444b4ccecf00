"""Control-path scale figures of a three-broker cluster (issue #19): how long metadata work takes
as the partition count grows.

A three-broker ``LocalCluster`` (real processes, combined broker + controller nodes) with the
heartbeat, session and Raft timing of ``conf/broker-{1,2,3}.properties`` (``CONF_TIMING``: the
set-up of the issue's figures; ``--local-cluster-timing`` keeps LocalCluster's tighter
defaults, a 2 s session). Per partition count, one topic of RF 3
with ``min.insync.replicas=2``; measured in order:

* **create**: CreateTopics sent (confluent-kafka ``AdminClient``) -> every running broker's
  Metadata shows every partition with a leader and an ISR of 3 (goal <= 10 s at 4,000);
* **metadata**: p50 of a full Metadata request (all topics) answered by one broker, timed three
  ways in the same run: librdkafka's C API ``rd_kafka_metadata()`` (a request on the wire every
  call, parsed into librdkafka's C structs; goal <= 15 ms at 4,000), confluent-kafka's
  ``list_topics()`` (the same call plus one Python object per partition built by the binding),
  and a raw socket (the broker's share alone);
* **idle CPU**: CPU % of each broker process over a quiet window (shared goal <= 2 %);
* **failover**: ``kill -9`` of the broker leading the most partitions -> a surviving broker's
  Metadata shows every partition led by a live broker (goal: session timeout + 2 s);
* **restart**: the killed broker started again (same data dir, so its logs are recovered after
  the unclean shutdown) -> every running broker shows every ISR full again (goal <= 15 s).

Each figure sits beside its goal; the machine's load average is printed with them (2 shared cores
make wall-clock figures noisy). :func:`measure` is what ``bench/scale.py`` calls.

    python bench/scale_cluster.py [--partitions 1000 4000] [--records-per-partition 10]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import socket
import statistics
import struct
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
from _common import console, emit_table, machine_summary
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from rich.table import Table

from spark_kafkalite.local_cluster import MULTI_NODE_DEFAULTS, LocalCluster
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build
from spark_kafkalite.protocol.framing import encode_request

#: Timing keys of conf/broker-{1,2,3}.properties.
CONF_TIMING = {
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
    "controller.quorum.election.timeout.ms": "1000",
}
GOAL_CREATE_S_AT_4000 = 10.0
GOAL_METADATA_P50_MS_AT_4000 = 15.0
GOAL_FAILOVER_OVER_SESSION_S = 2.0
GOAL_RESTART_S = 15.0
GOAL_IDLE_CPU_PCT = 2.0
WAIT_S = 120.0
METADATA_REQUESTS = 30
IDLE_WINDOW_S = 10.0
COLUMNS = ["figure", "partitions", "measured", "goal", "note"]


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 180000})


def _view(admin: AdminClient, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader, ISR size) as one broker answers a Metadata request for ``topic``."""
    md = admin.list_topics(topic, timeout=30)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p.id: (p.leader, len(p.isrs)) for p in t.partitions.values()}


def _wait(
    admins: list[AdminClient], topic: str, ok: Callable[[dict[int, tuple[int, int]]], bool], timeout_s: float
) -> float:
    """Poll each broker's Metadata until ``ok`` holds on all of them; returns the monotonic time
    it first held everywhere. A round stops at the first broker where it does not hold yet, and
    rounds are 0.1 s apart: a full Metadata of thousands of partitions costs the broker real
    work, so polling every broker as fast as possible would slow down what it measures.

    Raises:
        TimeoutError: not within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    last: list[Any] = []
    while True:
        try:
            last = []
            for a in admins:
                last.append(_view(a, topic))
                if not ok(last[-1]):
                    break
            else:
                return time.monotonic()
        except Exception as exc:  # noqa: BLE001 - a broker restarting or not answering yet: poll again
            last = [exc]
        if time.monotonic() > deadline:
            summary = [
                v if not isinstance(v, dict) else sorted({(lv, n) for lv, n in v.values()}) for v in last
            ]
            raise TimeoutError(
                f"{topic}: condition not met within {timeout_s:.0f} s; (leader, ISR size) seen: {summary}"
            )
        time.sleep(0.1)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes from ``sock``.

    Raises:
        ConnectionError: the broker closed the connection first.
    """
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed with {left} of {size} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _raw_metadata_ms(address: str, requests: int) -> list[float]:
    """Round-trip times (ms) of a full Metadata v12 request (all topics) on one connection: the
    broker's own share of a Metadata request, without any client's parsing of the answer."""
    host, port = address.rsplit(":", 1)
    request = build(
        request_class(ApiKey.METADATA, 12),
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    times_ms = []
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for correlation_id in range(requests):
            frame = encode_request(request, correlation_id=correlation_id, client_id="bench-scale")
            t0 = time.perf_counter()
            sock.sendall(frame)
            (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
            _recv_exactly(sock, size)
            times_ms.append((time.perf_counter() - t0) * 1000)
    return times_ms


def _librdkafka_metadata_ms(bootstrap_servers: str, requests: int) -> list[float]:
    """Times (ms) of ``rd_kafka_metadata(rk, all_topics=1, ...)`` through librdkafka's C API (the
    library confluent-kafka bundles, loaded with ctypes): librdkafka sends a Metadata request on
    every call (it times out while the broker is paused) and parses the answer into its C structs,
    so this is the peer client's full Metadata request without the Python binding's objects."""
    libs = glob.glob(
        os.path.join(os.path.dirname(confluent_kafka.__file__), "..", "confluent_kafka.libs", "librdkafka*")
    )
    if not libs:
        raise RuntimeError("confluent-kafka's bundled librdkafka was not found next to the package")
    lib = ctypes.CDLL(libs[0])
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_metadata.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_int,
    ]
    lib.rd_kafka_metadata_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    errstr = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    if (
        lib.rd_kafka_conf_set(conf, b"bootstrap.servers", bootstrap_servers.encode(), errstr, len(errstr))
        != 0
    ):
        raise RuntimeError(f"rd_kafka_conf_set: {errstr.value.decode()}")
    handle = lib.rd_kafka_new(0, conf, errstr, len(errstr))  # RD_KAFKA_PRODUCER
    if not handle:
        raise RuntimeError(f"rd_kafka_new: {errstr.value.decode()}")
    metadata = ctypes.c_void_p()
    times_ms = []
    try:
        for _ in range(requests + 1):  # the first call also connects: not timed
            t0 = time.perf_counter()
            error = lib.rd_kafka_metadata(handle, 1, None, ctypes.byref(metadata), 30_000)
            elapsed_ms = (time.perf_counter() - t0) * 1000
            if error != 0:
                raise RuntimeError(f"rd_kafka_metadata failed with librdkafka error {error}")
            lib.rd_kafka_metadata_destroy(metadata)
            times_ms.append(elapsed_ms)
    finally:
        lib.rd_kafka_destroy(handle)
    return times_ms[1:]


def _all_led_full(partitions: int, not_leader: int = -1) -> Callable[[dict[int, tuple[int, int]]], bool]:
    def ok(view: dict[int, tuple[int, int]]) -> bool:
        return len(view) == partitions and all(
            leader >= 0 and leader != not_leader and isr == 3 for leader, isr in view.values()
        )

    return ok


def _all_led(partitions: int, not_leader: int) -> Callable[[dict[int, tuple[int, int]]], bool]:
    def ok(view: dict[int, tuple[int, int]]) -> bool:
        return len(view) == partitions and all(
            leader >= 0 and leader != not_leader for leader, _ in view.values()
        )

    return ok


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_cpu(cluster: LocalCluster, window_s: float) -> dict[int, float]:
    pids = {n: cluster.pid(n) for n in cluster.running_node_ids()}
    before = {n: _cpu_s(pid) for n, pid in pids.items() if pid is not None}
    start = time.monotonic()
    time.sleep(window_s)
    elapsed = time.monotonic() - start
    return {n: 100 * (_cpu_s(pids[n]) - before[n]) / elapsed for n in before if pids[n] is not None}


def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    if per_partition <= 0:
        return
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    value = b"x" * 100
    for p in range(partitions):
        for _ in range(per_partition):
            producer.produce(topic, value, partition=p)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError("records not acknowledged within 120 s")


def _add(rows: list[list[str]], row: list[str]) -> None:
    rows.append(row)
    console.print(f"[dim]{row[1]} partitions: {row[0]}: {row[2]} (goal {row[3]}; {row[4]})[/dim]")


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f}/{five:.1f}"


def measure(
    partitions: int,
    records_per_partition: int = 10,
    idle_window_s: float = IDLE_WINDOW_S,
    timing: dict[str, str] | None = None,
) -> list[list[str]]:
    """Run the five measurements for one partition count on a fresh cluster; returns table rows
    (``COLUMNS``). The cluster and its data dir are removed before returning.

    Raises:
        TimeoutError: a wait exceeded ``WAIT_S``.
        RuntimeError: the cluster failed to start or the fill was not acknowledged.
    """
    timing = CONF_TIMING if timing is None else timing
    session_s = int({**MULTI_NODE_DEFAULTS, **timing}["broker.session.timeout.ms"]) / 1000
    scaled = partitions / 4000
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-ctl-") as data_dir:
        cluster = LocalCluster(
            brokers=3, data_dir=data_dir, config_overrides=dict(timing), startup_timeout_s=120
        ).start()
        try:
            admins = {n: _admin(cluster.broker_address(n)) for n in cluster.node_ids}
            topic = f"scale-{partitions}-{uuid.uuid4().hex[:6]}"
            # -- create
            start = time.monotonic()
            futures = admins[1].create_topics(
                [NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})], request_timeout=120
            )
            futures[topic].result(WAIT_S)
            done = _wait(list(admins.values()), topic, _all_led_full(partitions), WAIT_S)
            _add(
                rows,
                [
                    "CreateTopics -> every ISR full on every broker, s",
                    str(partitions),
                    f"{done - start:.2f}",
                    f"<= {GOAL_CREATE_S_AT_4000 * scaled:.1f}" if partitions != 4000 else "<= 10.0",
                    f"{_load()}; goal scaled from 10 s at 4,000",
                ],
            )
            _fill(cluster.bootstrap_servers, topic, partitions, records_per_partition)
            # -- full Metadata p50 (one broker, all topics)
            times_ms = []
            for _ in range(METADATA_REQUESTS):
                t0 = time.perf_counter()
                md = admins[1].list_topics(timeout=30)
                times_ms.append((time.perf_counter() - t0) * 1000)
                assert len(md.topics[topic].partitions) == partitions
            c_ms = _librdkafka_metadata_ms(cluster.broker_address(1), METADATA_REQUESTS)
            _add(
                rows,
                [
                    "full Metadata request p50 (librdkafka C API rd_kafka_metadata), ms",
                    str(partitions),
                    f"{statistics.median(c_ms):.1f}",
                    f"<= {GOAL_METADATA_P50_MS_AT_4000:.0f} at 4,000",
                    f"{_load()}; min {min(c_ms):.1f}; a request on the wire every call, parsed by librdkafka",
                ],
            )
            _add(
                rows,
                [
                    "full Metadata request p50 (confluent-kafka list_topics), ms",
                    str(partitions),
                    f"{statistics.median(times_ms):.1f}",
                    "-",
                    f"{_load()}; min {min(times_ms):.1f}; the same librdkafka call plus the Python binding's "
                    "object per partition",
                ],
            )
            raw_ms = _raw_metadata_ms(cluster.broker_address(1), METADATA_REQUESTS)
            _add(
                rows,
                [
                    "full Metadata v12 round trip on a raw socket (the broker's share), ms",
                    str(partitions),
                    f"{statistics.median(raw_ms):.2f}",
                    "-",
                    f"{_load()}; p50 beside librdkafka's above, without any client's parsing",
                ],
            )
            # -- idle CPU
            time.sleep(2)
            cpu = _idle_cpu(cluster, idle_window_s)
            _add(
                rows,
                [
                    "idle CPU per broker, %",
                    str(partitions),
                    " / ".join(f"{cpu[n]:.1f}" for n in sorted(cpu)),
                    f"<= {GOAL_IDLE_CPU_PCT:.0f}",
                    f"{_load()}; brokers {'/'.join(str(n) for n in sorted(cpu))}, {idle_window_s:.0f} s",
                ],
            )
            # -- failover: kill -9 of the broker leading the most partitions
            view = _view(admins[1], topic)
            counts: dict[int, int] = {}
            for leader, _ in view.values():
                counts[leader] = counts.get(leader, 0) + 1
            victim = max(counts, key=lambda b: counts[b])
            led = counts[victim]
            survivors = [admins[n] for n in cluster.node_ids if n != victim]
            killed_at = time.monotonic()
            cluster.kill(victim)
            done = _wait(survivors, topic, _all_led(partitions, victim), WAIT_S)
            _add(
                rows,
                [
                    f"kill -9 of the leader of {led} -> every partition led again, s",
                    str(partitions),
                    f"{done - killed_at:.2f}",
                    f"<= {session_s + GOAL_FAILOVER_OVER_SESSION_S:.1f}",
                    f"{_load()}; broker.session.timeout.ms={int(session_s * 1000)}",
                ],
            )
            # -- restart -> every ISR full
            restarted_at = time.monotonic()
            cluster.restart(victim)
            ready = time.monotonic()
            all_admins = list(admins.values())
            done = _wait(all_admins, topic, _all_led_full(partitions), WAIT_S)
            _add(
                rows,
                [
                    "restart after kill -9 -> every ISR full on every broker, s",
                    str(partitions),
                    f"{done - restarted_at:.2f}",
                    f"<= {GOAL_RESTART_S:.0f}",
                    f"{_load()}; ready (unfenced) after {ready - restarted_at:.2f} s",
                ],
            )
        finally:
            cluster.stop()
    return rows


def print_rows(title: str, rows: list[list[str]]) -> None:
    """Print ``rows`` (``COLUMNS``) as one table and emit it for ``python -m bench``."""
    table = Table(title=title)
    for column in COLUMNS:
        table.add_column(column, justify="right" if column in ("partitions", "measured") else "left")
    for row in rows:
        table.add_row(*row)
    emit_table(title, COLUMNS, rows)
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--partitions", type=int, nargs="+", default=[1000, 4000])
    parser.add_argument("--records-per-partition", type=int, default=10)
    parser.add_argument("--idle-window-s", type=float, default=IDLE_WINDOW_S)
    parser.add_argument(
        "--local-cluster-timing",
        action="store_true",
        help="LocalCluster's own heartbeat / session / Raft timing instead of conf/broker-N.properties'",
    )
    args = parser.parse_args()
    rows: list[list[str]] = []
    for partitions in args.partitions:
        console.print(f"[dim]{partitions} partitions ...[/dim]")
        rows.extend(
            measure(
                partitions,
                args.records_per_partition,
                args.idle_window_s,
                {} if args.local_cluster_timing else CONF_TIMING,
            )
        )
    print_rows("control path at scale: 3 brokers, one topic of RF 3, min.insync.replicas=2", rows)
    console.print(f"[dim]{machine_summary()}; {_load()}[/dim]")


if __name__ == "__main__":
    main()
