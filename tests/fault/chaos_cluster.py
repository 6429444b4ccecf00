"""The chaos soak's cluster: three ``python -m broker`` processes behind :mod:`chaos_proxy`
proxies, and the checks run on it (ISR, replica bytes, acknowledged records).

Each broker binds its real PLAINTEXT and CONTROLLER ports and advertises the proxy ports:
``advertised.listeners=PLAINTEXT://127.0.0.1:<kafka proxy>`` (clients and replica fetchers dial
it) and ``controller.quorum.voters=<id>@127.0.0.1:<raft proxy>,...`` (the Raft links dial it;
the node binds its CONTROLLER listener). The harness itself talks to the real ports (and is never
faulted when it meets a proxy), so it observes the cluster while links are cut.
"""

from __future__ import annotations

import os
import re
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fault.chaos_proxy import CLIENT, KAFKA, RAFT, Endpoint, LinkProxy, Links

from spark_kafkalite.local_broker_process import BrokerProcess
from spark_kafkalite.local_cluster import LocalCluster, free_ports

__all__ = ["AckRecord", "ChaosCluster", "Verdict", "read_batches", "verify_acks"]

#: Fast failure detection (as in replication_helpers.FAULT_OVERRIDES).
CHAOS_OVERRIDES = {
    "replica.lag.time.max.ms": "4000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "replica.socket.timeout.ms": "5000",
}

_SEGMENT_RE = re.compile(r"^(\d{20})\.log$")


class ChaosCluster(LocalCluster):
    """A three-broker :class:`LocalCluster` whose every link passes a :class:`LinkProxy`."""

    def __init__(self, data_dir: Path, config_overrides: dict[str, str] | None = None) -> None:
        real = free_ports(6)
        super().__init__(
            brokers=3,
            data_dir=data_dir,
            config_overrides={**CHAOS_OVERRIDES, **(config_overrides or {})},
            ports={i: (real[2 * (i - 1)], real[2 * (i - 1) + 1]) for i in (1, 2, 3)},
            startup_timeout_s=60.0,
        )
        self.real_ports = {i: (real[2 * (i - 1)], real[2 * (i - 1) + 1]) for i in (1, 2, 3)}
        self.links = Links()
        self.client_pid: int | None = None
        self.kafka_proxies = {i: LinkProxy(i, KAFKA, self.links, self._owners) for i in self.node_ids}
        self.raft_proxies = {i: LinkProxy(i, RAFT, self.links, self._owners) for i in self.node_ids}
        for i in self.node_ids:
            kafka_port, raft_port = self.real_ports[i]
            self.kafka_proxies[i].target = ("127.0.0.1", kafka_port)
            self.raft_proxies[i].target = ("127.0.0.1", raft_port)

    @property
    def client_bootstrap(self) -> str:
        """Bootstrap servers through the proxies (for the faulted client)."""
        return ",".join(f"127.0.0.1:{p.port}" for p in self.kafka_proxies.values())

    def broker_address(self, node_id: int) -> str:
        """The real (unproxied) address: the harness observes the cluster around the faults."""
        return f"127.0.0.1:{self.real_ports[node_id][0]}"

    def _update_bootstrap(self) -> None:
        self.bootstrap_servers = ",".join(self.broker_address(i) for i in self.node_ids)

    def _owners(self) -> dict[int, Endpoint]:
        owners: dict[int, Endpoint] = {}
        for i in self.node_ids:
            pid = self.pid(i)
            if pid is not None and self.is_running(i):
                owners[pid] = i
        if self.client_pid is not None:
            owners[self.client_pid] = CLIENT
        return owners

    def _broker_config(self, node: BrokerProcess) -> dict[str, str]:
        voters = ",".join(f"{i}@127.0.0.1:{p.port}" for i, p in self.raft_proxies.items())
        kafka_port, raft_port = self.real_ports[node.node_id]
        return {
            **super()._broker_config(node),
            # LocalCluster learns the advertised (proxy) port at startup; bind the real ones.
            "listeners": f"PLAINTEXT://127.0.0.1:{kafka_port},CONTROLLER://127.0.0.1:{raft_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.kafka_proxies[node.node_id].port}",
            "controller.quorum.voters": voters,
        }

    def stop(self) -> None:
        super().stop()
        for proxy in [*self.kafka_proxies.values(), *self.raft_proxies.values()]:
            proxy.close()

    # -- observations ----------------------------------------------------------------------------
    def isr_views(self, topic: str, partitions: int) -> dict[int, Any]:
        """{node id: {partition: (leader, isr)}} from every running broker (direct, unfaulted);
        a broker that does not answer maps to its error text."""
        views: dict[int, Any] = {}
        for i in self.running_node_ids():
            try:
                md = self.metadata(timeout_s=2.0, node_id=i)
            except RuntimeError as exc:
                views[i] = str(exc)[:80]
                continue
            parts = md.partitions.get(topic, {})
            views[i] = {
                p: (parts[p].leader, tuple(sorted(parts[p].isr))) for p in range(partitions) if p in parts
            }
        return views

    def isr_full(self, topic: str, partitions: int) -> bool:
        """Every broker runs and reports every partition with a leader and an ISR of all three."""
        if len(self.running_node_ids()) != 3:
            return False
        views = self.isr_views(topic, partitions)
        return len(views) == 3 and all(
            isinstance(v, dict)
            and len(v) == partitions
            and all(leader >= 0 and isr == (1, 2, 3) for leader, isr in v.values())
            for v in views.values()
        )

    def high_watermarks(self, topic: str, partitions: int) -> dict[int, int] | None:
        """High watermark per partition (ListOffsets -1 to the leaders, unfaulted); None when
        the leaders do not answer in time."""
        from spark_kafkalite.client.admin import KafkaAdminClient

        admin = KafkaAdminClient(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "default.api.timeout.ms": 5000,
                "request.timeout.ms": 3000,
            }
        )
        try:
            found = admin.list_offsets({(topic, p): -1 for p in range(partitions)})
            return {int(tp[1]): int(value.offset) for tp, value in found.items()}
        except Exception:  # noqa: BLE001 - a leader moving; the caller asks again
            return None
        finally:
            admin.close()

    def partition_dir(self, node_id: int, topic: str, partition: int) -> Path:
        return self.log_dir(node_id) / f"{topic}-{partition}"


