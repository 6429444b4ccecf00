"""``FetchCollector``: hand out the records of buffered fetches (Java ``FetchCollector``).

``collect_fetch`` hands out up to ``max.poll.records`` records from the ``FetchBuffer``, decoding
one RecordBatch at a time (columnar ``decode_batch``), skipping records below the position (a
batch may start before it) and control batches, and discarding stale data whose fetch offset no
longer matches the position (after a seek). Under ``isolation.level=read_committed`` batches of
aborted transactions are skipped whole, as control batches are (``AbortedTransactions``, Java
``CompletedFetch``): the position moves past both. Partition errors are handled like Java's
``FetchCollector.handleInitializeErrors``: leader / topic errors refresh metadata,
OFFSET_OUT_OF_RANGE resets per ``auto.offset.reset`` or raises ``OffsetOutOfRangeError``.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable, Mapping
from itertools import repeat
from typing import Any

from spark_kafkalite.client.config import isolation_level_id
from spark_kafkalite.client.consumer.completed_fetch import CompletedFetch
from spark_kafkalite.client.consumer.fetch_buffer import FetchBuffer
from spark_kafkalite.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from spark_kafkalite.client.metadata import Metadata
from spark_kafkalite.client.network_client import now_ms
from spark_kafkalite.client.types import ConsumerRecord, TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    error_for_code,
    needs_metadata_refresh,
)
from spark_kafkalite.protocol.record_batch import decode_batch, iter_batch_headers

__all__ = ["FetchCollector", "fetch_limit"]

log = logging.getLogger(__name__)

_RETRY_ERRORS = {ErrorCode.unknown_server_error}


_new_tuple = tuple.__new__


def fetch_limit(isolation_level: int, high_watermark: int, last_stable_offset: int) -> int:
    """The offset a fetch can read up to: the high watermark, or under read_committed
    (``isolation_level`` 1, KIP-98) the Last Stable Offset when the broker reported one (>= 0)."""
    if isolation_level and last_stable_offset >= 0:
        return last_stable_offset
    return high_watermark


class FetchCollector:
    """Turns the ``FetchBuffer``'s completed fetches into records and moves the positions in
    ``subscriptions`` (Java ``FetchCollector``). Runs on the consumer's thread.

    Config: ``max.poll.records`` (500), ``max.partition.fetch.bytes`` (1 MiB, named in
    ``MessageTooLargeError``), ``check.crcs`` (true), ``isolation.level``,
    ``metadata.max.age.ms`` (how long a KIP-392 preferred read replica is used).
    """

    def __init__(
        self,
        metadata: Metadata,
        subscriptions: SubscriptionState,
        buffer: FetchBuffer,
        config: Mapping[str, Any],
    ) -> None:
        self._metadata = metadata
        self._subscriptions = subscriptions
        self._buffer = buffer
        self.max_poll_records = int(config["max.poll.records"])
        self._max_partition_bytes = int(config["max.partition.fetch.bytes"])
        self._check_crcs = bool(config["check.crcs"])
        self._isolation_level = isolation_level_id(config["isolation.level"])
        self._preferred_replica_ttl_ms = float(config.get("metadata.max.age.ms", 300000))

    def collect_fetch(self, max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` (default ``max.poll.records``) buffered records, in offset order
        per partition; advances positions.

        Raises:
            OffsetOutOfRangeError: out of range with ``auto.offset.reset=none`` (``.partitions``
                maps the partition to its position).
            KafkaError: another non-retriable partition error, or a corrupt batch.
        """
        out: dict[TopicPartition, list[ConsumerRecord]] = {}

        def take(cf: CompletedFetch, remaining: int) -> int:
            records = self._fetch_records(cf, remaining)
            if records:
                existing = out.get(cf.tp)
                if existing is None:
                    out[cf.tp] = records
                else:
                    existing.extend(records)
            return len(records)

        self._collect(max_records, take)
        return out

    def _finish_completed_fetch(self, cf: CompletedFetch, topic: str, partition: int, position: int) -> None:
        """Mark ``cf`` consumed at its end. Raises MessageTooLargeError when it held no complete
        batch below the high watermark: the next batch is larger than max.partition.fetch.bytes
        (Kafka's Fetcher/CompletedFetch RecordTooLargeException rule)."""
        cf.consumed = True
        if not cf.saw_batch and position < fetch_limit(
            self._isolation_level, cf.high_watermark, cf.last_stable_offset
        ):
            raise MessageTooLargeError(
                f"fetch for {topic}-{partition} at offset {position} returned no complete record "
                f"batch; a batch may be larger than max.partition.fetch.bytes={self._max_partition_bytes}"
            )

    def collect_columns(
        self, max_records: int | None = None, include_headers: bool = False
    ) -> dict[TopicPartition, dict[str, Any]]:
        """Like :meth:`collect_fetch`, but each partition's records come as Arrow arrays decoded
        straight from the RecordBatch bytes (``key``, ``value``, ``offset``, ``timestamp``,
        ``timestampType``, ``headers``; see :mod:`spark_kafkalite.protocol.record_columns`),
        without a Python object per record. Same errors."""
        from spark_kafkalite.protocol.record_columns import new_builder, to_arrow_arrays

        builders: dict[TopicPartition, Any] = {}

        def take(cf: CompletedFetch, remaining: int) -> int:
            builder = builders.get(cf.tp)
            if builder is None:
                builder = builders[cf.tp] = new_builder(include_headers)
            return self._fetch_columns(cf, remaining, builder)

        self._collect(max_records, take)
        return {tp: to_arrow_arrays(b.finish()) for tp, b in builders.items() if len(b)}

    def _collect(self, max_records: int | None, take: Callable[[CompletedFetch, int], int]) -> None:
        remaining = self.max_poll_records if max_records is None else max_records
        got = 0
        buffer = self._buffer
        while remaining > 0:
            cf = buffer.next_in_line
            if cf is None or cf.consumed:
                cf = buffer.peek()
                if cf is None:
                    break
                try:
                    usable = self._initialize(cf)
                except KafkaError:
                    if got:  # hand out what we have; raise on the next call
                        break
                    buffer.poll()
                    raise
                buffer.poll()
                if not usable:
                    continue
                buffer.next_in_line = cf
            try:
                n = take(cf, remaining)
            except KafkaError:
                if got:  # hand out what we have; the failing batch raises again on the next call
                    break
                raise
            got += n
            remaining -= n

    def _initialize(self, cf: CompletedFetch) -> bool:
        tp = cf.tp
        subs = self._subscriptions
        if not subs.is_assigned(tp):
            return False
        state = subs.state(tp)
        if (
            state.position is None
            or state.reset_strategy is not None
            or state.awaiting_validation
            or state.position != cf.fetch_offset
        ):
            log.debug(
                "discarding stale fetch response for %s at offset %s (position %s)",
                tp,
                cf.fetch_offset,
                state.position,
            )
            return False
        code = cf.error_code
        if code == ErrorCode.none:
            subs.update_fetch_metadata(tp, cf.high_watermark, cf.log_start_offset, cf.last_stable_offset)
            if cf.preferred_read_replica >= 0:  # KIP-392: read from there from now on
                log.debug("reading %s from its preferred read replica %s", tp, cf.preferred_read_replica)
                subs.update_preferred_read_replica(
                    tp, cf.preferred_read_replica, now_ms() + self._preferred_replica_ttl_ms
                )
            if not cf.records:
                return False
            cf.headers_iter = iter_batch_headers(cf.records)
            return True
        if needs_metadata_refresh(code):
            log.debug("fetch for %s: %s; refreshing metadata", tp, error_for_code(code))
            subs.clear_preferred_read_replica(tp)
            self._metadata.request_update()
            return False
        if code in _RETRY_ERRORS:
            log.warning(
                "fetch for %s at offset %s: %s; will retry", tp, cf.fetch_offset, error_for_code(code)
            )
            return False
        if code == ErrorCode.offset_out_of_range:
            cleared = subs.clear_preferred_read_replica(tp)
            if cleared is not None:  # a follower that is behind: ask the leader (Java FetchCollector)
                log.debug(
                    "fetch of %s at %s from replica %s is out of range there; back to the leader",
                    tp,
                    cf.fetch_offset,
                    cleared,
                )
                return False
            if subs.default_reset_strategy is OffsetResetStrategy.NONE:
                raise OffsetOutOfRangeError(
                    f"fetch position {cf.fetch_offset} is out of range for partition {tp.topic}-{tp.partition}",
                    partitions={tp: cf.fetch_offset},
                )
            log.info(
                "fetch position %s is out of range for %s-%s; resetting offset (%s)",
                cf.fetch_offset,
                tp.topic,
                tp.partition,
                subs.default_reset_strategy.name.lower(),
            )
            subs.request_offset_reset(tp)
            return False
        raise error_for_code(code, f"fetch for {tp.topic}-{tp.partition} at offset {cf.fetch_offset}")

    def _fetch_records(self, cf: CompletedFetch, max_records: int) -> list[ConsumerRecord]:
        tp = cf.tp
        subs = self._subscriptions
        if not subs.is_assigned(tp):
            cf.consumed = True
            return []
        state = subs.state(tp)
        if (
            state.position != cf.next_fetch_offset
            or state.reset_strategy is not None
            or state.paused
            or state.awaiting_validation
        ):
            cf.consumed = True  # sought, reset or paused since: drop the rest
            return []
        out: list[ConsumerRecord] = []
        position = cf.next_fetch_offset
        offset_epoch = state.offset_epoch
        topic, partition = tp
        records = cf.records
        if records is None or cf.headers_iter is None:  # set when the fetch was initialized
            raise RuntimeError(f"completed fetch of {tp.topic}-{tp.partition} read before it was initialized")
        while len(out) < max_records:
            batch = cf.batch
            if batch is None:
                item = cf.failed_header or cf.pending_item or next(cf.headers_iter, None)
                cf.failed_header = cf.pending_item = None
                if item is None:
                    self._finish_completed_fetch(cf, topic, partition, position)
                    break
                pos, header = item
                cf.saw_batch = True
                aborted = cf.aborted_transactions
                try:
                    if aborted is not None and aborted.is_aborted(records, pos, header):
                        position = max(position, header.next_offset)
                        continue
                    if header.next_offset <= position:
                        continue
                    if header.is_control:
                        position = header.next_offset
                        continue
                    batch = decode_batch(records, pos, verify_crc=self._check_crcs)
                except KafkaError:
                    # Like Java's Fetcher: keep the records decoded so far and the position after
                    # them; the failing batch stays next, so the next poll raises at its offset.
                    cf.failed_header = item
                    cf.next_fetch_offset = position
                    state.position = position
                    state.offset_epoch = offset_epoch
                    if out:
                        return out
                    raise
                offsets = batch.offsets
                cf.index = bisect_left(offsets, position) if offsets and offsets[0] < position else 0
                cf.batch = batch
                cf.batch_item = item
            offsets = batch.offsets
            start = cf.index
            end = min(len(offsets), start + max_records - len(out))
            if end > start:
                ttype = batch.header.timestamp_type
                if start == 0 and end == len(offsets):
                    cols = (offsets, batch.timestamps_ms, batch.keys, batch.values, batch.headers)
                else:
                    cols = (
                        offsets[start:end],
                        batch.timestamps_ms[start:end],
                        batch.keys[start:end],
                        batch.values[start:end],
                        batch.headers[start:end],
                    )
                out.extend(
                    map(
                        _new_tuple,
                        repeat(ConsumerRecord),
                        zip(
                            repeat(topic),
                            repeat(partition),
                            cols[0],
                            cols[1],
                            repeat(ttype),
                            cols[2],
                            cols[3],
                            cols[4],
                        ),
                    )
                )
                position = offsets[end - 1] + 1
                epoch = batch.header.partition_leader_epoch
                offset_epoch = epoch if epoch >= 0 else None
            cf.index = end
            if end >= len(offsets):
                position = max(position, batch.header.next_offset)
                cf.batch = None
        cf.next_fetch_offset = position
        state.position = position
        state.offset_epoch = offset_epoch
        return out

    def _fetch_columns(self, cf: CompletedFetch, max_records: int, builder: Any) -> int:
        """Append up to ``max_records`` records of ``cf`` from the position to ``builder``, one
        batch at a time (per batch, never per record); same position, control-batch and
        corrupt-batch rules as :meth:`_fetch_records`. Returns the number appended."""
        from spark_kafkalite.protocol.record_columns import append_batch

        tp = cf.tp
        subs = self._subscriptions
        if not subs.is_assigned(tp):
            cf.consumed = True
            return 0
        state = subs.state(tp)
        if (
            state.position != cf.next_fetch_offset
            or state.reset_strategy is not None
            or state.paused
            or state.awaiting_validation
        ):
            cf.consumed = True
            return 0
        position = cf.next_fetch_offset
        offset_epoch = state.offset_epoch
        records = cf.records
        if records is None or cf.headers_iter is None:  # set when the fetch was initialized
            raise RuntimeError(f"completed fetch of {tp.topic}-{tp.partition} read before it was initialized")
        appended = 0
        while appended < max_records:
            if cf.batch is not None:  # left part-way by collect_fetch: decode it again from the position
                item = cf.batch_item
                cf.batch = None
            else:
                item = cf.failed_header or cf.pending_item or next(cf.headers_iter, None)
                cf.failed_header = cf.pending_item = None
            if item is None:
                self._finish_completed_fetch(cf, tp.topic, tp.partition, position)
                break
            pos, header = item
            cf.saw_batch = True
            want = max_records - appended
            aborted = cf.aborted_transactions
            try:
                if aborted is not None and aborted.is_aborted(records, pos, header):
                    position = max(position, header.next_offset)
                    continue
                if header.next_offset <= position:
                    continue
                if header.is_control:
                    position = header.next_offset
                    continue
                n = append_batch(
                    builder,
                    records,
                    pos,
                    header,
                    verify_crc=self._check_crcs,
                    min_offset=position,
                    max_records=want,
                )
            except KafkaError:
                cf.failed_header = item
                cf.next_fetch_offset = position
                state.position = position
                state.offset_epoch = offset_epoch
                if appended:
                    return appended
                raise
            if n:
                appended += n
                position = builder.last_offset + 1
                epoch = header.partition_leader_epoch
                offset_epoch = epoch if epoch >= 0 else None
            if n == want and builder.last_offset < header.last_offset:
                cf.pending_item = item  # records of this batch are left for the next call
            else:
                position = max(position, header.next_offset)
        cf.next_fetch_offset = position
        state.position = position
        state.offset_epoch = offset_epoch
        return appended
