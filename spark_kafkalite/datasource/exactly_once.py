"""``deliveryGuarantee=exactly-once``: the ``kafkalite`` sink's exactly-once mode (issue #12 item 5),
built on plain Kafka transactions (KIP-98; no two-phase commit, which Kafka 4.x does not offer).

Every write task (one Spark partition of one micro-batch, or of one batch ``df.write``) whose
input has rows runs this protocol (docs/spark.md, "Exactly-once"; Kafka's
``TransactionCoordinator`` and KIP-98 / KIP-447 for the transaction rules it relies on):

1. **fence**: a new producer with ``transactional.id`` = :func:`transactional_id` (the
   ``transactionalIdPrefix`` option, the streaming query id, the Spark partition id) calls
   ``init_transactions()`` *first*. InitProducerId bumps the id's epoch, so every earlier attempt
   of the same partition (a failed or speculative task, a task of a killed driver) is fenced and
   its open transaction aborted; it returns only once that attempt's transactions are complete,
   so whatever it committed is visible from then on (Kafka's ``TransactionCoordinator``);
2. **check**: the task reads the marker of its (sink, partition): the committed offsets of the
   consumer group :func:`marker_group`, fetched with RequireStable (KIP-447: a pending
   transactional commit is waited for, never read half-done). If they say this batch is already
   committed, the task writes nothing (:func:`decide`), once it has checked that its input has
   as many rows and ``value`` bytes as it wrote then (:func:`check_rerun`: else the re-run
   is not deterministic and skipping would lose rows). Checking before fencing could let a
   zombie attempt commit after the check: both would write;
3. **write and record atomically**: ``begin_transaction()``, every row, then
   ``send_offsets_to_transaction`` of the marker (offset = the batch id, metadata
   :func:`encode_marker`: the batch id, the rows and value bytes written) to that group, and ``commit_transaction()``. The rows and the marker
   become visible together, with the COMMIT markers; an aborted attempt leaves neither.

The marker's key is the first topic-partition the task wrote (it exists, as TxnOffsetCommit
requires, and is in the transaction); a task reads every offset of its group and takes the
highest batch (:func:`committed_marker`), so the key may change between batches.

"Batch N" is the micro-batch id (TaskContext local property ``streaming.sql.batchId``) for
``writeStream``, and the ``batchId`` option for a batch ``df.write``. A task whose Spark
partition has no rows does no Kafka I/O (a deterministic re-run has none either).

What it assumes (the README says it too): a re-run of batch N puts the same rows in the same
Spark partitions (deterministic query; a partition given a different number of rows or value
bytes fails, one given no rows writes nothing, rows moved to a partition that had none are
written again); readers use ``isolation.level=read_committed``; the
marker outlives the re-run (group offsets expire ``offsets.retention.minutes`` after the group is
empty, transactional ids after ``transactional.id.expiration.ms``, both 7 days by default); a
task finishes within ``transaction.timeout.ms`` (60 s unless ``kafka.transaction.timeout.ms``;
at most the broker's ``transaction.max.timeout.ms``; a task that took longer fails with a
``KafkaLiteWriteError`` saying so). Partitions of one batch commit one by one:
a read_committed reader may see part of a batch before the rest (there is no cross-task
atomicity without two-phase commit), never a record twice.

Pure logic except :func:`write_task`, which drives the clients it is given, and
:func:`run_task`, which wires the real ones; no pyspark import at module level.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.datasource.client_protocols import SinkProducer, TransactionalSinkProducer
from spark_kafkalite.datasource.errors import KafkaLiteWriteError
from spark_kafkalite.datasource.option_checks import KafkaLiteOptionError
from spark_kafkalite.protocol.errors import KafkaError
from spark_kafkalite.protocol.group_records import OffsetAndMetadata

__all__ = [
    "AT_LEAST_ONCE",
    "EXACTLY_ONCE",
    "ExactlyOnceOptions",
    "TaskIdentity",
    "TaskOutcome",
    "parse_exactly_once",
    "transactional_id",
    "marker_group",
    "Marker",
    "RowsFingerprint",
    "encode_marker",
    "decode_marker",
    "committed_marker",
    "check_rerun",
    "decide",
    "task_identity",
    "write_task",
]

log = logging.getLogger(__name__)

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
_GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)

_MARKER_SINK = "kafkalite"
_MARKER_VERSION = 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ExactlyOnceOptions:
    """The sink's exactly-once settings: ``transactionalIdPrefix`` and, for a batch ``df.write``,
    the ``batchId`` option (None in streaming, where Spark's micro-batch id is used)."""

    transactional_id_prefix: str
    batch_id: int | None = None


def _parse_batch_id(raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise KafkaLiteOptionError(
            f"Invalid value '{raw}' for option 'batchId': expected an integer between 0 and {_INT64_MAX}"
        ) from None
    if not 0 <= value <= _INT64_MAX:
        raise KafkaLiteOptionError(
            f"Invalid value '{raw}' for option 'batchId': expected an integer between 0 and {_INT64_MAX}"
        )
    return value


def parse_exactly_once(
    params: Mapping[str, str], kafka: Mapping[str, str], *, streaming: bool
) -> ExactlyOnceOptions | None:
    """The ``deliveryGuarantee`` option and what goes with it (lower-cased ``params``; ``kafka``:
    the ``kafka.*`` options without the prefix). None for ``at-least-once`` (the default).

    Raises:
        KafkaLiteOptionError: naming the option: an unknown guarantee; ``kafka.transactional.id``
            (the sink derives one per task); ``transactionalIdPrefix`` or ``batchId`` without
            exactly-once; exactly-once without ``transactionalIdPrefix``, with
            ``kafka.enable.idempotence=false`` or ``kafka.acks`` other than ``all``; ``batchId``
            in a streaming query, or missing / not a non-negative integer in a batch write.
    """
    guarantee = params.get("deliveryguarantee", AT_LEAST_ONCE).strip().lower()
    if guarantee not in _GUARANTEES:
        raise KafkaLiteOptionError(
            f"Invalid value '{params['deliveryguarantee']}' for option 'deliveryGuarantee': "
            f"expected '{AT_LEAST_ONCE}' (the default) or '{EXACTLY_ONCE}'"
        )
    if "transactional.id" in kafka:
        raise KafkaLiteOptionError(
            "Kafka option 'kafka.transactional.id' is not supported: with "
            "deliveryGuarantee=exactly-once the sink derives one transactional id per Spark partition "
            "from option 'transactionalIdPrefix'"
        )
    if guarantee == AT_LEAST_ONCE:
        for key, name in (("transactionalidprefix", "transactionalIdPrefix"), ("batchid", "batchId")):
            if key in params:
                raise KafkaLiteOptionError(
                    f"Option '{name}' is only valid with deliveryGuarantee=exactly-once "
                    f"(deliveryGuarantee is '{guarantee}')"
                )
        return None
    prefix = params.get("transactionalidprefix", "").strip()
    if not prefix:
        raise KafkaLiteOptionError(
            "deliveryGuarantee=exactly-once requires option 'transactionalIdPrefix': a stable id of this "
            "sink, unique among the sinks writing to the cluster (the prefix of its transactional ids "
            "and marker groups)"
        )
    if str(kafka.get("enable.idempotence", "true")).strip().lower() == "false":
        raise KafkaLiteOptionError(
            "deliveryGuarantee=exactly-once needs an idempotent producer: remove option "
            "'kafka.enable.idempotence=false'"
        )
    acks = str(kafka.get("acks", "all")).strip().lower()
    if acks not in ("all", "-1"):
        raise KafkaLiteOptionError(
            f"deliveryGuarantee=exactly-once needs acks=all: remove option 'kafka.acks' (it is '{acks}')"
        )
    batch_id: int | None = None
    if streaming:
        if "batchid" in params:
            raise KafkaLiteOptionError(
                "Option 'batchId' is only valid in batch writes: a streaming query's exactly-once sink "
                "uses the micro-batch id"
            )
    else:
        if "batchid" not in params:
            raise KafkaLiteOptionError(
                "deliveryGuarantee=exactly-once in a batch write requires option 'batchId': the identity "
                "of this write (a re-run with the same batchId writes nothing a task already committed; "
                "use a larger batchId for the next write)"
            )
        batch_id = _parse_batch_id(params["batchid"])
    return ExactlyOnceOptions(transactional_id_prefix=prefix, batch_id=batch_id)


def transactional_id(prefix: str, query_id: str | None, partition_id: int) -> str:
    """``{prefix}-{query_id}-{partition_id}`` (streaming) or ``{prefix}-{partition_id}`` (batch
    write): one id per Spark partition, the same for every attempt and re-run of it."""
    if query_id:
        return f"{prefix}-{query_id}-{partition_id}"
    return f"{prefix}-{partition_id}"


def marker_group(txn_id: str) -> str:
    """The consumer group holding the marker of the task with transactional id ``txn_id``: the id
    itself (groups and transactional ids are separate namespaces in Kafka). A group per Spark
    partition, since one marker key per task could otherwise collide with another task's."""
    return txn_id


@dataclass(frozen=True, slots=True)
class Marker:
    """A batch marker: batch ``batch_id`` is committed, and what this (sink, Spark partition)
    wrote for it: ``records`` (rows) and ``value_bytes`` (the byte lengths of the ``value``
    column, summed; a cheap fingerprint of which rows they were). Both None (unknown) in a
    marker written before they were recorded."""

    batch_id: int
    records: int | None = None
    value_bytes: int | None = None


def encode_marker(marker: Marker) -> str:
    """The offset metadata of ``marker``, e.g.
    ``{"batchId":7,"records":2,"sink":"kafkalite","v":1,"valueBytes":10}`` (well below
    ``offset.metadata.max.bytes``; still version 1: a reader that knows only ``batchId`` ignores
    the rest)."""
    fields: dict[str, Any] = {"batchId": marker.batch_id, "sink": _MARKER_SINK, "v": _MARKER_VERSION}
    if marker.records is not None:
        fields["records"] = marker.records
    if marker.value_bytes is not None:
        fields["valueBytes"] = marker.value_bytes
    return json.dumps(fields, separators=(",", ":"), sort_keys=True)


def _count(value: Any) -> int | None:
    """``value`` if it is a count (an int >= 0, not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def decode_marker(metadata: str | None) -> Marker | None:
    """The marker written by :func:`encode_marker`, or None for anything else (empty, not JSON,
    another writer's metadata, another version). ``records`` / ``valueBytes`` missing or not a
    count: None (unknown)."""
    if not metadata:
        return None
    try:
        value = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("sink") != _MARKER_SINK or value.get("v") != _MARKER_VERSION:
        return None
    batch = _count(value.get("batchId"))
    if batch is None:
        return None
    return Marker(batch, _count(value.get("records")), _count(value.get("valueBytes")))


def committed_marker(group: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> Marker | None:
    """The marker of the highest batch among ``offsets`` (``{tp: OffsetAndMetadata}`` of
    ``group``), None when there is none. Offsets that are not markers are logged and ignored."""
    best: Marker | None = None
    for tp, om in offsets.items():
        marker = decode_marker(om.metadata)
        if marker is None:
            log.warning(
                "exactly-once sink: group '%s' holds an offset that is not a kafkalite marker (%s-%d); "
                "is transactionalIdPrefix shared with another application?",
                group,
                tp.topic,
                tp.partition,
            )
            continue
        if best is None or marker.batch_id > best.batch_id:
            best = marker
    return best


class RowsFingerprint:
    """Counts the rows and the ``value`` bytes of the Arrow batches passed through it (per
    batch, vectorised: no per-row Python work), for :class:`Marker`."""

    def __init__(self) -> None:
        self.records = 0
        self.value_bytes = 0

    def through(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches``, counted as they are consumed."""
        for batch in batches:
            self.records += batch.num_rows
            self.value_bytes += pc.sum(pc.binary_length(batch.column("value"))).as_py() or 0
            yield batch

    def marker(self, batch_id: int) -> Marker:
        return Marker(batch_id, self.records, self.value_bytes)


def check_rerun(identity: TaskIdentity, committed: Marker, rerun: Marker) -> None:
    """A re-run of committed batch ``committed`` must give this Spark partition the rows it
    wrote then (``rerun``: what it has now); unknown counts (an older marker) pass.

    Raises:
        KafkaLiteWriteError: the counts differ: skipping would lose the rows this partition did
            not write the first time (they went to another partition, which skips too).
    """
    if committed.records is None:
        return
    if committed.records == rerun.records and committed.value_bytes in (None, rerun.value_bytes):
        return
    raise KafkaLiteWriteError(
        f"exactly-once sink: Spark partition {identity.partition_id} ('{identity.transactional_id}') "
        f"committed batch {identity.batch_id} with {committed.records} rows "
        f"({committed.value_bytes} value bytes), but this re-run of batch {identity.batch_id} gives it "
        f"{rerun.records} rows ({rerun.value_bytes} value bytes). The sink assumes a deterministic "
        "re-run (the same rows in the same Spark partitions); this one maps rows to partitions "
        "differently (were minPartitions, maxRecordsPerPartition or a repartition changed?), and "
        "writing nothing would lose rows. Re-run with the original partitioning"
    )


def decide(txn_id: str, committed: int | None, batch_id: int) -> Literal["write", "skip"]:
    """``skip`` when batch ``batch_id`` is the one already committed, ``write`` when none or an
    earlier one is.

    Raises:
        KafkaLiteWriteError: a later batch is committed (a re-run of an older batch: in streaming a
            checkpoint that was rolled back, in a batch write a ``batchId`` that went backwards).
    """
    if committed is None or committed < batch_id:
        return "write"
    if committed == batch_id:
        return "skip"
    raise KafkaLiteWriteError(
        f"exactly-once sink: transactional id '{txn_id}' already committed batch {committed}, later than "
        f"this batch {batch_id}; a batch id must grow from one write to the next (use a new "
        "transactionalIdPrefix to start over)"
    )


@dataclass(frozen=True, slots=True)
class TaskIdentity:
    """Who a write task is: its ``transactional_id``, the ``batch_id`` it writes, the Spark
    ``partition_id``."""

    transactional_id: str
    batch_id: int
    partition_id: int


def task_identity(
    options: ExactlyOnceOptions,
    partition_id: int,
    local_property: Callable[[str], str | None],
    *,
    streaming: bool,
) -> TaskIdentity:
    """Derive the task's identity. Streaming: the batch id from the task's local property
    ``streaming.sql.batchId`` (Spark's ``MicroBatchExecution.BATCH_ID_KEY``), the query id from
    ``sql.streaming.queryId`` (``StreamExecution.QUERY_ID_KEY``; stable across restarts from one
    checkpoint). Batch write: the ``batchId`` option, no query id.

    Raises:
        KafkaLiteWriteError: a streaming task without those properties.
    """
    if not streaming:
        if options.batch_id is None:  # parse_exactly_once requires it for a batch write
            raise KafkaLiteWriteError("an exactly-once batch write needs the batchId option")
        txn = transactional_id(options.transactional_id_prefix, None, partition_id)
        return TaskIdentity(txn, options.batch_id, partition_id)
    batch_raw = local_property("streaming.sql.batchId")
    query_id = local_property("sql.streaming.queryId")
    if batch_raw is None or not query_id:
        raise KafkaLiteWriteError(
            "exactly-once sink: this streaming write task has no micro-batch id or query id "
            f"(task local properties streaming.sql.batchId={batch_raw!r}, sql.streaming.queryId={query_id!r})"
        )
    txn = transactional_id(options.transactional_id_prefix, query_id, partition_id)
    return TaskIdentity(txn, int(batch_raw), partition_id)


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """What a task did: ``records`` written (0 when ``skipped``: its batch was already committed)."""

    records: int
    skipped: bool


def _first_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch] | None:
    """``batches`` from its first batch with rows on, or None when no batch has a row."""
    it = iter(batches)
    for batch in it:
        if batch.num_rows:
            return itertools.chain((batch,), it)
    return None


def _timed_out(
    identity: TaskIdentity, open_ms: float, transaction_timeout_ms: float, error: KafkaError
) -> KafkaLiteWriteError:
    return KafkaLiteWriteError(
        f"exactly-once sink: the transaction of '{identity.transactional_id}' (batch {identity.batch_id}, "
        f"Spark partition {identity.partition_id}) was open {open_ms / 1000.0:.1f} s, longer than "
        f"kafka.transaction.timeout.ms ({transaction_timeout_ms:.0f} ms), so the transaction coordinator "
        f"aborted it and the producer failed ({type(error).__name__}); set a larger "
        "kafka.transaction.timeout.ms (at most the broker's transaction.max.timeout.ms) or write smaller "
        "batches (e.g. maxOffsetsPerTrigger)"
    )


SendRows = Callable[[Iterator[pa.RecordBatch], SinkProducer], tuple[int, TopicPartition | None]]
"""``(batches, producer) -> (records sent and acknowledged, first topic-partition written)``."""


def write_task(
    batches: Iterable[pa.RecordBatch],
    identity: TaskIdentity,
    *,
    new_producer: Callable[[str], TransactionalSinkProducer],
    read_offsets: Callable[[str], Mapping[TopicPartition, OffsetAndMetadata]],
    send_rows: SendRows,
    offset_and_metadata: Callable[..., OffsetAndMetadata],
    transaction_timeout_ms: float,
) -> TaskOutcome:
    """Run the task protocol of the module docstring.

    Args:
        new_producer: ``transactional.id -> producer`` (a new, not yet initialised producer).
        read_offsets: ``group -> {tp: OffsetAndMetadata}``, read_committed, RequireStable.
        send_rows: sends every row inside the open transaction and waits for the acks.
        offset_and_metadata: ``(offset, *, metadata) -> OffsetAndMetadata``.
        transaction_timeout_ms: the producers' ``transaction.timeout.ms``.

    Raises:
        KafkaLiteWriteError: :func:`decide`'s error; or the transaction failed after it was open
            longer than ``transaction_timeout_ms``: the coordinator aborted it (Kafka's
            ``TransactionCoordinator`` fences a timed-out transaction by bumping the epoch, so
            the producer sees ``ProducerFencedError`` although no newer producer exists); the
            producer's error is the cause.
        KafkaError: the first failure of the producer (e.g. ``ProducerFencedError`` when a newer
            attempt of this partition started, ``KafkaTimeoutError`` when the coordinator is
            unavailable for ``max.block.ms``) or of the marker read; the transaction is aborted
            and the producer closed at once (``close(0)``) first.
    """
    rows = _first_rows(batches)
    if rows is None:
        return TaskOutcome(records=0, skipped=False)
    txn_id = identity.transactional_id
    group = marker_group(txn_id)
    producer = new_producer(txn_id)
    in_transaction = False
    failed = False
    try:
        producer.init_transactions()
        committed = committed_marker(group, read_offsets(group))
        fingerprint = RowsFingerprint()
        committed_id = None if committed is None else committed.batch_id
        if decide(txn_id, committed_id, identity.batch_id) == "skip":
            if committed is None:  # decide() skips only a batch the committed marker covers
                raise RuntimeError(f"{txn_id}: batch {identity.batch_id} skipped without a committed marker")
            for _ in fingerprint.through(rows):  # read the input to its end (the worker is reused)
                pass
            check_rerun(identity, committed, fingerprint.marker(identity.batch_id))
            log.info(
                "exactly-once sink: %s already committed batch %d; writing nothing", txn_id, identity.batch_id
            )
            return TaskOutcome(records=0, skipped=True)
        producer.begin_transaction()
        began = time.monotonic()
        in_transaction = True
        records, first = send_rows(fingerprint.through(rows), producer)
        if first is not None:
            marker = encode_marker(fingerprint.marker(identity.batch_id))
            producer.send_offsets_to_transaction(
                {first: offset_and_metadata(identity.batch_id, metadata=marker)}, group
            )
        producer.commit_transaction()
        in_transaction = False
        return TaskOutcome(records=records, skipped=False)
    except BaseException as exc:
        failed = True
        if in_transaction:
            open_ms = (time.monotonic() - began) * 1000.0
            try:
                producer.abort_transaction()
            except Exception:  # noqa: BLE001 - e.g. fenced: the coordinator aborts it anyway
                log.debug("exactly-once sink: aborting %s failed", txn_id, exc_info=True)
            if isinstance(exc, KafkaError) and open_ms > transaction_timeout_ms:
                raise _timed_out(identity, open_ms, transaction_timeout_ms, exc) from exc
        raise
    finally:
        try:
            # after a failure, close at once (Java close(Duration.ZERO), as Flink's sink does):
            # a graceful close would wait for the InitProducerId or EndTxn still retrying
            # against an unavailable coordinator, and the task would never fail
            producer.close(0 if failed else None)
        except Exception:  # noqa: BLE001 - closing must not mask the task's outcome
            log.debug("exactly-once sink: closing the producer of %s failed", txn_id, exc_info=True)
