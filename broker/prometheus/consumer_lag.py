"""Consumer-group lag and partition offsets under kafka_exporter's names
(``danielqsj/kafka_exporter``: ``kafka_consumergroup_lag{consumergroup,topic,partition}``,
``kafka_consumergroup_lag_sum{consumergroup,topic}``, ``kafka_consumergroup_current_offset``,
``kafka_consumergroup_members{consumergroup}``, ``kafka_topic_partition_current_offset`` and
``kafka_topic_partition_oldest_offset{topic,partition}``), computed at scrape time so that one
scrape of every broker gives all of them exactly once:

* partition offsets: each broker reports the partitions it leads (high watermark, log start
  offset), read locally;
* group offsets and lag: each broker reports the groups it coordinates (the groups of the
  ``__consumer_offsets`` partitions it leads). Lag is the partition's end offset (its high
  watermark: what ListOffsets LATEST answers a read_uncommitted consumer, as kafka_exporter asks)
  minus the committed offset. The coordinator may not lead a committed partition, and a
  follower's high watermark trails its leader's, so the end offsets of partitions led elsewhere
  come from a ListOffsets request to each of their leaders (one request per leader broker per
  scrape, sent on the event loop over an inter-broker connection; the scrape's thread waits for
  the answers up to ``timeout_s``). A partition whose end offset could not be read gets no lag
  sample (never a made-up one).

Cost: one pass over the partitions led here, and per coordinated group one visit per committed
partition, per scrape; requests pay nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kio.schema.list_offsets.v1.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i64
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.replication.broker_connection import BrokerConnection, BrokerConnectionError

if TYPE_CHECKING:
    from broker.apis.context import BrokerContext

__all__ = ["ConsumerLagCollector"]

logger = logging.getLogger(__name__)

_LATEST = -1  # ListOffsets timestamp: the end offset (high watermark for read_uncommitted)

TopicPartition = tuple[str, int]


class ConsumerLagCollector(Collector):
    """Collects the metrics listed in the module docstring.

    Args:
        node_id: this broker.
        ctx: the broker's context (None before startup).
        loop: the broker's event loop (ListOffsets requests run there).
        timeout_s: how long a scrape waits for the leaders' ListOffsets answers.
    """

    def __init__(
        self,
        node_id: int,
        ctx: Callable[[], BrokerContext | None],
        loop: asyncio.AbstractEventLoop,
        timeout_s: float = 5.0,
    ) -> None:
        self.node_id = node_id
        self.ctx = ctx
        self.loop = loop
        self.timeout_s = timeout_s
        self._connections: dict[int, BrokerConnection] = {}  # used on the event loop only
        self._lock = threading.Lock()  # one scrape at a time uses the connections

    def collect(self) -> Iterator[Metric]:
        ctx = self.ctx()
        if ctx is None:
            return
        with self._lock:
            yield from self._collect(ctx)

    def _collect(self, ctx: BrokerContext) -> Iterator[Metric]:
        current = GaugeMetricFamily(
            "kafka_topic_partition_current_offset",
            "High watermark of a partition led by this broker",
            labels=["topic", "partition"],
        )
        oldest = GaugeMetricFamily(
            "kafka_topic_partition_oldest_offset",
            "Log start offset of a partition led by this broker",
            labels=["topic", "partition"],
        )
        end_offsets: dict[TopicPartition, int] = {}
        for p in list(ctx.replica_manager.partitions().values()):
            if p.is_leader:
                high_watermark = p.high_watermark
                end_offsets[(p.topic, p.partition)] = high_watermark
                labels = [p.topic, str(p.partition)]
                current.add_metric(labels, high_watermark)
                oldest.add_metric(labels, p.log.log_start_offset)
        yield current
        yield oldest

        groups = self._local_groups(ctx)
        remote: dict[int, list[TopicPartition]] = {}
        image = ctx.image
        for _group_id, _members, offsets in groups:
            for tp in offsets:
                if tp in end_offsets:
                    continue
                registration = image.partition(*tp)
                if registration is not None and registration.leader >= 0:
                    remote.setdefault(registration.leader, []).append(tp)
        if remote:
            end_offsets.update(self._remote_end_offsets(ctx, remote))

        members = GaugeMetricFamily(
            "kafka_consumergroup_members", "Members of a consumer group", labels=["consumergroup"]
        )
        committed = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Committed offset of a consumer group at a partition",
            labels=["consumergroup", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "End offset (high watermark) minus committed offset of a consumer group at a partition",
            labels=["consumergroup", "topic", "partition"],
        )
        lag_sum = GaugeMetricFamily(
            "kafka_consumergroup_lag_sum",
            "Lag of a consumer group summed over a topic's partitions",
            labels=["consumergroup", "topic"],
        )
        for group_id, member_count, offsets in groups:
            members.add_metric([group_id], member_count)
            sums: dict[str, int] = {}
            for (topic, index), offset in sorted(offsets.items()):
                labels = [group_id, topic, str(index)]
                committed.add_metric(labels, offset)
                end = end_offsets.get((topic, index))
                if end is None or offset < 0:
                    continue
                behind = max(end - offset, 0)
                lag.add_metric(labels, behind)
                sums[topic] = sums.get(topic, 0) + behind
            for topic, total in sums.items():
                lag_sum.add_metric([group_id, topic], total)
        yield members
        yield committed
        yield lag
        yield lag_sum

    @staticmethod
    def _local_groups(ctx: BrokerContext) -> list[tuple[str, int, dict[TopicPartition, int]]]:
        """(group id, members, committed offsets) of the groups coordinated here."""
        coordinator = ctx.group_coordinator
        if coordinator is None:
            return []
        manager = coordinator.manager
        owned = set(manager.owned_partitions)
        out = []
        for group in list(manager.groups.values()):
            if manager.partition_for(group.group_id) not in owned:
                continue
            offsets = {tp: value.offset for tp, value in list(group.offsets.items())}
            out.append((group.group_id, len(group.members), offsets))
        return out

    def _remote_end_offsets(
        self, ctx: BrokerContext, by_leader: dict[int, list[TopicPartition]]
    ) -> dict[TopicPartition, int]:
        """End offsets of partitions led by other brokers ({} for those that did not answer)."""
        future = asyncio.run_coroutine_threadsafe(self._ask_leaders(ctx, by_leader), self.loop)
        try:
            return future.result(self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - a scrape without those lag samples, not a failed scrape
            future.cancel()
            logger.info("consumer lag: end offsets from leaders %s unavailable: %r", sorted(by_leader), exc)
            return {}

    async def _ask_leaders(
        self, ctx: BrokerContext, by_leader: dict[int, list[TopicPartition]]
    ) -> dict[TopicPartition, int]:
        answers = await asyncio.gather(
            *(self._ask(ctx, leader, partitions) for leader, partitions in by_leader.items()),
            return_exceptions=True,
        )
        out: dict[TopicPartition, int] = {}
        for leader, answer in zip(by_leader, answers, strict=True):
            if isinstance(answer, BaseException):
                logger.info("consumer lag: ListOffsets to broker %d failed: %r", leader, answer)
            else:
                out.update(answer)
        return out

    async def _ask(
        self, ctx: BrokerContext, leader: int, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """One ListOffsets (v1, LATEST, as a consumer) to ``leader`` for ``partitions``."""
        endpoint = ctx.replica_manager.broker_endpoint(leader)
        if endpoint is None:
            raise BrokerConnectionError(f"no endpoint for broker {leader}")
        connection = self._connections.get(leader)
        if connection is None or (connection.host, connection.port) != endpoint:
            if connection is not None:
                await connection.close()
            connection = self._connections[leader] = BrokerConnection(
                endpoint[0],
                endpoint[1],
                f"broker-{self.node_id}-metrics",
                int(self.timeout_s * 1000),
                ctx.config.inter_broker_security,
            )
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = ListOffsetsRequest(
            replica_id=BrokerId(-1),
            topics=tuple(
                ListOffsetsTopic(
                    name=TopicName(topic),
                    partitions=tuple(
                        ListOffsetsPartition(partition_index=i32(index), timestamp=i64(_LATEST))
                        for index in indexes
                    ),
                )
                for topic, indexes in by_topic.items()
            ),
        )
        response: Any = await connection.send(request)
        out: dict[TopicPartition, int] = {}
        for topic_response in response.topics:
            for p in topic_response.partitions:
                if p.error_code == 0 and p.offset >= 0:
                    out[(str(topic_response.name), int(p.partition_index))] = int(p.offset)
        return out

    async def close(self) -> None:
        """Close the inter-broker connections (on the event loop)."""
        connections, self._connections = self._connections, {}
        for connection in connections.values():
            await connection.close()
