"""Produce (key 0): validate one RecordBatch v2 per partition and append it as leader.

Validation follows Kafka's ``ProduceRequest.validateRecords`` and ``LogValidator`` at batch
granularity (records stay opaque bytes): exactly one batch (``INVALID_RECORD``), size <=
the topic's ``max.message.bytes`` (``MESSAGE_TOO_LARGE``), CRC-32C / truncation (``CORRUPT_MESSAGE``),
magic and counts (``INVALID_RECORD``), base offset 0, no control batches, zstd only from v7
(``UNSUPPORTED_COMPRESSION_TYPE``), timestamps within the topic's ``message.timestamp.*.max.ms``
(``INVALID_TIMESTAMP``). Per-topic values come from the partition log's ``LogConfig`` (topic
override, else the broker default). Produce does not auto-create topics.

Per-record errors (KIP-467, :mod:`broker.log.log_validator`): a batch rejected for some of its
records (a timestamp out of range; a keyless record on a compacted topic, found by the log's
append) is refused whole, and from v8 the partition's response lists those records in
``record_errors`` (``batch_index``, message) with the batch's message in ``error_message``.

Recompression (``LogValidator.validateMessagesAndAssignOffsetsCompressed``): when the topic's
``compression.type`` is a codec (not ``producer``) and the batch's codec differs, the valid batch
is rebuilt with the topic's codec and level (:func:`~spark_kafkalite.protocol.recompression.rebuild_batch`:
records decompressed, offset deltas reassigned, recompressed, CRC computed anew) and that batch
is appended; ``MESSAGE_TOO_LARGE`` if it outgrows ``max.message.bytes``. A batch already in the
topic's codec is kept as sent, whatever its level (Kafka's in-place assignment: the codec types
match), and so is every batch under ``producer``; clients cannot send control batches, so
Kafka's exception for uncompressed control batches has nothing to apply to here. Followers
copy the leader's bytes and never rebuild.

Storage faults (Kafka's ``LogDirFailureChannel``): an ``OSError`` while appending (ENOSPC, EFBIG,
EACCES, EROFS, EIO, ...) marks the partition's log dir offline and answers
``KAFKA_STORAGE_ERROR``; later produces to any log in that dir get ``KAFKA_STORAGE_ERROR`` without
touching the disk, while fetches keep serving what is already stored.

Off the event loop (Kafka validates on its request handler threads, never on the network
threads): a batch larger than ``INLINE_BATCH_BYTES``, or whose records decompress to more than
``INLINE_UNCOMPRESSED_BYTES`` (a compression bomb), is checked on a ``num.io.threads`` worker; so
is a batch to rebuild whose records pass ``INLINE_RECOMPRESS_BYTES``, or whose topic compresses
at a slower level than the codec's default.
The request takes its place in each partition's append order when it arrives
(``ReplicaManager.append_order``), so later requests to those partitions, from any connection,
append after it: offsets, idempotence and transactions see the arrival order, as before.

acks: 0 (no response; a failed append closes the connection, as Kafka does), 1 (answer after
the leader's append) and -1 (``ReplicaManager.append_records``: ``NOT_ENOUGH_REPLICAS`` before the
append when the ISR is below ``min(min.insync.replicas, replication factor)``; then wait in the
produce purgatory until the high watermark passes the batch: ``NONE``,
``NOT_ENOUGH_REPLICAS_AFTER_APPEND``, ``NOT_LEADER_OR_FOLLOWER`` or, after the request's timeout,
``REQUEST_TIMED_OUT``; on one node the HW moves at once). Any other value ->
``INVALID_REQUIRED_ACKS`` for every partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.apis.auth_helper import authorize, authorized_names
from broker.apis.context import BrokerContext
from broker.config import LONG_MAX
from broker.errors import error_code_for, error_message_for
from broker.log.log_validator import raise_record_errors, record_errors_of
from broker.metrics.meters import FAILED_PRODUCE
from broker.network.request_context import CloseConnection, RequestContext
from broker.replication.append_order import AppendTicket
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.compression import within_default_cost
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    MessageTooLargeError,
    RecordError,
    UnsupportedCompressionTypeError,
)
from spark_kafkalite.protocol.framing import decode_request_body
from spark_kafkalite.protocol.produce_request import ProduceRequest as FastProduceRequest
from spark_kafkalite.protocol.produce_request import decode_produce_request_fast
from spark_kafkalite.protocol.produce_response import (
    ProducePartitionResult,
    ProduceResponseData,
    ProduceTopicResult,
)
from spark_kafkalite.protocol.recompression import rebuild_batch
from spark_kafkalite.protocol.record_batch import (
    COMPRESSION_ZSTD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    read_header,
    validate_batch,
    validate_record_framing,
)

if TYPE_CHECKING:
    from broker.apis.kio_types import ProduceRequest, ProduceResponse

_NO_BATCH = "Produce requests must have exactly one record batch, got none"

Records = bytes | memoryview | None
"""A partition's record set as decoded: kio's bytes, or a view into the frame (fast decode)."""

__all__ = [
    "PRODUCE_DECODERS",
    "handle_produce",
    "produce_answered",
    "produce_error_response",
    "validate_produce_batch",
]

logger = logging.getLogger(__name__)


def _produce_decoder(version: int) -> Callable[[bytes | bytearray, int], ProduceRequest | FastProduceRequest]:
    def decode(frame: bytes | bytearray, offset: int) -> ProduceRequest | FastProduceRequest:
        """The hand-written decoder (records as views into the frame); any body it does not
        accept as plain and well-formed goes through the bounded scan + kio, which raises the
        same errors as for every other API (issue #14)."""
        request = decode_produce_request_fast(frame, offset, version)
        if request is None:
            entity: ProduceRequest = decode_request_body(ApiKey.PRODUCE, version, frame, offset)
            return entity
        return request

    return decode


PRODUCE_DECODERS: dict[int, Callable[[bytes | bytearray, int], ProduceRequest | FastProduceRequest]] = {
    version: _produce_decoder(version) for version in range(3, 10)
}
"""ProduceRequest v3-v9 body decoders for ``ApiSpec.decoders``."""


def validate_produce_batch(
    records: bytes | memoryview | None,
    *,
    message_max_bytes: int,
    api_version: int,
    timestamp_before_max_ms: int = LONG_MAX,
    timestamp_after_max_ms: int = LONG_MAX,
    max_uncompressed_bytes: int = 2**31 - 1,
    topic_partition: tuple[str, int] = ("", -1),
    compacted: bool = False,
    check_framing: bool = True,
) -> BatchHeader:
    """Check that ``records`` is exactly one valid client RecordBatch v2 whose records section
    decompresses to at most ``max_uncompressed_bytes`` (``kafkalite.message.max.uncompressed.bytes``;
    streamed through, never inflated whole). ``topic_partition`` (topic, partition) and
    ``compacted`` (the topic's ``cleanup.policy`` has ``compact``) shape the per-record errors.
    ``check_framing=False`` leaves the records' framing (and the decompressed-size bound) to the
    caller that rebuilds them (:func:`~spark_kafkalite.protocol.recompression.rebuild_batch`
    checks both while it decompresses), so a rebuilt batch is decompressed once.

    Raises:
        InvalidRecordError, MessageTooLargeError, CorruptRecordError,
        UnsupportedCompressionTypeError: the batch as a whole.
        InvalidTimestampError: a CreateTime out of range; ``record_errors`` (KIP-467) names each
            such record and, on a compacted topic, each keyless one
            (:func:`~broker.log.log_validator.raise_record_errors`).
    """
    if not records:
        raise InvalidRecordError(_NO_BATCH)
    header = read_header(records, 0)  # CorruptRecordError when shorter than a batch header
    if header.magic == 2 and header.size_bytes > message_max_bytes:
        raise MessageTooLargeError(
            f"The record batch size {header.size_bytes} bytes exceeds message.max.bytes={message_max_bytes}"
        )
    header = validate_batch(records, 0)
    if header.size_bytes != len(records):
        raise InvalidRecordError(
            "Produce requests must contain exactly one record batch "
            f"({len(records)} bytes sent, the first batch has {header.size_bytes})"
        )
    if header.base_offset != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch should be 0, but it is {header.base_offset}"
        )
    if header.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.compression_type == COMPRESSION_ZSTD and api_version < 7:
        raise UnsupportedCompressionTypeError(
            "Produce requests with ZStandard compression need version 7 or later"
        )
    if check_framing:
        validate_record_framing(records, header, max_uncompressed_bytes=max_uncompressed_bytes)
    if timestamp_before_max_ms != LONG_MAX or timestamp_after_max_ms != LONG_MAX:
        now_ms = int(time.time() * 1000)
        if header.timestamp_type == 0 and (
            header.base_timestamp < now_ms - timestamp_before_max_ms
            or header.max_timestamp > now_ms + timestamp_after_max_ms
        ):
            # KIP-467: name the records out of range (and, on a compacted topic, the keyless
            # ones), as Kafka's LogValidator does; the records are decoded only on this path.
            raise_record_errors(
                record_errors_of(
                    records,
                    f"{topic_partition[0]}-{topic_partition[1]}",
                    compacted=compacted,
                    now_ms=now_ms,
                    timestamp_before_max_ms=timestamp_before_max_ms,
                    timestamp_after_max_ms=timestamp_after_max_ms,
                )
            )
            raise InvalidTimestampError(  # the header's timestamps disagree with its records'
                f"Timestamps [{header.base_timestamp}, {header.max_timestamp}] of the batch header are out of "
                f"range (log.message.timestamp.before/after.max.ms around {now_ms})"
            )
    return header


