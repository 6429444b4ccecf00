"""Client-side errors that have no Kafka wire code (everything else comes from
``spark_kafkalite.protocol.errors``)."""

from __future__ import annotations

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import KafkaError

__all__ = ["NoOffsetForPartitionError", "IllegalStateError"]


class NoOffsetForPartitionError(KafkaError):
    """A partition has no position and ``auto.offset.reset`` is ``none`` (Java
    ``NoOffsetForPartitionException``). ``partitions`` lists them."""

    error_code = -1
    retriable = False

    def __init__(self, partitions: list[TopicPartition]) -> None:
        self.partitions = list(partitions)
        super().__init__(f"undefined offset with no reset policy for partitions: {self.partitions}")

    def _format(self, message: str | None) -> str:
        return f"NO_OFFSET_FOR_PARTITION: {message}"


class IllegalStateError(KafkaError):
    """The client is used in a state that does not allow the call (Java
    ``IllegalStateException``): closed, or a partition that is not assigned."""

    error_code = -1
    retriable = False

    def _format(self, message: str | None) -> str:
        return f"ILLEGAL_STATE: {message}" if message else "ILLEGAL_STATE"
