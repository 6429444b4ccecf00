"""Produce (key 0): validate one RecordBatch v2 per partition and append it as leader.

Validation follows Kafka's ``ProduceRequest.validateRecords`` and ``LogValidator`` at batch
granularity (records stay opaque bytes): exactly one batch (``INVALID_RECORD``), size <=
the topic's ``max.message.bytes`` (``MESSAGE_TOO_LARGE``), CRC-32C / truncation (``CORRUPT_MESSAGE``),
magic and counts (``INVALID_RECORD``), base offset 0, no control batches, zstd only from v7
(``UNSUPPORTED_COMPRESSION_TYPE``), timestamps within the topic's ``message.timestamp.*.max.ms``
(``INVALID_TIMESTAMP``). Per-topic values come from the partition log's ``LogConfig`` (topic
override, else the broker default). Produce does not auto-create topics.

Storage faults (Kafka's ``LogDirFailureChannel``): an ``OSError`` while appending (ENOSPC, EFBIG,
EACCES, EROFS, EIO, ...) marks the partition's log dir offline and answers
``KAFKA_STORAGE_ERROR``; later produces to any log in that dir get ``KAFKA_STORAGE_ERROR`` without
touching the disk, while fetches keep serving what is already stored.

acks: 0 (no response; a failed append closes the connection, as Kafka does), 1 and -1 (on one
node the high watermark moves to the log end right after the append, so acks=all completes at
once unless the ISR is below ``min.insync.replicas`` -> ``NOT_ENOUGH_REPLICAS``). Any other value
-> ``INVALID_REQUIRED_ACKS`` for every partition.
"""

from __future__ import annotations

import errno
import logging
import time
from typing import TYPE_CHECKING, Any

from broker.apis.context import BrokerContext
from broker.apis.entities import ZERO_DURATION, build, nested
from broker.apis.errors import error_code_for, error_message_for
from broker.config import LONG_MAX
from broker.network.request_context import CloseConnection, RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    KafkaStorageError,
    MessageTooLargeError,
    NotEnoughReplicasError,
    UnsupportedCompressionTypeError,
)
from spark_kafkalite.protocol.record_batch import (
    COMPRESSION_ZSTD,
    BatchHeader,
    read_header,
    validate_batch,
    validate_record_framing,
)

if TYPE_CHECKING:
    from broker.log.log_results import LogAppendInfo
    from broker.log.unified_log import UnifiedLog

__all__ = ["handle_produce", "produce_error_response", "validate_produce_batch"]

logger = logging.getLogger(__name__)


def validate_produce_batch(
    records: bytes | None,
    *,
    message_max_bytes: int,
    api_version: int,
    timestamp_before_max_ms: int = LONG_MAX,
    timestamp_after_max_ms: int = LONG_MAX,
) -> BatchHeader:
    """Check that ``records`` is exactly one valid client RecordBatch v2.

    Raises:
        InvalidRecordError, MessageTooLargeError, CorruptRecordError,
        UnsupportedCompressionTypeError, InvalidTimestampError.
    """
    if not records:
        raise InvalidRecordError("Produce requests must have exactly one record batch, got none")
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
    validate_record_framing(records, header)
    if timestamp_before_max_ms != LONG_MAX or timestamp_after_max_ms != LONG_MAX:
        now_ms = int(time.time() * 1000)
        if header.timestamp_type == 0 and (
            header.base_timestamp < now_ms - timestamp_before_max_ms
            or header.max_timestamp > now_ms + timestamp_after_max_ms
        ):
            raise InvalidTimestampError(
                f"Timestamps [{header.base_timestamp}, {header.max_timestamp}] are out of range "
                f"(log.message.timestamp.before/after.max.ms around {now_ms})"
            )
    return header


