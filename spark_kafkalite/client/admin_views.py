"""HTML views of admin results for Jupyter (``_repr_html_``): a notebook shows a topic's
partitions (leader, replicas, ISR), a group's members and a group's lag per partition as tables
instead of the objects' reprs. Pure formatting of values already fetched; nothing here calls a
broker.

- :class:`TopicDescriptions`: what ``KafkaAdminClient.describe_topics`` returns (a ``dict``).
- :func:`group_description_html`: ``ConsumerGroupDescription._repr_html_``, and
  :class:`GroupDescriptions` for ``describe_consumer_groups`` (a ``dict``).
- :class:`GroupLag`: what ``consumer_group_lag`` returns (a ``dict``, plus ``group_id``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from spark_kafkalite.client.types import PartitionInfo, TopicPartition

if TYPE_CHECKING:
    from spark_kafkalite.client.admin_groups import ConsumerGroupDescription, PartitionLag

__all__ = ["GroupDescriptions", "GroupLag", "TopicDescriptions", "group_description_html", "html_table"]

_STYLE = "border-collapse:collapse;margin:0.3em 0"
_CELL = "border:1px solid #ccc;padding:2px 8px;text-align:left"


def html_table(caption: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A small HTML table (every value escaped; None shown as an empty cell)."""
    head = "".join(f'<th style="{_CELL}">{escape(c)}</th>' for c in columns)
    body = "".join(
        "<tr>"
        + "".join(f'<td style="{_CELL}">{"" if v is None else escape(str(v))}</td>' for v in row)
        + "</tr>"
        for row in rows
    )
    return (
        f'<table style="{_STYLE}"><caption style="text-align:left;font-weight:bold">{escape(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _partitions(partitions: Iterable[TopicPartition]) -> str:
    """``t-0, t-1`` sorted (Kafka's ``TopicPartition.toString``)."""
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(partitions))


class TopicDescriptions(dict[str, list[PartitionInfo]]):
    """topic -> its partitions (``KafkaAdminClient.describe_topics``), shown in a notebook as one
    table: topic, partition, leader (``none`` without one), leader epoch, replicas, ISR and
    whether the ISR is smaller than the replicas."""

    def _repr_html_(self) -> str:
        rows = [
            (
                topic,
                p.partition,
                p.leader if p.leader >= 0 else "none",
                p.leader_epoch,
                list(p.replicas),
                list(p.isr),
                "yes" if len(p.isr) < len(p.replicas) else "",
            )
            for topic, partitions in self.items()
            for p in partitions
        ]
        return html_table(
            "Topics",
            ["topic", "partition", "leader", "leader epoch", "replicas", "ISR", "under-replicated"],
            rows,
        )


def group_description_html(description: ConsumerGroupDescription) -> str:
    """A described group as two tables: the group (state, type, assignor, coordinator, group
    epoch) and its members (member id, instance id, client id, host, assigned partitions)."""
    node, host, port = description.coordinator
    group = html_table(
        f"Group {description.group_id}",
        ["state", "type", "assignor", "coordinator", "group epoch", "members"],
        [
            (
                description.state,
                description.type,
                description.partition_assignor,
                f"{node} ({host}:{port})",
                description.group_epoch,
                len(description.members),
            )
        ],
    )
    members = html_table(
        f"Members of {description.group_id}",
        ["member", "instance id", "client id", "host", "partitions"],
        [
            (m.member_id, m.group_instance_id, m.client_id, m.host, _partitions(m.assignment))
            for m in description.members
        ],
    )
    return group + members


class GroupDescriptions(dict[str, "ConsumerGroupDescription"]):
    """group id -> its description (``KafkaAdminClient.describe_consumer_groups``), shown in a
    notebook as each group's tables (:func:`group_description_html`)."""

    def _repr_html_(self) -> str:
        return "".join(group_description_html(description) for description in self.values())


class GroupLag(dict[TopicPartition, "PartitionLag"]):
    """TopicPartition -> committed offset, log end offset and lag of ``group_id``
    (``KafkaAdminClient.consumer_group_lag``), shown in a notebook as a table per partition
    (sorted by topic and partition) with the lag summed over the partitions that have one."""

    def __init__(self, group_id: str, lags: dict[TopicPartition, PartitionLag]) -> None:
        super().__init__(lags)
        self.group_id = group_id

    def _repr_html_(self) -> str:
        rows: list[tuple[Any, ...]] = [
            (tp.topic, tp.partition, lag.committed, lag.log_end_offset, lag.lag)
            for tp, lag in sorted(self.items())
        ]
        total = sum(lag.lag for lag in self.values() if lag.lag is not None)
        rows.append(("total", None, None, None, total))
        return html_table(
            f"Lag of group {self.group_id}",
            ["topic", "partition", "committed", "high watermark", "lag"],
            rows,
        )
