"""Key / value byte formats of the records in ``__transaction_state`` (Kafka's ``TransactionLog``
with the JSON schemas ``TransactionLogKey`` and ``TransactionLogValue`` of
``transaction-coordinator/src/main/resources/common/message/``), so the topic can be read with
Kafka's own tools.

- Key: int16 version 0, then ``TransactionalId`` string.
- Value: int16 version, then
  v0 (classic): ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
  TransactionStatus int8 (state id), TransactionPartitions nullable array of
  ``{Topic string, PartitionIds []int32}`` (null when the state is Empty),
  TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64;
  v1 (flexible, KIP-482) the same fields compact-encoded plus tagged fields PreviousProducerId
  (tag 0, default -1), NextProducerId (tag 1, default -1), ClientTransactionVersion (tag 2,
  int16, default 0).
  We write v0 (Kafka writes v1 only with the ``transaction.version`` feature >= 1, which this
  broker does not finalize: ``TransactionVersion.transactionLogValueVersion``); we read both.
- A null value (tombstone) removes the transactional id.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_kafkalite.protocol.schema_io import I8, I16, I32, I64, SchemaReader, write_string

__all__ = [
    "TransactionLogValue",
    "TransactionRecordFormatError",
    "encode_transaction_log_key",
    "decode_transaction_log_key",
    "encode_transaction_log_value",
    "decode_transaction_log_value",
]


class TransactionRecordFormatError(ValueError):
    """A key or value in ``__transaction_state`` cannot be parsed (unknown version, truncated)."""


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    """One ``TransactionLogValue``: the persisted state of a transactional id.

    Attributes:
        producer_id / producer_epoch: the current producer id and epoch.
        transaction_timeout_ms: the producer's ``transaction.timeout.ms``.
        state: the state id (Empty 0, Ongoing 1, PrepareCommit 2, PrepareAbort 3,
            CompleteCommit 4, CompleteAbort 5, Dead 6, PrepareEpochFence 7).
        partitions: ``((topic, (partition, ...)), ...)`` in the transaction (empty when Empty).
        last_update_timestamp_ms / start_timestamp_ms: ms since the epoch (-1 = none).
        previous_producer_id / next_producer_id / client_transaction_version: v1 tagged fields.
    """

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def _reader(data: bytes | memoryview, what: str) -> SchemaReader:
    return SchemaReader(data, what, TransactionRecordFormatError)


def encode_transaction_log_key(transactional_id: str) -> bytes:
    """``TransactionLogKey`` version 0."""
    out = bytearray(I16.pack(0))
    write_string(out, transactional_id)
    return bytes(out)


def decode_transaction_log_key(key: bytes | memoryview) -> str | None:
    """The transactional id of a key; None for a key version we don't know (skipped, as
    Kafka's ``TransactionLog.readTxnRecordKey`` does for unknown record types).

    Raises:
        TransactionRecordFormatError: a version-0 key is truncated.
    """
    r = _reader(key, "TransactionLogKey")
    if r.i16() != 0:
        return None
    transactional_id = r.string()
    return transactional_id


def encode_transaction_log_value(value: TransactionLogValue) -> bytes:
    """``TransactionLogValue`` version 0 (partitions null when the state is Empty, as
    Kafka's ``TransactionLog.valueToBytes``).

    Raises:
        ValueError: an Empty state with partitions (Kafka's ``IllegalStateException``).
    """
    out = bytearray(I16.pack(0))
    out += I64.pack(value.producer_id)
    out += I16.pack(value.producer_epoch)
    out += I32.pack(value.transaction_timeout_ms)
    out += I8.pack(value.state)
    if value.state == 0:
        if value.partitions:
            raise ValueError("a transaction in state Empty must not carry partitions")
        out += I32.pack(-1)
    else:
        out += I32.pack(len(value.partitions))
        for topic, partitions in value.partitions:
            write_string(out, topic)
            out += I32.pack(len(partitions))
            for partition in partitions:
                out += I32.pack(partition)
    out += I64.pack(value.last_update_timestamp_ms)
    out += I64.pack(value.start_timestamp_ms)
    return bytes(out)


def _nullable_count(r: SchemaReader) -> int:
    n = r.uvarint() - 1 if r.flexible else r.i32()
    if n > len(r.buf) - r.pos:
        raise TransactionRecordFormatError(f"{r.what}: array of {n} elements exceeds the data")
    return n


def decode_transaction_log_value(value: bytes | memoryview) -> TransactionLogValue:
    """Parse ``TransactionLogValue`` v0 or v1.

    Raises:
        TransactionRecordFormatError: unknown version, truncated, or an unknown state id.
    """
    r = _reader(value, "TransactionLogValue")
    version = r.i16()
    if version not in (0, 1):
        raise TransactionRecordFormatError(f"unknown TransactionLogValue version {version}")
    r.flexible = version >= 1
    producer_id = r.i64()
    producer_epoch = r.i16()
    timeout_ms = r.i32()
    state = r.i8()
    if not 0 <= state <= 7:
        raise TransactionRecordFormatError(f"TransactionLogValue: unknown transaction state id {state}")
    partitions: list[tuple[str, tuple[int, ...]]] = []
    for _ in range(max(_nullable_count(r), 0)):
        topic = r.string()
        ids = tuple(r.i32() for _ in range(r.count()))
        r.skip_tags()
        partitions.append((topic, ids))
    last_update = r.i64()
    start = r.i64()
    previous_pid = next_pid = -1
    client_version = 0
    if r.flexible:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            size = r.uvarint()
            end = r.pos + size
            if tag == 0:
                previous_pid = r.i64()
            elif tag == 1:
                next_pid = r.i64()
            elif tag == 2:
                client_version = r.i16()
            if r.pos > end:
                raise TransactionRecordFormatError(
                    f"TransactionLogValue: tagged field {tag} overruns its size"
                )
            r.skip_bytes(end - r.pos)
    return TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        tuple(partitions),
        last_update,
        start,
        previous_pid,
        next_pid,
        client_version,
    )