async def handle_produce(ctx: BrokerContext, rctx: RequestContext, request: Any) -> Any:
    """Handle a ProduceRequest (v3-v9); returns the response entity, or None for acks=0."""
    version = rctx.api_version
    cls = response_class(ApiKey.PRODUCE, version)
    topic_cls = nested(cls, "TopicProduceResponse")
    partition_cls = nested(cls, "PartitionProduceResponse")
    acks = request.acks
    failed = False
    topics_out = []
    for topic_data in request.topic_data:
        topic = topic_data.name
        partitions_out = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            base_offset = -1
            log_start_offset = -1
            message: str | None = None
            if acks not in (0, 1, -1):
                code = ErrorCode.invalid_required_acks
            else:
                try:
                    registration, log = ctx.leader_log(topic, index)
                    log_config = log.config
                    records = partition_data.records
                    validate_produce_batch(
                        records,
                        message_max_bytes=log_config.max_message_bytes,
                        api_version=version,
                        timestamp_before_max_ms=log_config.message_timestamp_before_max_ms,
                        timestamp_after_max_ms=log_config.message_timestamp_after_max_ms,
                    )
                    min_isr = log_config.min_insync_replicas
                    if acks == -1 and len(registration.isr) < min_isr:
                        raise NotEnoughReplicasError(
                            f"The size of the current ISR {list(registration.isr)} is insufficient to satisfy "
                            f"the min.isr requirement of {min_isr} for partition {topic}-{index}"
                        )
                    info = _append(ctx, topic, index, log, records, registration.leader_epoch)
                    log.update_high_watermark(log.log_end_offset)
                    ctx.fetch_purgatory.notify((topic, index))
                    base_offset = info.first_offset
                    log_start_offset = log.log_start_offset
                    code = ErrorCode.none
                except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
                    code = error_code_for(
                        exc, f"Produce v{version} to {topic}-{index} from {rctx.connection_id}"
                    )
                    message = error_message_for(exc)
                    if isinstance(exc, KafkaError):
                        logger.debug("produce to %s-%d failed: %s", topic, index, exc)
            if code != ErrorCode.none:
                failed = True
            partitions_out.append(
                build(
                    partition_cls,
                    index=index,
                    error_code=code,
                    base_offset=base_offset,
                    log_append_time=None,
                    log_start_offset=log_start_offset,
                    record_errors=(),
                    error_message=message,
                )
            )
        topics_out.append(topic_cls(name=topic, partition_responses=tuple(partitions_out)))
    if acks == 0:
        if failed:
            # Kafka closes the connection so that an acks=0 producer notices the failure.
            raise CloseConnection("acks=0 produce request failed")
        return None
    return build(cls, responses=tuple(topics_out), throttle_time=ZERO_DURATION)


def _append(
    ctx: BrokerContext, topic: str, partition: int, log: UnifiedLog, records: bytes, leader_epoch: int
) -> LogAppendInfo:
    """Append one validated batch as leader, turning disk faults into ``KafkaStorageError``.

    Raises:
        KafkaStorageError: the partition's log dir is offline, or the append failed with an
            ``OSError`` (which takes the log dir offline, Kafka's ``LogDirFailureChannel``).
    """
    manager = ctx.log_manager
    offline_dir = manager.offline_dir_of(topic, partition)
    if offline_dir is not None:
        raise KafkaStorageError(f"Log dir {offline_dir} of {topic}-{partition} is offline")
    try:
        return log.append_as_leader(bytearray(records), leader_epoch)
    except OSError as exc:
        log_dir = manager.mark_log_dir_offline(topic, partition, exc)
        raise KafkaStorageError(
            f"Error while appending records to {topic}-{partition} in dir {log_dir}: "
            f"{errno_name(exc)} {exc.strerror or exc}"
        ) from exc


def errno_name(exc: OSError) -> str:
    """``"ENOSPC"``-style name of ``exc.errno`` (``"OSError"`` when it has none)."""
    return errno.errorcode.get(exc.errno or 0, "OSError")


def produce_error_response(request: Any, version: int, code: ErrorCode) -> Any:
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
