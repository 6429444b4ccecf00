"""What ``kafkalite cluster status`` prints: live brokers, partitions (leader, replicas, ISR,
offline replicas; a summary per topic above ``PARTITION_ROWS_MAX`` partitions), under-replicated
counts, leaders per broker, and each broker's event-loop lag, as ``rich`` tables read from one
Metadata request (the ``cluster`` command adds the process view of a local cluster).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spark_kafkalite.cli.topics import PARTITION_ROWS_MAX

__all__ = ["fetch_metadata", "status_of", "loop_lag_summary", "print_partitions"]


def fetch_metadata(bootstrap: str, security: dict[str, str] | None = None) -> tuple[Any, str]:
    """``(Cluster, "")`` from one Metadata request to ``bootstrap`` ("host:port[,...]"), or
    ``(None, error text)`` when no broker answered within 10 s (never raises); ``security``: the
    ``client.properties`` settings of a secure cluster."""
    from spark_kafkalite.client.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        {
            **(security or {}),
            "bootstrap.servers": bootstrap,
            "default.api.timeout.ms": 10000,
            "request.timeout.ms": 5000,
        }
    )
    try:
        return admin._describe(None, 10000), ""
    except Exception as exc:  # noqa: BLE001 - shown in the output
        return None, str(exc)
    finally:
        admin.close()


def status_of(bootstrap: str, out: Any, client_configs: dict[str, str], every_partition: bool = False) -> int:
    """``status --bootstrap-server``: what the cluster's metadata says (no process view): the
    live brokers and the partitions (:func:`print_partitions`) written to ``out``; returns the
    exit code (1 when no broker answered)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=120)
    metadata, error = fetch_metadata(bootstrap, client_configs)
    if metadata is None:
        console.print(f"[red]no broker answered[/red] {error}".rstrip())
        return 1
    nodes = Table(title=f"Live brokers ({bootstrap})")
    for column in ("node", "address", "role"):
        nodes.add_column(column)
    for node_id, (host, port) in sorted(metadata.nodes.items()):
        role = "[bold]active controller[/bold]" if node_id == metadata.controller_id else "broker"
        nodes.add_row(str(node_id), f"{host}:{port}", role)
    console.print(nodes)
    return print_partitions(console, metadata, every_partition)


def loop_lag_summary(path: Path) -> str:
    """One cell for a broker's event-loop figures, from the ``loop-lag.json`` its broker rewrites
    every few seconds (``broker.event_loop_monitor``): the worst scheduling delay seen, the stall
    episodes over ``kafkalite.event.loop.stall.threshold.ms`` and the last stall's length."""
    try:
        figures = json.loads(path.read_text())
    except (OSError, ValueError):
        return "-"
    text = f"max lag {figures.get('max_lag_ms', 0):,.0f} ms"
    stalls = figures.get("stall_episodes", 0)
    if stalls:
        text += f", [yellow]{stalls} stall(s), last {figures.get('last_stall_ms', 0):,.0f} ms[/yellow]"
    return text


def print_partitions(console: Any, metadata: Any, every_partition: bool = False) -> int:
    """Partitions of ``metadata``: one row each when there are at most
    :data:`PARTITION_ROWS_MAX` (or ``every_partition``), else one summary row per topic and the
    partitions that need attention; then the totals and leaders per broker."""
    from rich.table import Table

    controller = metadata.controller_id
    total = sum(len(parts) for parts in metadata.partitions.values())
    rows = every_partition or total <= PARTITION_ROWS_MAX
    partitions = Table(title=f"Partitions (active controller: {controller})")
    for column in ("topic", "partition", "leader", "epoch", "replicas", "isr", "offline"):
        partitions.add_column(column)
    topics = Table(title=f"Topics (active controller: {controller})")
    for column in (
        "topic",
        "partitions",
        "replicas",
        "under-replicated",
        "without leader",
        "leaders per broker",
    ):
        topics.add_column(column, justify="left" if column == "topic" else "right")
    under = offline = 0
    lagging: list[str] = []
    leaders: dict[int, int] = {}
    for topic in sorted(metadata.partitions):
        topic_under = topic_offline = 0
        topic_leaders: dict[int, int] = {}
        for index, p in sorted(metadata.partitions[topic].items()):
            if len(p.isr) < len(p.replicas):
                topic_under += 1
                missing = [r for r in p.replicas if r not in p.isr]
                live = [r for r in missing if r in metadata.nodes]
                if live:  # a live broker out of the ISR: replication is not healing by itself
                    lagging.append(
                        f"{topic}-{index} (ISR {','.join(map(str, p.isr))}; live out of ISR: {live})"
                    )
            if p.leader < 0:
                topic_offline += 1
            else:
                topic_leaders[p.leader] = topic_leaders.get(p.leader, 0) + 1
            if rows or p.leader < 0:
                partitions.add_row(
                    topic,
                    str(index),
                    str(p.leader) if p.leader >= 0 else "[red]none[/red]",
                    str(p.leader_epoch),
                    ",".join(map(str, p.replicas)),
                    ",".join(map(str, p.isr))
                    if len(p.isr) == len(p.replicas)
                    else f"[yellow]{','.join(map(str, p.isr))}[/yellow]",
                    ",".join(map(str, p.offline_replicas)) or "-",
                )
        under += topic_under
        offline += topic_offline
        for broker, count in topic_leaders.items():
            leaders[broker] = leaders.get(broker, 0) + count
        replicas = {len(p.replicas) for p in metadata.partitions[topic].values()}
        topics.add_row(
            topic,
            str(len(metadata.partitions[topic])),
            ",".join(map(str, sorted(replicas))),
            f"[yellow]{topic_under}[/yellow]" if topic_under else "0",
            f"[red]{topic_offline}[/red]" if topic_offline else "0",
            " ".join(f"{b}:{n}" for b, n in sorted(topic_leaders.items())) or "-",
        )
    if not rows:
        console.print(topics)
    if partitions.row_count:
        if not rows:
            partitions.title = f"Partitions without a leader ({offline})"
        console.print(partitions)
    console.print(
        f"{len(metadata.nodes)} live broker(s), {total} partition(s), "
        f"{under} under-replicated, {offline} without a leader"
    )
    if total:
        console.print(
            "leaders per broker: " + (" ".join(f"{b}:{n}" for b, n in sorted(leaders.items())) or "-")
        )
    if not rows:
        console.print(f"(a summary per topic: --partitions lists all {total} partitions)")
    if lagging:
        console.print(
            f"[bold red]UNDER-REPLICATED with live replicas out of the ISR[/bold red] ({len(lagging)}; "
            "normal for seconds after a restart, a replication fault if it lasts; see the leader's "
            "log): " + "; ".join(lagging[:20]) + (" ..." if len(lagging) > 20 else ""),
            soft_wrap=True,
        )
    return 0