def read_batches(partition_dir: Path) -> list[tuple[int, int, bytes]]:
    """The record batches of a partition's segments, in offset order: (base offset, last offset,
    the batch's bytes). A torn batch at the end of the active segment ends the list."""
    out: list[tuple[int, int, bytes]] = []
    try:
        names = sorted(n for n in os.listdir(partition_dir) if _SEGMENT_RE.match(n))
    except OSError:
        return out
    for name in names:
        try:
            data = (partition_dir / name).read_bytes()
        except OSError:
            continue
        pos = 0
        while pos + 61 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            end = pos + 12 + length
            if length < 49 or end > len(data):
                break
            (last_delta,) = struct.unpack_from(">i", data, pos + 23)
            out.append((base, base + last_delta, data[pos:end]))
            pos = end
    return out


@dataclass
class AckRecord:
    partition: int
    offset: int
    value: bytes


@dataclass
class Verdict:
    """What the final read-back found."""

    acked: int = 0
    lost: list[bytes] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    wrong_offset: list[tuple[bytes, int, int]] = field(default_factory=list)  # value, acked, stored
    out_of_order: list[int] = field(default_factory=list)  # partitions
    offsets_not_increasing: list[int] = field(default_factory=list)
    stored: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.wrong_offset
            or self.out_of_order
            or self.offsets_not_increasing
        )


def verify_acks(acked: list[AckRecord], consumed: dict[int, list[tuple[int, bytes]]]) -> Verdict:
    """Every acknowledged record stored exactly once at its acknowledged offset; offsets strictly
    increasing; per partition the values (``<run>-<seq>``) in send order."""
    verdict = Verdict(acked=len(acked))
    where: dict[bytes, list[tuple[int, int]]] = {}
    for p, records in consumed.items():
        verdict.stored += len(records)
        offsets = [o for o, _ in records]
        if any(b <= a for a, b in zip(offsets, offsets[1:], strict=False)):
            verdict.offsets_not_increasing.append(p)
        for o, v in records:
            where.setdefault(v, []).append((p, o))
        seqs = [(v.split(b"-")[0], int(v.split(b"-")[1])) for _, v in records]
        by_run: dict[bytes, list[int]] = {}
        for run, s in seqs:
            by_run.setdefault(run, []).append(s)
        if any(s != sorted(s) for s in by_run.values()):
            verdict.out_of_order.append(p)
    verdict.duplicated = [v for v, locs in where.items() if len(locs) > 1]
    for rec in acked:
        locs = where.get(rec.value)
        if not locs:
            verdict.lost.append(rec.value)
        elif (rec.partition, rec.offset) not in locs:
            verdict.wrong_offset.append((rec.value, rec.offset, locs[0][1]))
    return verdict


def compare_replicas(
    cluster: ChaosCluster, topic: str, partitions: int, require_equal: bool = False, wait_s: float = 10.0
) -> list[str]:
    """Byte comparison of the replicas' segment files when every ISR is full: the committed
    batches (below the high watermark, read first) of each replica must be a prefix of the longest
    replica's, and with ``require_equal`` (load stopped) all must be equally long. An uncommitted
    tail may still differ until its replica truncates (KIP-101/KIP-279), and a follower may still
    be catching up, so a difference counts only if it persists for ``wait_s``. Returns the
    differences (empty when identical)."""
    deadline = time.monotonic() + wait_s
    while True:
        problems: list[str] = []
        hws = cluster.high_watermarks(topic, partitions)
        for p in range(partitions):
            bound = hws.get(p) if hws is not None else None
            logs = {
                i: [
                    b
                    for b in read_batches(cluster.partition_dir(i, topic, p))
                    if bound is None or b[1] < bound
                ]
                for i in cluster.node_ids
            }
            ref_id = max(logs, key=lambda i: len(logs[i]))
            ref = logs[ref_id]
            for i, batches in logs.items():
                if batches != ref[: len(batches)]:
                    k = next(k for k, (a, b) in enumerate(zip(batches, ref, strict=False)) if a != b)
                    problems.append(
                        f"p{p}: replica {i} differs from replica {ref_id} at batch {k} (offsets "
                        f"{batches[k][0]}..{batches[k][1]} vs {ref[k][0]}..{ref[k][1]}, hw {bound})"
                    )
                elif require_equal and len(batches) < len(ref):
                    problems.append(
                        f"p{p}: replica {i} has {len(batches)} batches, replica {ref_id} {len(ref)}"
                    )
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.5)
