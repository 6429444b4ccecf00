"""Applying committed metadata to this broker's logs and replicas (Kafka's
``BrokerMetadataPublisher``).

Every committed change (a record batch from the controller, or a whole snapshot image) becomes
the broker's current :class:`~broker.controller.metadata_image.MetadataImage` at once; the
logs and replication follow in publication order through the
:class:`~broker.controller.publish_queue.MetadataPublishQueue`, which applies a large delta in
slices between which the event loop serves requests. Until the broker has caught up with the
metadata log (a quorum broker starting), images are only recorded; the whole catch-up is then
published at once (:meth:`BrokerMetadataPublisher.finish_catch_up`), as Kafka's broker starts
its publishers after the initial catch-up.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from broker.config import log_config_from
from broker.config_def import parse_list
from broker.controller.broker_configs import DYNAMIC_CONNECTION_CONFIGS, DYNAMIC_LOG_CONFIGS
from broker.controller.metadata_image import MetadataDelta, MetadataImage, MetadataRecord
from broker.controller.metadata_snapshot import diff_images
from broker.controller.publish_queue import MetadataPublishQueue
from broker.controller.topic_configs import log_config_for
from broker.controller.topic_publisher import TopicMetadataPublisher
from broker.dynamic_broker_config import DynamicBrokerConfig
from broker.log.log_manager import LogManager
from broker.metrics.meters import ControllerStats
from broker.network.connection_quotas import ConnectionQuotas, parse_per_ip_overrides

if TYPE_CHECKING:
    from broker.apis.context import BrokerContext

__all__ = ["BrokerMetadataPublisher", "APPLY_DELTA_CHUNK"]

logger = logging.getLogger(__name__)

#: partitions per ``ReplicaManager.apply_delta`` call when a delta is applied in slices
APPLY_DELTA_CHUNK = 16


class BrokerMetadataPublisher:
    """Publishes committed metadata to the logs, replication and the broker's dynamic configs.

    Args:
        context: ``fn() -> BrokerContext`` (raises ``RuntimeError`` before the broker built it).
        log_manager: the logs (new partitions' logs, deleted topics' logs, topic configs).
        publish_queue: orders the publications and slices large ones.
        topic_publisher: the topic config store and the topic configs (Kafka's
            ``DynamicConfigPublisher`` for topics).
        dynamic_config: the broker's dynamic configs.
        connection_quotas: ``fn() -> ConnectionQuotas | None`` (the socket server's, once bound).
        on_topics_deleted: ``fn(topic names)``: the group coordinator drops their offsets.

    Attributes:
        catching_up: set while a starting broker replays the metadata log: images are recorded,
            not published (see :meth:`finish_catch_up`).
        controller_stats: the leader elections among the published changes (the metrics
            endpoint's LeaderElectionRateAndTimeMs count).
    """

    def __init__(
        self,
        context: Callable[[], BrokerContext],
        log_manager: LogManager,
        publish_queue: MetadataPublishQueue,
        topic_publisher: TopicMetadataPublisher,
        dynamic_config: DynamicBrokerConfig,
        *,
        connection_quotas: Callable[[], ConnectionQuotas | None],
        on_topics_deleted: Callable[[set[str]], None],
    ) -> None:
        self._context = context
        self._log_manager = log_manager
        self._publish_queue = publish_queue
        self._topic_publisher = topic_publisher
        self._dynamic_config = dynamic_config
        self._connection_quotas = connection_quotas
        self._on_topics_deleted = on_topics_deleted
        self.catching_up = False
        self.controller_stats = ControllerStats()

    def finish_catch_up(self, empty: MetadataImage) -> None:
        """The broker caught up with the metadata log: publish everything since ``empty`` at
        once (it does not serve yet), then delete the logs of topics gone meanwhile."""
        self.catching_up = False
        ctx = self._context()
        self._publish(ctx.image, diff_images(empty, ctx.image))
        self._publish_queue.run_all()
        self._delete_stray_logs()

    def commit(self, records: list[MetadataRecord]) -> None:
        """Apply records to the image and publish the delta: create logs for new partitions led
        here, delete logs of removed topics (Kafka's ``BrokerMetadataPublisher``)."""
        ctx = self._context()
        image, delta = ctx.image.apply(records)
        if self.catching_up:  # publishers start once caught up (Kafka's initial catch-up)
            ctx.image = image
            return
        self._publish(image, delta)

    def reset_image(self, image: MetadataImage) -> None:
        """Replace the whole image (the controller quorum loaded a metadata snapshot)."""
        ctx = self._context()
        if self.catching_up:
            ctx.image = image
            return
        self._publish(image, diff_images(ctx.image, image))

    def _delete_stray_logs(self) -> None:
        """After the initial metadata catch-up: delete local logs of topics that no longer exist
        (or were re-created with another topic id) while this broker was down."""
        ctx = self._context()
        log_manager = self._log_manager
        for (name, partition), log in log_manager.all_logs().items():
            topic = ctx.image.topic(name)
            if topic is None or (log.topic_id is not None and log.topic_id != topic.topic_id):
                logger.warning(
                    "deleting stray log %s-%d: its topic is not in the cluster metadata", name, partition
                )
                log_manager.delete_log(name, partition)

    def _publish(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """Make ``image`` current and publish ``delta`` to the logs and replication, after the
        deltas published before it (``MetadataPublishQueue``: a large delta is applied in
        slices between which the event loop serves requests; until a partition's slice is
        applied, requests for it are answered as before the delta)."""
        ctx = self._context()
        before = ctx.image
        self.controller_stats.record(
            lambda topic, index: _leader(before, topic, index), delta.changed_partitions
        )
        ctx.image = image  # the controller's view; the logs follow in publication order
        self._publish_queue.publish(self._publish_steps(image, delta))

    def _apply_dynamic_broker_configs(self, image: MetadataImage, delta: MetadataDelta) -> Iterator[None]:
        """Take the dynamic broker configs of ``image`` (``DynamicBrokerConfig``): new connection
        limits go to the socket server's ``ConnectionQuotas``; when a broker default of topic
        configs changed (Kafka's ``DynamicLogConfig.reconfigure``), recompute
        the default ``LogConfig`` and every existing topic's, ``APPLY_DELTA_CHUNK`` topics per
        step (the cost of a broker config change follows the topics; requests pay nothing)."""
        log_manager = self._log_manager
        changed = self._dynamic_config.update(image)
        if not changed:
            return
        logger.info("dynamic broker configs changed: %s", sorted(changed))
        config = self._dynamic_config.config
        quotas = self._connection_quotas()
        if changed & DYNAMIC_CONNECTION_CONFIGS and quotas is not None:
            quotas.reconfigure(
                config["max.connections"],
                config["max.connections.per.ip"],
                parse_per_ip_overrides(parse_list(config["max.connections.per.ip.overrides"])),
            )
        if not changed & DYNAMIC_LOG_CONFIGS:
            return
        log_manager.config = log_config_from(config)
        created = {t.name for t in delta.created_topics}
        names = [n for n in image.topics if n not in created]
        for start in range(0, len(names), APPLY_DELTA_CHUNK):
            for name in names[start : start + APPLY_DELTA_CHUNK]:
                log_manager.update_topic_config(name, log_config_for(config.values, image.topic_config(name)))
            yield

    def _publish_steps(self, image: MetadataImage, delta: MetadataDelta) -> Iterator[None]:
        """Apply ``delta`` (Kafka's ``BrokerMetadataPublisher`` then ``ReplicaManager.applyDelta``),
        yielding between chunks of partitions: the topic config store and the topic configs
        first (``TopicMetadataPublisher``), then ``APPLY_DELTA_CHUNK`` changed partitions at a
        time (the logs of new partitions hosted here, leaders / followers / fetchers), then the
        logs of deleted topics. Every broker applies the partitions of a delta in the same
        order, so a follower starts fetching a new partition about when its leader leads it.
        Logs one summary line per delta."""
        ctx = self._context()
        log_manager = self._log_manager
        started = time.monotonic()
        slices = self._publish_queue.slices
        created = log_manager.logs_created
        if delta.changed_resource_configs:
            yield from self._apply_dynamic_broker_configs(image, delta)
        self._topic_publisher.publish(image, delta)  # before any log of the delta is created
        changed = delta.changed_partitions
        replica_manager = ctx.replica_manager
        for start in range(0, max(len(changed), 1), APPLY_DELTA_CHUNK):
            # deleted topics stop in the first chunk, before their logs go below
            chunk = dataclasses.replace(
                delta,
                created_topics=(),
                deleted_topics=delta.deleted_topics if start == 0 else (),
                changed_partitions=changed[start : start + APPLY_DELTA_CHUNK],
            )
            replica_manager.apply_delta(image, chunk)  # new logs, leaders / followers, HW, fetchers
            yield
        for topic in delta.deleted_topics:
            replica_manager.broker_topic_stats.remove_topic(topic.name)
            for partition_index in topic.partitions:
                log_manager.delete_log(topic.name, partition_index)
                ctx.fetch_purgatory.notify((topic.name, partition_index))
                yield
        if delta.deleted_topics:  # their committed offsets go too
            self._on_topics_deleted({t.name for t in delta.deleted_topics})
        created = log_manager.logs_created - created
        if created or len(changed) > 1 or delta.deleted_topics:
            logger.info(
                "applied metadata delta: %d log(s) created, %d partition change(s), %d topic(s) "
                "deleted in %.0f ms (%d event-loop step(s))",
                created,
                len(changed),
                len(delta.deleted_topics),
                (time.monotonic() - started) * 1000,
                self._publish_queue.slices - slices + 1,
            )


def _leader(image: MetadataImage, topic: str, index: int) -> int | None:
    """The leader of a partition in ``image`` (None: no such partition)."""
    registration = image.partition(topic, index)
    return None if registration is None else registration.leader
