"""The consumer: ``KafkaConsumer`` + fetcher, offset fetcher and subscription state."""

from __future__ import annotations

from spark_kafkalite.client.consumer.kafka_consumer import KafkaConsumer

__all__ = ["KafkaConsumer"]
