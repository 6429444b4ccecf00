"""spark-kafkalite's Kafka client: producer, consumer (manual assignment) and admin client.

Mirrors the Java client's structure (``NetworkClient``, ``Metadata``, ``RecordAccumulator`` +
``Sender``, ``Fetcher``) and speaks the Kafka protocol to any Kafka-compatible broker. Errors are
``spark_kafkalite.protocol.errors.KafkaError`` subclasses.
"""

from __future__ import annotations

from spark_kafkalite.client.admin import KafkaAdminClient
from spark_kafkalite.client.admin_scram import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from spark_kafkalite.client.consumer import KafkaConsumer
from spark_kafkalite.client.errors import IllegalStateError, NoOffsetForPartitionError, SslAuthenticationError
from spark_kafkalite.client.producer import KafkaProducer
from spark_kafkalite.client.types import (
    ConsumerRecord,
    NewTopic,
    OffsetAndTimestamp,
    PartitionInfo,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "KafkaProducer",
    "KafkaConsumer",
    "KafkaAdminClient",
    "TopicPartition",
    "RecordMetadata",
    "ConsumerRecord",
    "NewTopic",
    "OffsetAndTimestamp",
    "PartitionInfo",
    "NoOffsetForPartitionError",
    "IllegalStateError",
    "SslAuthenticationError",
    "ScramCredentialInfo",
    "UserScramCredentialUpsertion",
    "UserScramCredentialDeletion",
]
