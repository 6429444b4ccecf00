"""``kafkalite top``: a live terminal view of a Kafka cluster, refreshed every ``--interval``
seconds (rich): brokers with their role (controller), topics with records in per second (from
high-watermark moves, or the brokers' MessagesIn when ``/metrics`` is reachable), under-replicated
and offline partitions, consumer groups with their lag and its trend since the last refresh.
Works against any Kafka through the admin API; ``--metrics-url`` (each broker's Prometheus
endpoint, ``LocalCluster.metrics_urls``) adds per-broker request rates, Produce p99 and
under-replicated counts.

    kafkalite top --bootstrap-server H:P [--metrics-url URL ...] [--interval 1] [--iterations N]
"""

from __future__ import annotations

import argparse
import time
from typing import Any, TextIO

from spark_kafkalite.cli.common import add_bootstrap, client_config
from spark_kafkalite.cli.top_snapshot import Snapshot, produce_p99_ms, take_snapshot

__all__ = ["add_top_parser", "cmd_top", "render"]


def add_top_parser(commands: Any) -> None:
    """Add the ``top`` command to the ``kafkalite`` subparsers ``commands``."""
    top = commands.add_parser("top", help="live view of brokers, topics and consumer-group lag")
    add_bootstrap(top)
    top.add_argument("--metrics-url", action="append", default=[], metavar="URL", help="a broker's /metrics")
    top.add_argument("--interval", type=float, default=1.0, help="seconds between refreshes (default 1)")
    top.add_argument(
        "--iterations", type=int, default=0, help="stop after N refreshes (default: until Ctrl-C)"
    )


def cmd_top(args: argparse.Namespace, out: TextIO) -> int:
    """Run ``kafkalite top`` until Ctrl-C (or ``--iterations``); returns the exit status."""
    from rich.console import Console
    from rich.live import Live

    from spark_kafkalite.client import KafkaAdminClient

    admin = KafkaAdminClient(client_config(args, "kafkalite-top"))
    console = Console(file=out)
    previous: Snapshot | None = None
    done = 0
    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            while True:
                snapshot = take_snapshot(admin, args.metrics_url)
                live.update(render(snapshot, previous), refresh=True)
                previous = snapshot
                done += 1
                if args.iterations and done >= args.iterations:
                    return 0
                time.sleep(args.interval)
    finally:
        admin.close()


def _trend(now: int | None, before: int | None) -> str:
    if now is None:
        return ""
    if before is None:
        return f"{now:,}"
    change = now - before
    arrow = "↑" if change > 0 else "↓" if change < 0 else "="
    return f"{now:,} {arrow}{abs(change):,}" if change else f"{now:,} ="


def render(now: Snapshot, before: Snapshot | None) -> Any:
    """The rich renderable of one refresh (rates need ``before``)."""
    from rich.console import Group
    from rich.table import Table

    seconds = (now.taken_s - before.taken_s) if before is not None else 0.0
    by_url = {m.url: m for m in before.metrics} if before is not None else {}
    brokers = Table(title=f"Brokers (controller {now.controller_id})")
    for column in ("node", "address", "role", "metrics", "requests/s", "Produce p99 ms", "under-replicated"):
        brokers.add_column(column)
    for node_id, host, port in now.brokers:
        role = "controller" if node_id == now.controller_id else "broker"
        brokers.add_row(str(node_id), f"{host}:{port}", role, *_broker_figures(now, by_url, seconds, node_id))
    topics = Table(title="Topics")
    for column in ("topic", "partitions", "records in/s", "high watermark", "under-replicated", "offline"):
        topics.add_column(column)
    for topic, infos in sorted(now.partitions.items()):
        end = sum(now.end_offsets.get((topic, p.partition), 0) for p in infos)
        rate = ""
        if before is not None and seconds > 0:
            records = _metrics_records(now, topic) - _metrics_records(before, topic)
            if not now.metrics or records < 0:
                records = end - sum(before.end_offsets.get((topic, p.partition), 0) for p in infos)
            rate = f"{records / seconds:,.0f}"
        under = sum(1 for p in infos if len(p.isr) < len(p.replicas))
        offline = sum(1 for p in infos if p.leader < 0)
        topics.add_row(topic, str(len(infos)), rate, f"{end:,}", str(under), str(offline))
    groups = Table(title="Consumer groups")
    for column in ("group", "state", "topics", "lag (trend since last refresh)"):
        groups.add_column(column)
    for group, lags in sorted(now.lags.items()):
        total = sum(v for v in lags.values() if v is not None) if lags else None
        old = before.lags.get(group) if before is not None else None
        old_total = sum(v for v in old.values() if v is not None) if old else None
        topic_names = ", ".join(sorted({t for t, _p in lags}))
        groups.add_row(group, now.group_states.get(group) or "", topic_names, _trend(total, old_total))
    return Group(brokers, topics, groups)


def _metrics_records(snapshot: Snapshot, topic: str) -> float:
    return sum(m.messages_in.get(topic, 0.0) for m in snapshot.metrics)


def _broker_figures(
    now: Snapshot, before: dict[str, Any], seconds: float, node_id: int
) -> tuple[str, str, str, str]:
    """(metrics endpoint, requests/s, Produce p99 ms, under-replicated) of broker ``node_id``:
    the ``node_id``-th endpoint given (``--metrics-url`` in node-id order), else blanks."""
    index = sorted(n for n, _h, _p in now.brokers).index(node_id)
    if index >= len(now.metrics):
        return "", "", "", ""
    m = now.metrics[index]
    if m.error is not None:
        return "unreachable", "", "", ""
    old = before.get(m.url)
    rate = p99 = ""
    if old is not None and old.error is None and seconds > 0:
        rate = f"{(sum(m.requests.values()) - sum(old.requests.values())) / seconds:,.0f}"
        value = produce_p99_ms(old, m)
        p99 = "" if value is None else f"≤ {value:g}"
    return "up", rate, p99, f"{m.under_replicated:g}"
