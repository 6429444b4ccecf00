"""The producer: ``KafkaProducer`` + accumulator, sender thread and partitioner."""

from __future__ import annotations

from spark_kafkalite.client.producer.kafka_producer import KafkaProducer

__all__ = ["KafkaProducer"]
