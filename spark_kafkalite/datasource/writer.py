"""Batch and streaming sink (``df.write`` / ``df.writeStream`` ``.format("kafkalite")``): Spark's
``KafkaWriter`` / ``KafkaWriteTask``.

Input columns (validated on the driver, as Spark's ``KafkaWriter.validateQuery`` does):

- ``value`` string or binary, required (null = tombstone);
- ``key`` string or binary, optional (null key -> the producer's partitioner);
- ``topic`` string, required unless the ``topic`` option is set (the option wins);
- ``partition`` int, optional (null -> partitioner);
- ``headers`` ``array<struct<key:string,value:binary>>``, optional;
- ``timestamp`` timestamp, optional (record CreateTime, µs truncated to ms; SPARK-50160).

Every task (one per Spark partition, on an executor) takes a producer from its Python worker's
pool (reused across tasks and micro-batches, Spark's ``CachedKafkaProducer``; closed when a task
fails, see :mod:`.client_pool`), partitions and encodes each Arrow
batch into record batches (``arrow_sink``; ``batch.size`` defaults to ``SINK_BATCH_SIZE_BYTES``),
hands them to the producer whole, flushes, and returns a :class:`KafkaLiteCommitMessage`; the first failed send fails the task with the
broker's error. Delivery is at-least-once by default, like Spark's Kafka sink (a retried task or
micro-batch sends its rows again); ``deliveryGuarantee=exactly-once`` writes each task's rows in
one Kafka transaction with a marker of its batch instead (:func:`write_exactly_once`,
:mod:`.exactly_once`), so a re-run writes nothing twice for ``read_committed`` readers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, DataType, IntegerType, StringType, StructType, TimestampType

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.arrow import HEADERS_TYPE
from spark_kafkalite.datasource.arrow_sink import SinkBatchEncoder
from spark_kafkalite.datasource.client_pool import ClientPool
from spark_kafkalite.datasource.client_protocols import SinkProducer, SourceAdmin, TransactionalSinkProducer
from spark_kafkalite.datasource.errors import KafkaLiteWriteError
from spark_kafkalite.datasource.exactly_once import task_identity, write_task
from spark_kafkalite.datasource.options import KafkaLiteOptionError, SinkOptions
from spark_kafkalite.datasource.phase_timing import phase, waiting_iterator
from spark_kafkalite.datasource.worker_heap import freeze_imported_heap
from spark_kafkalite.protocol.group_records import OffsetAndMetadata

__all__ = [
    "KafkaLiteCommitMessage",
    "WritePlan",
    "plan_write",
    "write_batches",
    "KafkaLiteBatchWriter",
    "KafkaLiteStreamWriter",
]

log = logging.getLogger(__name__)

_FLUSH_WAIT_S = 300.0

#: The sink's producer ``batch.size`` unless ``kafka.batch.size`` is given. A write task hands
#: whole Arrow batches to the producer, so batches are always full; with Kafka's 16 KiB default
#: the task is bound by the number of ProduceRequests (one batch per partition each), and 128 KiB
#: batches measured 1.6x the rows/s at half the CPU per row (bench/spark_write.py, issue #10).
#: 256 KiB halves the requests again and saves ~15% CPU per row outside Spark, but measured slower
#: in Spark (same-session A/B, 4 rounds: 0.77x the no-op peer vs 1.02x at 128 KiB).
SINK_BATCH_SIZE_BYTES = 131072


@dataclass
class KafkaLiteCommitMessage(WriterCommitMessage):
    """What a task sent: ``records`` rows, ``partition_id`` of the Spark task (if known);
    ``skipped``: exactly-once mode found this batch already committed by the partition and
    wrote nothing."""

    records: int
    partition_id: int | None = None
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class WritePlan:
    """Which optional columns the input has (decided once, on the driver)."""

    topic_option: str | None
    has_key: bool
    has_topic: bool
    has_partition: bool
    has_headers: bool
    has_timestamp: bool


def _field_types(schema: StructType) -> dict[str, DataType]:
    return {f.name.lower(): f.dataType for f in schema.fields}


def plan_write(schema: StructType, sink: SinkOptions) -> WritePlan:
    """Validate the input schema against the Kafka sink rules.

    Raises:
        KafkaLiteOptionError: a required column is missing or a column has the wrong type (the
            message names the column, in Spark's words).
    """
    types = _field_types(schema)
    if sink.topic is None:
        if "topic" not in types:
            raise KafkaLiteOptionError(
                "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."
            )
    if "topic" in types and not isinstance(types["topic"], StringType):
        raise KafkaLiteOptionError(f"Topic type must be a StringType, got {types['topic'].simpleString()}")
    if "value" not in types:
        raise KafkaLiteOptionError("Required attribute 'value' not found")
    if not isinstance(types["value"], (StringType, BinaryType)):
        raise KafkaLiteOptionError(
            f"value attribute type must be a StringType or BinaryType, got {types['value'].simpleString()}"
        )
    if "key" in types and not isinstance(types["key"], (StringType, BinaryType)):
        raise KafkaLiteOptionError(
            f"key attribute type must be a StringType or BinaryType, got {types['key'].simpleString()}"
        )
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise KafkaLiteOptionError(
            f"partition attribute type must be an IntegerType, got {types['partition'].simpleString()}"
        )
    if "headers" in types and types["headers"].simpleString() != HEADERS_TYPE.simpleString():
        raise KafkaLiteOptionError(
            "headers attribute type must be an array<struct<key:string,value:binary>>, "
            f"got {types['headers'].simpleString()}"
        )
    has_timestamp = isinstance(types.get("timestamp"), TimestampType)
    return WritePlan(
        topic_option=sink.topic,
        has_key="key" in types,
        has_topic="topic" in types,
        has_partition="partition" in types,
        has_headers="headers" in types,
        has_timestamp=has_timestamp,
    )


class _PendingSends:
    """Batch futures (``KafkaProducer.send_batch``) not known to be complete; the first failure
    is raised. Checked once per input batch: completed futures are dropped, so the list stays as
    short as the producer's in-flight backlog."""

    def __init__(self) -> None:
        self.sent = 0  # records handed to the producer
        self._pending: list[Future[Any]] = []

    def add(self, future: Future[Any], records: int) -> None:
        self.sent += records
        self._pending.append(future)

    def check(self) -> None:
        still: list[Future[Any]] = []
        for future in self._pending:
            if future.done():
                exc = future.exception()
                if exc is not None:
                    raise exc
            else:
                still.append(future)
        self._pending = still

    def wait_all(self, timeout_s: float) -> None:
        """Wait for every batch (after ``flush``); raise the first failure.

        Raises:
            KafkaLiteWriteError: some batches did not complete within ``timeout_s``.
        """
        _, not_done = wait(self._pending, timeout=timeout_s)
        self.check()
        if not_done:
            raise KafkaLiteWriteError(
                f"{len(not_done)} record batches of the {self.sent} records were not acknowledged "
                f"within {timeout_s:.0f} s"
            )


def _new_producer(config: dict[str, Any]) -> TransactionalSinkProducer:
    from spark_kafkalite.client import KafkaProducer

    return KafkaProducer(config)


_PRODUCERS: ClientPool[SinkProducer] = ClientPool[SinkProducer](_new_producer).close_at_exit()
"""Producers of this Python worker, reused by later tasks and micro-batches with the same
options (Spark's ``CachedKafkaProducer``): no reconnect and no metadata round trip per batch."""


def producer_config(sink: SinkOptions) -> dict[str, Any]:
    """The producer configuration of a write task (the pool key)."""
    config: dict[str, Any] = dict(sink.client_config)
    config.setdefault("client.id", "kafkalite-spark-writer")
    config.setdefault("batch.size", SINK_BATCH_SIZE_BYTES)
    return config


def write_batches(
    batches: Iterator[pa.RecordBatch],
    plan: WritePlan,
    sink: SinkOptions,
    producers: ClientPool[SinkProducer] | None = None,
) -> int:
    """Send every row of ``batches`` and wait until all are acknowledged; returns the row count.
    Rows are partitioned and encoded per Arrow batch (``arrow_sink.SinkBatchEncoder``) and reach
    the producer as whole record batches (``KafkaProducer.send_batch``).

    The producer comes from ``producers`` (default: this worker's pool): it is handed back after
    every row is acknowledged, and closed instead when anything failed.

    Raises:
        KafkaLiteWriteError: a row has a null topic and no ``topic`` option is set.
        KafkaError: the first failed send (e.g. ``UnknownTopicOrPartitionError``).
    """
    freeze_imported_heap()
    pool = _PRODUCERS if producers is None else producers
    config = producer_config(sink)
    with phase("write.acquireProducer"):
        producer = pool.acquire(config)
    try:
        sent, _ = _send_all(batches, plan, producer)
    except BaseException:
        pool.discard(producer)
        raise
    pool.release(config, producer)
    return sent


def _send_all(
    batches: Iterator[pa.RecordBatch], plan: WritePlan, producer: SinkProducer
) -> tuple[int, TopicPartition | None]:
    """Send every row, flush, wait for every ack; returns ``(records, first topic-partition
    written or None)``."""
    tracker = _PendingSends()
    first: TopicPartition | None = None
    encoder = SinkBatchEncoder(
        producer,
        plan.topic_option,
        has_key=plan.has_key,
        has_partition=plan.has_partition,
        has_headers=plan.has_headers,
        has_timestamp=plan.has_timestamp,
    )
    with phase("write.inputEncodeSend"):  # includes write.input: waiting for the input rows
        for batch in waiting_iterator("write.input", batches):
            for topic, partition, builder in encoder.encode(batch):
                if first is None:
                    first = TopicPartition(topic, partition)
                tracker.add(
                    producer.send_batch(topic, partition, builder, builder.size_bytes), builder.record_count
                )
            tracker.check()
        for topic, partition, builder in encoder.finish():
            if first is None:
                first = TopicPartition(topic, partition)
            tracker.add(
                producer.send_batch(topic, partition, builder, builder.size_bytes), builder.record_count
            )
    with phase("write.flush"):
        producer.flush()
        tracker.wait_all(_FLUSH_WAIT_S)
    return tracker.sent, first


def _new_admin(config: dict[str, Any]) -> SourceAdmin:
    from spark_kafkalite.client import KafkaAdminClient

    return KafkaAdminClient(config)


_ADMINS = ClientPool(_new_admin).close_at_exit()
"""Admin clients of this Python worker that read exactly-once markers (reused across tasks)."""


def _read_marker_offsets(sink: SinkOptions, group: str) -> dict[TopicPartition, OffsetAndMetadata]:
    """Every committed offset of ``group``, with RequireStable (a pending transactional commit is
    waited for), through this worker's pooled admin client."""
    config: dict[str, Any] = dict(sink.client_config)
    config["client.id"] = "kafkalite-spark-writer-marker"
    admin = _ADMINS.acquire(config)
    try:
        offsets = admin.list_consumer_group_offsets_and_metadata(group, require_stable=True)
    except BaseException:
        _ADMINS.discard(admin)
        raise
    _ADMINS.release(config, admin)
    return offsets


def write_exactly_once(
    batches: Iterator[pa.RecordBatch], plan: WritePlan, sink: SinkOptions, *, streaming: bool
) -> KafkaLiteCommitMessage:
    """The write task of ``deliveryGuarantee=exactly-once`` (:func:`.exactly_once.write_task`):
    one transaction under this Spark partition's transactional id, with its batch marker; a
    new producer per task (``init_transactions`` runs once per producer and must fence every
    earlier attempt before the marker is read).

    Raises:
        KafkaLiteWriteError: no Spark task context, or :func:`.exactly_once.decide`'s error.
        KafkaError: the first failure of the transaction (it is aborted).
    """
    from pyspark import TaskContext

    from spark_kafkalite.client.producer.kafka_producer import PRODUCER_DEFAULTS

    freeze_imported_heap()
    options = sink.exactly_once
    if options is None:
        raise RuntimeError("the exactly-once write path was given a sink without exactly-once options")
    context = TaskContext.get()
    if context is None:
        raise KafkaLiteWriteError("exactly-once sink: write() ran outside a Spark task")
    identity = task_identity(options, context.partitionId(), context.getLocalProperty, streaming=streaming)
    config = producer_config(sink)
    outcome = write_task(
        batches,
        identity,
        new_producer=lambda txn_id: _new_producer({**config, "transactional.id": txn_id}),
        read_offsets=lambda group: _read_marker_offsets(sink, group),
        send_rows=lambda rows, producer: _send_all(rows, plan, producer),
        offset_and_metadata=OffsetAndMetadata,
        transaction_timeout_ms=float(
            config.get("transaction.timeout.ms", PRODUCER_DEFAULTS["transaction.timeout.ms"])
        ),
    )
    return KafkaLiteCommitMessage(
        records=outcome.records, partition_id=identity.partition_id, skipped=outcome.skipped
    )


def _task_partition_id() -> int | None:
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        return context.partitionId() if context is not None else None
    except Exception:  # noqa: BLE001
        return None


def _totals(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    """``(records written, tasks skipped)`` over the tasks' commit messages."""
    ours = [m for m in messages if isinstance(m, KafkaLiteCommitMessage)]
    return sum(m.records for m in ours), sum(1 for m in ours if m.skipped)


class KafkaLiteBatchWriter(DataSourceArrowWriter):
    """``df.write.format("kafkalite").mode("append")``: each task uses a pooled producer."""

    def __init__(self, sink: SinkOptions, plan: WritePlan) -> None:
        self.sink = sink
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLiteCommitMessage:
        if self.sink.exactly_once is not None:
            return write_exactly_once(iterator, self.plan, self.sink, streaming=False)
        records = write_batches(iterator, self.plan, self.sink)
        return KafkaLiteCommitMessage(records=records, partition_id=_task_partition_id())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        freeze_imported_heap()
        total, skipped = _totals(messages)
        log.info(
            "kafkalite batch write committed: %d records from %d tasks (%d skipped: already committed)",
            total,
            len(messages),
            skipped,
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent, _ = _totals(messages)
        if self.sink.exactly_once is not None:
            log.warning(
                "kafkalite batch write aborted; %d records of finished tasks are committed, failed tasks' "
                "transactions are aborted: a re-run with the same batchId writes only what is missing",
                sent,
            )
            return
        log.warning(
            "kafkalite batch write aborted; %d records from finished tasks stay in Kafka (at-least-once)",
            sent,
        )


class KafkaLiteStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("kafkalite")``: each task uses a pooled producer, so later
    micro-batches reuse the connection and metadata of earlier ones."""

    def __init__(self, sink: SinkOptions, plan: WritePlan) -> None:
        self.sink = sink
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaLiteCommitMessage:
        if self.sink.exactly_once is not None:
            return write_exactly_once(iterator, self.plan, self.sink, streaming=True)
        records = write_batches(iterator, self.plan, self.sink)
        return KafkaLiteCommitMessage(records=records, partition_id=_task_partition_id())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        freeze_imported_heap()  # the sink commit runner: a pyspark.daemon worker per micro-batch
        total, skipped = _totals(messages)
        log.info(
            "kafkalite micro-batch %d committed: %d records (%d tasks skipped: already committed)",
            batchId,
            total,
            skipped,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.sink.exactly_once is not None:
            log.warning(
                "kafkalite micro-batch %d aborted; tasks that committed stay committed, the re-run of the "
                "batch skips them (exactly-once)",
                batchId,
            )
            return
        log.warning("kafkalite micro-batch %d aborted; records already sent stay in Kafka", batchId)