INLINE_BATCH_BYTES = 1 << 20
"""Largest produce batch (bytes on the wire) checked on the event loop; a larger one (CRC-32C and
record framing of up to ``message.max.bytes``) is checked on a ``num.io.threads`` worker."""

INLINE_UNCOMPRESSED_BYTES = 1 << 20
"""Decompressed bytes a compressed batch may produce while checked on the event loop; past them
(a large or bomb-like batch: a few KB of zstd can inflate to ``kafkalite.message.max.uncompressed.bytes``)
it is checked again, from the start, on a worker thread."""

INLINE_RECOMPRESS_BYTES = 16 * 1024
"""Largest batch (on the wire, and its records decompressed) the leader rebuilds with its topic's
codec on the event loop, and only at a level no slower than the codec's default (~0.1-0.3 ms at
16 KiB for gzip, zstd or lz4, about a thread hand-off); a larger one, or one for a slower level
(zstd 19: ~40 ms for 12 KB), is checked and rebuilt on a worker thread."""


@dataclass(slots=True)
class _BatchLimits:
    """The arguments of :func:`validate_produce_batch` for one partition."""

    message_max_bytes: int
    api_version: int
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    max_uncompressed_bytes: int
    compacted: bool
    compression: tuple[int, int | None] | None  # LogConfig.compression: (codec, level), None = producer

    def validate(
        self,
        records: Records,
        max_uncompressed_bytes: int,
        topic_partition: tuple[str, int],
        check_framing: bool = True,
    ) -> BatchHeader:
        return validate_produce_batch(
            records,
            message_max_bytes=self.message_max_bytes,
            api_version=self.api_version,
            timestamp_before_max_ms=self.timestamp_before_max_ms,
            timestamp_after_max_ms=self.timestamp_after_max_ms,
            max_uncompressed_bytes=max_uncompressed_bytes,
            topic_partition=topic_partition,
            compacted=self.compacted,
            check_framing=check_framing,
        )

    def rebuilds(self, records: Records) -> bool:
        """True when the topic's ``compression.type`` is a codec other than this batch's (read
        from its header), so the leader rebuilds it."""
        target = self.compression
        return (
            target is not None
            and records is not None
            and len(records) >= RECORD_BATCH_OVERHEAD
            and read_header(records).compression_type != target[0]
        )

    def check(
        self, records: Records, max_uncompressed_bytes: int, topic_partition: tuple[str, int]
    ) -> tuple[BatchHeader, bytes | memoryview]:
        """Validate the batch, then rebuild it with the topic's codec when it differs (see the
        module docstring): ``(header, batch to append)``.

        Raises:
            the errors of :func:`validate_produce_batch` and of
            :func:`~spark_kafkalite.protocol.recompression.rebuild_batch`;
            MessageTooLargeError: the rebuilt batch outgrows ``max.message.bytes``.
        """
        if not records:
            raise InvalidRecordError(_NO_BATCH)
        rebuild = self.rebuilds(records)
        header = self.validate(records, max_uncompressed_bytes, topic_partition, check_framing=not rebuild)
        if not rebuild:
            return header, records
        if self.compression is None:  # rebuilds() is true only with a compression to rebuild into
            raise RuntimeError(f"{topic_partition}: batch rebuild without a target compression")
        codec, level = self.compression
        rebuilt = rebuild_batch(records, header, codec, level, max_uncompressed_bytes=max_uncompressed_bytes)
        if len(rebuilt) > self.message_max_bytes:  # UnifiedLog.append: the size may have changed
            raise MessageTooLargeError(
                f"Message batch size is {len(rebuilt)} bytes after recompression, which exceeds the "
                f"maximum configured size of {self.message_max_bytes}"
            )
        return read_header(rebuilt), rebuilt


