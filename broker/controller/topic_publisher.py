"""Publishes the topic configs of each metadata delta to this broker's logs (the topic part of
Kafka's ``BrokerMetadataPublisher`` + ``DynamicConfigPublisher``).

For every applied delta, :meth:`TopicMetadataPublisher.publish`, before any partition of the
delta is applied:

1. persists the image's topic config overrides when they changed
   (:mod:`broker.controller.topic_config_store`), *before* any log is created, so a topic never
   exists on disk with overrides that were not made durable;
2. gives the :class:`~broker.log.log_manager.LogManager` the
   :class:`~broker.log.log_config.LogConfig` (broker defaults + the topic's overrides) of every
   created topic and of every topic whose overrides changed: the topic's existing logs take it at
   once (``UnifiedLog.config`` is replaced in place: segment.bytes, segment.ms, retention, flush
   and cleanup settings apply to the live log at once; per-segment settings such as
   ``index.interval.bytes`` apply from the next segment, as in Kafka) and the logs created for
   its partitions afterwards (new topics, CreatePartitions: ``ReplicaManager.apply_delta``) start
   with it. Deleted topics' configs are dropped.

The cost is the partitions of the topics the delta names, never every log of the broker.
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
        broker_values: ``KafkaConfig.values`` (broker defaults of topic configs).
        log_manager: the broker's logs.
        store_path: the topic config file (see :func:`for_broker`).
    """

    def __init__(self, broker_values: Mapping[str, Any], log_manager: LogManager, store_path: Path) -> None:
        self.broker_values = broker_values
        self.log_manager = log_manager
        self.store_path = store_path
        self._saved: dict[str, tuple[Any, dict[str, str]]] | None = None

    @classmethod
    def for_broker(cls, config: KafkaConfig, log_manager: LogManager) -> TopicMetadataPublisher:
        """A publisher for a broker: store in the metadata dir (``KafkaConfig.metadata_log_dir``)."""
        path = config.metadata_log_dir / TOPIC_CONFIGS_FILE
        return cls(config.values, log_manager, path)

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
        """Apply the topic part of ``delta`` (already applied to ``image``), before its
        partitions: the store, then the ``LogConfig`` of created, changed and deleted topics
        (see the module docstring).

        Raises:
            OSError: the topic config file cannot be written.
        """
        self.persist(image, delta)
        for topic in delta.deleted_topics:
            self.log_manager.remove_topic_config(topic.name)
        for name in (*(t.name for t in delta.created_topics), *delta.changed_topic_configs):
            if image.topic(name) is not None:
                self.log_manager.update_topic_config(
                    name, log_config_for(self.broker_values, image.topic_config(name))
                )
        for name in delta.changed_topic_configs:
            logger.info("topic %s now runs with overrides %s", name, dict(image.topic_config(name)))

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
