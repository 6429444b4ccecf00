"""What ShareFetch and ShareAcknowledge share (KIP-932; Kafka's ``SharePartitionManager``
``fetchMessages`` / ``acknowledge``): acknowledgement batches applied to the share partitions,
and one share partition's log read + acquisition."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.apis.context import BrokerContext
from broker.controller.group_configs import GroupConfig
from broker.coordinator.share.service import ShareService
from broker.coordinator.share.share_partition import AcquiredBatch, SharePartition
from broker.coordinator.share.share_partition_manager import SharePartitionKey
from broker.errors import error_code_for
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.record_batch import iter_batch_headers

__all__ = ["PartitionOutcome", "apply_acknowledgements", "acquire_partition", "lock_timeout"]


@dataclass(slots=True)
class PartitionOutcome:
    """One partition's answer: fetch error, acknowledgement error, records and acquired ranges."""

    error_code: ErrorCode = ErrorCode.none
    error_message: str | None = None
    acknowledge_error_code: ErrorCode = ErrorCode.none
    records: bytes = b""
    acquired: list[AcquiredBatch] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


def lock_timeout(configs: GroupConfig) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=configs.share_record_lock_duration_ms)


def apply_acknowledgements(
    service: ShareService, group_id: str, member_id: str, key: SharePartitionKey, batches: Iterable[Any]
) -> ErrorCode:
    """Apply a partition's ``AcknowledgementBatches`` in order; the first error stops them
    (INVALID_RECORD_STATE when a record is not held by ``member_id``, INVALID_REQUEST for a
    malformed batch). A partition with no share state here answers INVALID_RECORD_STATE: its
    records were never acquired on this leader."""
    sp = service.partitions.get(key)
    if sp is None:
        return ErrorCode.invalid_record_state
    now = service.now_ms()
    code = ErrorCode.none
    for batch in batches:
        code = sp.acknowledge(
            member_id,
            int(batch.first_offset),
            int(batch.last_offset),
            [int(t) for t in batch.acknowledge_types],
            now,
        )
        if code != ErrorCode.none:
            break
    service.partitions.changed(key, sp)
    return code


def acquire_partition(
    ctx: BrokerContext,
    service: ShareService,
    configs: GroupConfig,
    key: SharePartitionKey,
    topic: str,
    member_id: str,
    max_bytes: int,
    max_records: int,
) -> tuple[PartitionOutcome, SharePartition | None]:
    """Read the partition from its share partition's next fetch offset (up to the high
    watermark, at most ``max_bytes`` but one whole batch at least) and acquire for ``member_id``
    up to ``max_records`` of the records read. Errors of the leader checks land in the outcome."""
    out = PartitionOutcome()
    try:
        partition = ctx.replica_manager.leader_partition(topic, key[2])
        out.leader_id, out.leader_epoch = ctx.node_id, partition.leader_epoch
        log = partition.log
        start = (
            log.log_start_offset
            if configs.share_auto_offset_reset == "earliest"
            else partition.high_watermark
        )
        sp = service.partitions.get_or_create(
            key,
            start,
            lock_duration_ms=configs.share_record_lock_duration_ms,
            delivery_count_limit=service.delivery_count_limit,
            max_in_flight=service.max_in_flight,
        )
        sp.move_start(log.log_start_offset)
        if max_records <= 0 or not sp.can_acquire():
            return out, sp
        offset = sp.next_fetch_offset(service.now_ms())
        if offset >= partition.high_watermark:
            return out, sp
        info = partition.read_records(offset, max_bytes, is_follower=False, min_one_message=True).info
        records = info.records
        last = -1
        for _pos, header in iter_batch_headers(records):  # type: ignore[arg-type]
            last = header.last_offset
        if last < 0:
            return out, sp
        out.acquired = sp.acquire(member_id, info.first_batch_offset, last, max_records, service.now_ms())
        if out.acquired:
            out.records = bytes(records)  # type: ignore[arg-type]
            service.partitions.changed(key, sp)
        return out, sp
    except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
        out.error_code = error_code_for(exc, f"ShareFetch of {topic}-{key[2]}")
        out.error_message = str(exc) or None
        return out, None