def _check_on_loop(
    records: Records, limits: _BatchLimits, topic_partition: tuple[str, int]
) -> tuple[BatchHeader, bytes | memoryview] | None:
    """Validate (and rebuild, see :meth:`_BatchLimits.check`) a small batch here; None when it is
    too large for the event loop (more than :data:`INLINE_BATCH_BYTES` on the wire or
    :data:`INLINE_UNCOMPRESSED_BYTES` decompressed; to rebuild, more than
    :data:`INLINE_RECOMPRESS_BYTES`, or a topic level slower than its codec's default).

    Raises:
        the errors of :meth:`_BatchLimits.check`.
    """
    if records is not None and len(records) > INLINE_BATCH_BYTES:
        return None
    inline = INLINE_UNCOMPRESSED_BYTES
    if records is not None and limits.rebuilds(records):
        if limits.compression is None:  # rebuilds() is true only with a compression to rebuild into
            raise RuntimeError("batch rebuild without a target compression")
        if len(records) > INLINE_RECOMPRESS_BYTES or not within_default_cost(*limits.compression):
            return None
        inline = INLINE_RECOMPRESS_BYTES
    bound = limits.max_uncompressed_bytes
    if bound <= inline:
        return limits.check(records, bound, topic_partition)
    try:
        return limits.check(records, inline, topic_partition)
    except MessageTooLargeError:
        return None  # over the loop's share (or over message.max.bytes): the worker decides


