"""Exceptions raised by the ``kafkalite`` data source (besides the client's ``KafkaError``s and
:class:`~spark_kafkalite.datasource.options.KafkaLiteOptionError`)."""

from __future__ import annotations

__all__ = [
    "KafkaLiteSourceError",
    "TopicNotFoundError",
    "DataLossError",
    "OffsetsMismatchError",
    "FetchTimeoutError",
    "KafkaLiteWriteError",
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE",
    "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE",
]

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data "
    "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
    "processed. If you don't want your streaming query to fail on such cases, set the source option "
    '"failOnDataLoss" to "false".'
)
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data "
    "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
    "processed. If you want your streaming query to fail on such cases, set the source option "
    '"failOnDataLoss" to "true".'
)


class KafkaLiteSourceError(RuntimeError):
    """Base of the data source's runtime errors."""


class TopicNotFoundError(KafkaLiteSourceError, LookupError):
    """A subscribed or assigned topic (or partition) does not exist on the cluster."""


class DataLossError(KafkaLiteSourceError):
    """Offsets that should be readable are gone (retention, topic deleted or recreated) and
    ``failOnDataLoss`` is true (Spark: ``IllegalStateException`` / ``KAFKA_DATA_LOSS``)."""


class OffsetsMismatchError(KafkaLiteSourceError):
    """``startingOffsets`` / ``endingOffsets`` JSON does not name exactly the assigned partitions,
    or resolved offsets are inconsistent (Spark's ``KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED``,
    ``RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET``...)."""


class FetchTimeoutError(KafkaLiteSourceError, TimeoutError):
    """An executor could not fetch the next offset of its range within
    ``kafkaConsumer.pollTimeoutMs``."""


class KafkaLiteWriteError(KafkaLiteSourceError):
    """A row cannot be written (e.g. null topic with no ``topic`` option) or a send failed."""
