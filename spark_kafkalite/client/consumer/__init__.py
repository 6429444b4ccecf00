"""The consumer: ``KafkaConsumer`` + fetcher, offset fetcher, subscription state and the group
``ConsumerCoordinator`` (join/sync/heartbeat/leave, assignors, offset commits)."""

from __future__ import annotations

from spark_kafkalite.client.consumer.consumer_coordinator import ConsumerRebalanceListener
from spark_kafkalite.client.consumer.consumer_offsets import CommitFailedError
from spark_kafkalite.client.consumer.group_requests import OffsetAndMetadata
from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer

__all__ = ["KafkaConsumer", "ConsumerRebalanceListener", "CommitFailedError", "OffsetAndMetadata"]
