"""HTML views of a running :class:`~spark_kafkalite.local_cluster.LocalCluster` for Jupyter
(``LocalCluster._repr_html_``): its brokers (address, role, process state, metrics URL), its
topics' partitions (leader, replicas, ISR, under-replication) and its consumer groups' lag per
partition (committed offset, high watermark, lag), read through the admin client at render time. The admin client's results render on their own
(``spark_kafkalite.client.admin_views``): ``describe_topics``, ``describe_consumer_groups`` and
``consumer_group_lag``.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from spark_kafkalite.client.admin_views import html_table

if TYPE_CHECKING:
    from spark_kafkalite.local_cluster import LocalCluster

__all__ = ["cluster_html", "html_table"]


def cluster_html(cluster: LocalCluster, timeout_s: float = 5.0, include_internal: bool = False) -> str:
    """Brokers, partitions (``include_internal``: with ``__consumer_offsets`` and
    ``__transaction_state``) and consumer-group lag of ``cluster`` as HTML. A cluster with no
    running broker, or one that does not answer within ``timeout_s``, shows its brokers only,
    with the error."""
    running = set(cluster.running_node_ids())
    urls = dict(zip(cluster.node_ids, cluster.metrics_urls, strict=True))
    parts = [f"<div><b>{escape(repr(cluster))}</b>"]
    try:
        metadata = cluster.metadata(timeout_s) if running else None
        error = None if running else "no broker running"
    except RuntimeError as exc:
        metadata, error = None, str(exc)
    controller = metadata.controller_id if metadata is not None else -1
    parts.append(
        html_table(
            "Brokers",
            ["node", "address", "process", "role", "metrics"],
            [
                (
                    node_id,
                    cluster.broker_address(node_id),
                    "running" if node_id in running else "stopped",
                    "controller" if node_id == controller else "broker",
                    urls[node_id],
                )
                for node_id in cluster.node_ids
            ],
        )
    )
    if metadata is None:
        parts.append(f"<p>{escape(error or '')}</p></div>")
        return "".join(parts)
    rows = []
    for topic in sorted(metadata.partitions):
        if topic in metadata.internal_topics and not include_internal:
            continue
        for index, p in sorted(metadata.partitions[topic].items()):
            under = "yes" if len(p.isr) < len(p.replicas) else ""
            rows.append(
                (topic, index, p.leader if p.leader >= 0 else "none", list(p.replicas), list(p.isr), under)
            )
    parts.append(
        html_table(
            "Partitions", ["topic", "partition", "leader", "replicas", "ISR", "under-replicated"], rows
        )
    )
    parts.append(_groups_html(cluster, timeout_s))
    parts.append("</div>")
    return "".join(parts)


def _groups_html(cluster: LocalCluster, timeout_s: float) -> str:
    from spark_kafkalite.client.admin import KafkaAdminClient

    admin = KafkaAdminClient(
        {
            **cluster.client_config(),
            "default.api.timeout.ms": int(timeout_s * 1000),
            "request.timeout.ms": 5000,
        }
    )
    try:
        rows = []
        for listing in admin.list_consumer_groups():
            lags = admin.consumer_group_lag(listing.group_id)
            for tp, lag in sorted(lags.items(), key=lambda item: (item[0].topic, item[0].partition)):
                rows.append(
                    (
                        listing.group_id,
                        listing.state,
                        tp.topic,
                        tp.partition,
                        lag.committed,
                        lag.log_end_offset,
                        lag.lag,
                    )
                )
    except Exception as exc:  # noqa: BLE001 - a view shows what it could not read instead of failing
        return f"<p>consumer groups unavailable: {escape(str(exc))}</p>"
    finally:
        admin.close()
    return html_table(
        "Consumer groups",
        ["group", "state", "topic", "partition", "committed", "high watermark", "lag"],
        rows,
    )
