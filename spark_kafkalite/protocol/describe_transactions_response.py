"""DescribeTransactionsResponse v0 (ApiKey 65, flexible; KIP-664) read by hand.

kio 0.6.5 types ``TransactionStartTimeMs`` as a timestamp and refuses negative values, but Kafka's
``TransactionCoordinator.handleDescribeTransactions`` answers ``-1`` for a transactional id with
no open transaction (``TransactionMetadata.txnStartTimestamp`` of an Empty or Complete* id), so
the client reads this response itself. Layout (``DescribeTransactionsResponse.json``), after the
response header v1:

    ThrottleTimeMs int32
    TransactionStates [ErrorCode int16, TransactionalId string, TransactionState string,
                       TransactionTimeoutMs int32, TransactionStartTimeMs int64,
                       ProducerId int64, ProducerEpoch int16,
                       Topics [Topic string, Partitions [int32], tags], tags]
    tags

Compact strings and arrays throughout; unknown tagged fields are skipped. Pure, no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

from spark_kafkalite.protocol.errors import InvalidRequestError
from spark_kafkalite.protocol.schema_io import SchemaReader

__all__ = [
    "DescribeTransactionsResponseData",
    "TransactionStateData",
    "TopicData",
    "decode_describe_transactions_response",
]


class TopicData(NamedTuple):
    """A topic of a transaction and its partitions."""

    topic: str
    partitions: tuple[int, ...]


class TransactionStateData(NamedTuple):
    """One transactional id's answer; ``transaction_start_time_ms`` is ms since the epoch, or -1
    when no transaction is open."""

    error_code: int
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: tuple[TopicData, ...]


class DescribeTransactionsResponseData(NamedTuple):
    """The response body."""

    throttle_time_ms: int
    transaction_states: tuple[TransactionStateData, ...]


def _string(reader: SchemaReader) -> str:
    value = reader.string()
    return value


def decode_describe_transactions_response(
    frame: bytes | bytearray | memoryview, body_offset: int
) -> DescribeTransactionsResponseData:
    """Decode the body of a DescribeTransactionsResponse v0 frame (without size prefix) that
    starts at ``body_offset`` (after the correlation id and the header's tagged fields).

    Raises:
        InvalidRequestError: the body is truncated or malformed (every length and count is
            checked against the bytes left).
    """
    reader = SchemaReader(
        memoryview(frame), "DescribeTransactionsResponse v0", InvalidRequestError, True, body_offset
    )
    throttle_time_ms = reader.i32()
    states = []
    for _ in range(reader.count()):
        error_code = reader.i16()
        transactional_id = _string(reader)
        transaction_state = _string(reader)
        timeout_ms = reader.i32()
        start_ms = reader.i64()
        producer_id = reader.i64()
        producer_epoch = reader.i16()
        topics = []
        for _ in range(reader.count()):
            topic = _string(reader)
            partitions = tuple(reader.i32() for _ in range(reader.count()))
            reader.skip_tags()
            topics.append(TopicData(topic, partitions))
        reader.skip_tags()
        states.append(
            TransactionStateData(
                error_code,
                transactional_id,
                transaction_state,
                timeout_ms,
                start_ms,
                producer_id,
                producer_epoch,
                tuple(topics),
            )
        )
    reader.skip_tags()
    return DescribeTransactionsResponseData(throttle_time_ms, tuple(states))