def _check_on_worker(
    batches: list[tuple[Records, _BatchLimits, tuple[str, int]]],
) -> list[tuple[BatchHeader, bytes | memoryview] | Exception]:
    """Worker-thread part: validate (and rebuild) each batch with its full limits (the codecs,
    CRC-32C and the compiled record rebuild release the GIL); each result is ``(header, batch to
    append)`` or the error the batch raised."""
    out: list[tuple[BatchHeader, bytes | memoryview] | Exception] = []
    for records, limits, topic_partition in batches:
        try:
            out.append(limits.check(records, limits.max_uncompressed_bytes, topic_partition))
        except Exception as exc:  # noqa: BLE001 - mapped to the partition's error code on the loop
            out.append(exc)
    return out


async def handle_produce(
    ctx: BrokerContext, rctx: RequestContext, request: ProduceRequest | FastProduceRequest
) -> ProduceResponseData | ProduceResponse | None:
    """Handle a ProduceRequest (v3-v9); returns the response entity, or None for acks=0.

    Each partition's batch is validated here (leadership, then ``validate_produce_batch`` with
    the topic's limits); the valid ones go to ``ReplicaManager.append_records``, which appends
    as leader and, for acks=-1, waits up to the request timeout for the ISR (DelayedProduce).

    Authorization (``KafkaApis.handleProduceRequest``): a transactional request needs WRITE on
    its transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition); each
    topic needs WRITE (else TOPIC_AUTHORIZATION_FAILED for its partitions, before any
    existence check). A transactional batch (KIP-98) in a request without a transactional id
    fails the whole request with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing appended
    (``hasTransactionalRecords`` with a null ``transactionalId``)."""
    version = rctx.api_version
    acks = request.acks
    denied: set[str] = set()
    if ctx.authorizer is not None:
        txn_id = request.transactional_id
        if txn_id is not None and not authorize(
            ctx, rctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id
        ):
            if acks == 0:
                raise CloseConnection("acks=0 produce request failed")
            return produce_error_response(request, version, ErrorCode.transactional_id_authorization_failed)
        names: list[str] = [t.name for t in request.topic_data]
        denied = set(names) - authorized_names(ctx, rctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    max_uncompressed_bytes = ctx.config["kafkalite.message.max.uncompressed.bytes"]
    # (topic, index) -> (error code, base offset, log start offset, message, log append time ms,
    # record errors)
    outcomes: dict[tuple[str, int], tuple[ErrorCode, int, int, str | None, int, tuple[RecordError, ...]]] = {}
    # Each partition's batch, checked in request order: (header, batch to append), the error,
    # or None while a worker thread checks it (too large for the event loop, see _check_on_loop).
    checked: list[
        tuple[tuple[str, int], Records, tuple[BatchHeader, bytes | memoryview] | Exception | None]
    ] = []
    deferred: list[tuple[int, Records, _BatchLimits, tuple[str, int]]] = []
    order: list[tuple[str, list[int]]] = []
    limits_by_config: dict[int, _BatchLimits] = {}  # the request's LogConfigs stay alive meanwhile
    for topic_data in request.topic_data:
        topic: str = topic_data.name
        indexes: list[int] = []
        for partition_data in topic_data.partition_data:
            index: int = partition_data.index
            indexes.append(index)
            key = (topic, index)
            if acks not in (0, 1, -1):
                outcomes[key] = (ErrorCode.invalid_required_acks, -1, -1, None, -1, ())
                continue
            if topic in denied:
                outcomes[key] = (ErrorCode.topic_authorization_failed, -1, -1, None, -1, ())
                continue
            records = partition_data.records
            state: tuple[BatchHeader, bytes | memoryview] | Exception | None
            try:
                _registration, log = ctx.leader_log(topic, index)
                log_config = log.config
                limits = limits_by_config.get(id(log_config))
                if limits is None:  # once per topic config, not per partition
                    limits = limits_by_config[id(log_config)] = _BatchLimits(
                        log_config.max_message_bytes,
                        version,
                        # LogAppendTime: the producer's timestamps are replaced, not checked
                        LONG_MAX
                        if log_config.log_append_time
                        else log_config.message_timestamp_before_max_ms,
                        LONG_MAX if log_config.log_append_time else log_config.message_timestamp_after_max_ms,
                        max_uncompressed_bytes,
                        log_config.compact,
                        log_config.compression,
                    )
                state = _check_on_loop(records, limits, key)
                if state is None:
                    deferred.append((len(checked), records, limits, key))
            except Exception as exc:  # noqa: BLE001 - mapped to a wire error code below
                state = exc
            checked.append((key, records, state))
        order.append((topic, indexes))
    ticket: AppendTicket | None = None
    if deferred:
        # This request's place in each partition's append order is taken now, on arrival, as
        # the synchronous path below would append now: later requests cannot overtake it.
        ticket = ctx.replica_manager.append_order.reserve(
            key for key, _records, state in checked if not isinstance(state, Exception)
        )
        try:
            states = await asyncio.get_running_loop().run_in_executor(
                ctx.request_workers,
                _check_on_worker,
                [(records, limits, tp) for _i, records, limits, tp in deferred],
            )
        except BaseException:
            ticket.release()
            raise
        for (position, _records, _limits, _tp), state in zip(deferred, states, strict=True):
            key, batch_records, _none = checked[position]
            checked[position] = (key, batch_records, state)
    try:
        # views into the request frame (never copied; the log writes a patched copy of the header)
        entries: dict[tuple[str, int], memoryview] = {}
        transactional_without_id = False
        for key, _records, state in checked:
            topic, index = key
            try:
                if isinstance(state, Exception):
                    raise state
                if state is None:  # deferred checks were all answered by the worker above
                    raise RuntimeError(f"{topic}-{index}: the batch check was deferred and never done")
                header, batch = state  # batch: the request's bytes, or the rebuilt batch
                if header.is_transactional and request.transactional_id is None:
                    transactional_without_id = True
                if key in entries:
                    raise InvalidRecordError(f"Duplicate partition {topic}-{index} in the produce request")
                entries[key] = memoryview(batch)
            except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
                code = error_code_for(exc, f"Produce v{version} to {topic}-{index} from {rctx.connection_id}")
                if isinstance(exc, KafkaError):
                    logger.debug("produce to %s-%d failed: %s", topic, index, exc)
                record_errors = exc.record_errors if isinstance(exc, KafkaError) else ()
                outcomes[key] = (code, -1, -1, error_message_for(exc), -1, record_errors)
        if transactional_without_id:
            if acks == 0:
                raise CloseConnection("acks=0 produce request failed")
            return produce_error_response(request, version, ErrorCode.transactional_id_authorization_failed)
        if entries:
            timeout_ms = (
                request.timeout  # decoded by hand: in ms
                if isinstance(request, FastProduceRequest)
                else int(request.timeout.total_seconds() * 1000)
            )
            results = await ctx.replica_manager.append_records(
                entries, acks, timeout_ms, ticket=ticket, on_park=rctx.park
            )
            for key, result in results.items():
                outcomes[key] = (
                    result.error_code,
                    result.base_offset if result.error_code == ErrorCode.none else -1,
                    result.log_start_offset,
                    result.error_message,
                    result.log_append_time_ms,
                    result.record_errors,
                )
    finally:
        if ticket is not None:
            ticket.release()  # (a no-op after append_records released it)
    failed = any(outcome[0] != ErrorCode.none for outcome in outcomes.values())
    if failed:  # FailedProduceRequestsPerSec, per failed partition
        stats = ctx.replica_manager.broker_topic_stats
        for (topic, _index), outcome in outcomes.items():
            if outcome[0] != ErrorCode.none:
                stats.record_failure(topic, FAILED_PRODUCE)
    if acks == 0:
        if failed:
            # Kafka closes the connection so that an acks=0 producer notices the failure.
            raise CloseConnection("acks=0 produce request failed")
        return None
    topics_out = []
    for topic, indexes in order:
        partitions_out = []
        for index in indexes:
            code, base_offset, log_start_offset, message, append_time, record_errors = outcomes[
                (topic, index)
            ]
            partitions_out.append(
                ProducePartitionResult(
                    index,
                    code,
                    base_offset,
                    log_start_offset,
                    message if code != ErrorCode.none else None,
                    record_errors,
                    append_time if code == ErrorCode.none else -1,
                )
            )
        topics_out.append(ProduceTopicResult(topic, tuple(partitions_out)))
    return ProduceResponseData(version, tuple(topics_out))


def produce_answered(request: ProduceRequest | FastProduceRequest) -> bool:
    """False for acks=0: the producer reads no response, not even an error one."""
    return request.acks != 0


def produce_error_response(
    request: ProduceRequest | FastProduceRequest, version: int, code: ErrorCode
) -> ProduceResponse:
    """The same error for every partition of ``request`` (``ProduceRequest.getErrorResponse``)."""
    cls = response_class(ApiKey.PRODUCE, version)
    topic_cls = nested(cls, "TopicProduceResponse")
    partition_cls = nested(cls, "PartitionProduceResponse")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        responses=tuple(
            topic_cls(
                name=t.name,
                partition_responses=tuple(
                    build(
                        partition_cls,
                        index=p.index,
                        error_code=code,
                        base_offset=-1,
                        log_append_time=None,
                        log_start_offset=-1,
                        record_errors=(),
                    )
                    for p in t.partition_data
                ),
            )
            for t in request.topic_data
        ),
    )
