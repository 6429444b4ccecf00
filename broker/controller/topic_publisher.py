"""Publishes topic partitions and configs of each metadata delta to this broker's logs (the topic
part of Kafka's ``BrokerMetadataPublisher`` + ``DynamicConfigPublisher``).

For every applied delta, :meth:`TopicMetadataPublisher.publish`:

1. persists the image's topic config overrides when they changed
   (:mod:`broker.controller.topic_config_store`), *before* any log is created, so a topic never
   exists on disk with overrides that were not made durable;
2. creates the logs of new partitions hosted here (new topics and CreatePartitions);
3. gives every log of a new topic, a new partition, or a topic whose overrides changed the
   :class:`~broker.log.log_config.LogConfig` built from the broker defaults + the topic's
   overrides (``UnifiedLog.config`` is replaced in place: segment.bytes, segment.ms, retention,
   flush and cleanup settings apply to the live log at once; per-segment settings such as
   ``index.interval.bytes`` apply from the next segment, as in Kafka).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.controller.metadata_image import MetadataDelta, MetadataImage
from broker.controller.topic_config_store import (
    TOPIC_CONFIGS_FILE,
    StoredTopicConfigs,
    load_topic_configs,
    save_topic_configs,
)
from broker.controller.topic_configs import log_config_for

if TYPE_CHECKING:
    from broker.config import KafkaConfig
    from broker.log.log_manager import LogManager

__all__ = ["TopicMetadataPublisher"]

logger = logging.getLogger(__name__)


class TopicMetadataPublisher:
    """Keeps this broker's logs and the durable topic config store in line with the image.

    Args:
        node_id: this broker.
        broker_values: ``KafkaConfig.values`` (broker defaults of topic configs).
        log_manager: the broker's logs.
        store_path: the topic config file (see :func:`for_broker`).
    """

    def __init__(
        self, node_id: int, broker_values: Mapping[str, Any], log_manager: LogManager, store_path: Path
    ) -> None:
        self.node_id = node_id
        self.broker_values = broker_values
        self.log_manager = log_manager
        self.store_path = store_path
        self._saved: dict[str, tuple[Any, dict[str, str]]] | None = None

    @classmethod
    def for_broker(cls, config: KafkaConfig, log_manager: LogManager) -> TopicMetadataPublisher:
        """A publisher for a broker: store in the metadata dir (``KafkaConfig.metadata_log_dir``)."""
        path = config.metadata_log_dir / TOPIC_CONFIGS_FILE
        return cls(config.node_id, config.values, log_manager, path)

    def stored_topic_configs(self) -> StoredTopicConfigs:
        """The overrides persisted by a previous run (for ``bootstrap_records``)."""
        return load_topic_configs(self.store_path)

    def persist(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """Write the topic config store if ``delta`` may change it (created or deleted topics,
        changed overrides; not leader / ISR changes). Called before the logs of created topics
        are created, so a restart finds their overrides beside them.

        Raises:
            OSError: the topic config file cannot be written.
        """
        if self._saved is None or delta.created_topics or delta.deleted_topics or delta.changed_topic_configs:
            self._persist(image)

    def publish(self, image: MetadataImage, delta: MetadataDelta) -> None:
        """Apply ``delta`` (already applied to ``image``) to the store and the logs: the
        topic overrides to the logs of created topics hosted here (which the caller created
        first) and of changed topics; logs for new partitions (CreatePartitions) hosted here.

        Raises:
            OSError: the topic config file cannot be written.
        """
        self.persist(image, delta)
        touched: dict[str, set[int] | None] = {}  # topic -> partitions (None = all)
        for topic in delta.created_topics:  # their logs here were created by the caller
            touched[topic.name] = None
        for name, partition in delta.changed_partitions:
            topic_image = image.topic(name)
            if topic_image is None or not self._hosted(partition.leader, partition.replicas):
                continue
            if self.log_manager.get_log(name, partition.partition) is None:
                log = self.log_manager.get_or_create_log(name, partition.partition, topic_image.topic_id)
                # One replica: everything in the log is committed.
                log.update_high_watermark(log.log_end_offset)
                parts = touched.setdefault(name, set())
                if parts is not None:
                    parts.add(partition.partition)
        for name in delta.changed_topic_configs:
            touched[name] = None
        configs = {
            name: log_config_for(self.broker_values, image.topic_config(name))
            for name in touched
            if image.topic(name) is not None
        }
        if not configs:
            return
        for (log_topic, log_partition), log in self.log_manager.all_logs().items():
            wanted = touched.get(log_topic)
            if log_topic in configs and (wanted is None or log_partition in wanted):
                log.config = configs[log_topic]
        for name in delta.changed_topic_configs:
            logger.info("topic %s now runs with overrides %s", name, dict(image.topic_config(name)))

    def _hosted(self, leader: int, replicas: tuple[int, ...]) -> bool:
        return leader == self.node_id or self.node_id in replicas

    def _persist(self, image: MetadataImage) -> None:
        snapshot = {
            name: (image.topics[name].topic_id, dict(overrides))
            for name, overrides in image.topic_configs.items()
            if name in image.topics
        }
        if snapshot == self._saved:
            return
        save_topic_configs(self.store_path, snapshot)
        self._saved = snapshot
