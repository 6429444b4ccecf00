"""Fetch (key 1), v4-v12, with KIP-227 fetch sessions.

* Sessions: ``broker/replication/fetch_session_cache.py`` (Kafka's ``FetchSession.scala``) turns
  the request into a sessionless, full (new session) or incremental context, or a top-level
  session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) with no partitions.
* Reads (``ReplicaManager.readFromLog``): consumers (replica_id < 0) read up to the high
  watermark, or with ``isolation_level`` 1 (read_committed, KIP-98) up to the last stable offset,
  and then get ``AbortedTransactions`` = the aborted transactions overlapping the range read
  (null for read_uncommitted); brokers (replica_id >= 0) read up to the log end. Every answer
  carries the partition's ``LastStableOffset``. Per partition at most ``partition_max_bytes``; in total at
  most min(``max_bytes``, ``fetch.max.bytes``) (followers: ``max_bytes``), except that the first
  partition with data always returns at least one whole batch (KIP-74).
* Replication (``ReplicaManager.read_for_fetch``): a follower's fetch offset is its log end offset
  for the leader (HW advance, ISR expansion); KIP-320 ``current_leader_epoch`` fences stale
  requests (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); with ``last_fetched_epoch`` (v12, KIP-595)
  a diverging log gets no records but ``DivergingEpoch`` and the response is sent at once.
* Fetch from the closest replica (KIP-392, ``broker/replication/replica_selector.py``): a
  consumer's Fetch v11+ carries its rack (``rack_id``); it may read a partition this broker
  follows (up to this replica's HW / LSO), and as leader with ``replica.selector.class`` set the
  broker may answer a partition with no records and ``preferred_read_replica``.
* Large reads: a partition read of more than ``DEFER_READ_ABOVE_BYTES`` takes its batch bounds
  from the headers on the event loop and its bytes from the file on the request workers
  (``num.io.threads``), so a 100 MB fetch does not hold the loop for a 100 MB ``pread``.
* A consumer's Fetch below v10 of a partition whose topic has ``compression.type=zstd`` answers
  UNSUPPORTED_COMPRESSION_TYPE without records (``KafkaApis.handleFetchRequest``: zstd needs
  Fetch v10, KIP-110); followers are never refused.
* Long poll (``DelayedFetch``): if fewer than ``min_bytes`` bytes are available and no partition
  has an error, the request parks in the fetch purgatory until an append wakes it and enough data
  is there, or until ``max_wait_ms``; then it answers with what is available. A sessionless or
  full fetch that expires without any notification for its partitions (every change to a log,
  high watermark, log start offset or leadership notifies) answers with the read it parked on
  instead of reading again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kio.schema.fetch.v4.request import FetchRequest as FetchRequestV4
from kio.schema.fetch.v5.request import FetchRequest as FetchRequestV5
from kio.schema.fetch.v6.request import FetchRequest as FetchRequestV6
from kio.schema.fetch.v7.request import FetchRequest as FetchRequestV7
from kio.schema.fetch.v8.request import FetchRequest as FetchRequestV8
from kio.schema.fetch.v9.request import FetchRequest as FetchRequestV9
from kio.schema.fetch.v10.request import FetchRequest as FetchRequestV10
from kio.schema.fetch.v11.request import FetchRequest as FetchRequestV11
from kio.schema.fetch.v12.request import FetchRequest as FetchRequestV12Entity

from broker.apis.auth_helper import authorize_cluster, authorized_names
from broker.apis.context import BrokerContext
from broker.errors import error_code_for
from broker.log.file_slices import DeferredRecords
from broker.metrics.meters import record_fetch
from broker.network.request_context import RequestContext
from broker.replication.fetch_context import IncrementalFetchContext
from broker.replication.fetch_session import FetchRequestParams
from broker.replication.fetch_session_cache import fetch_session_cache_for
from spark_kafkalite.protocol.acl import AclOperation, ResourceType
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    TopicAuthorizationFailedError,
    UnsupportedCompressionTypeError,
)
from spark_kafkalite.protocol.fetch_response_encode import (
    NO_DIVERGING_EPOCH,
    EpochEndOffset,
    FetchPartitionResult,
    FetchResponseData,
    FetchTopicResult,
)
from spark_kafkalite.protocol.fetch_session import FINAL_EPOCH, INVALID_SESSION_ID
from spark_kafkalite.protocol.framing import decode_request_body
from spark_kafkalite.protocol.replica_fetch_codec import (
    FetchRequestV12,
    FetchTopic,
    ForgottenTopic,
    ReplicaFetchPartition,
    decode_fetch_request_v12_fast,
)

if TYPE_CHECKING:
    from broker.apis.kio_types import FetchRequest, FetchResponse
    from broker.cluster.partition import Partition

__all__ = ["FETCH_DECODERS", "FETCH_REQUEST_CLASSES", "handle_fetch", "fetch_error_response"]

_EMPTY = b""

#: a partition read of more bytes than this leaves them in the segment files until a worker
#: thread reads them (:func:`_load_deferred`); smaller reads stay inline on the event loop
#: (a thread hand-off costs more than a ``pread`` of that size from the page cache).
DEFER_READ_ABOVE_BYTES = 1 << 20


def _decode_fetch_v12(
    frame: bytes | bytearray | memoryview, offset: int
) -> FetchRequestV12 | FetchRequestV12Entity:
    """The hand-written decoder of what replica fetchers send (no kio entity per partition);
    any body it does not accept as plain and well-formed goes through the bounded scan + kio,
    which raises the same errors as for every other API (issue #14)."""
    request = decode_fetch_request_v12_fast(frame, offset)
    if request is None:
        entity: FetchRequestV12Entity = decode_request_body(ApiKey.FETCH, 12, frame, offset)
        return entity
    return request


FETCH_REQUEST_CLASSES = (
    FetchRequestV4,
    FetchRequestV5,
    FetchRequestV6,
    FetchRequestV7,
    FetchRequestV8,
    FetchRequestV9,
    FetchRequestV10,
    FetchRequestV11,
    FetchRequestV12Entity,
    FetchRequestV12,
)
"""Every class a decoded FetchRequest has (kio's v4-v12, the replica fetchers' v12 decoded by hand)."""

FETCH_DECODERS: dict[int, Callable[[bytes | bytearray, int], FetchRequestV12 | FetchRequestV12Entity]] = {
    12: _decode_fetch_v12
}
"""FetchRequest body decoders for ``ApiSpec.decoders`` (v12: the replica fetchers' version)."""


def _fetch_params(request: FetchRequest | FetchRequestV12) -> FetchRequestParams:
    """``request`` with the v12 fields the broker reads (:class:`FetchRequestParams`): v12 as
    is; an older version with Kafka's defaults for the fields it lacks (``FetchRequestData``):
    no session before v7 (id 0, epoch -1: sessionless), ``current_leader_epoch`` -1 before v9,
    ``rack_id`` "" before v11, ``log_start_offset`` -1 before v5, ``last_fetched_epoch`` -1
    before v12. Costs one small object per partition of an older request."""
    if isinstance(request, FetchRequestV12 | FetchRequestV12Entity):
        return request
    if isinstance(request, FetchRequestV9 | FetchRequestV10 | FetchRequestV11):
        topics = tuple(
            FetchTopic(
                t.topic,
                tuple(
                    ReplicaFetchPartition(
                        p.partition,
                        p.current_leader_epoch,
                        p.fetch_offset,
                        -1,
                        p.log_start_offset,
                        p.partition_max_bytes,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    elif isinstance(request, FetchRequestV5 | FetchRequestV6 | FetchRequestV7 | FetchRequestV8):
        topics = tuple(
            FetchTopic(
                t.topic,
                tuple(
                    ReplicaFetchPartition(
                        p.partition, -1, p.fetch_offset, -1, p.log_start_offset, p.partition_max_bytes
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    else:  # v4
        topics = tuple(
            FetchTopic(
                t.topic,
                tuple(
                    ReplicaFetchPartition(p.partition, -1, p.fetch_offset, -1, -1, p.partition_max_bytes)
                    for p in t.partitions
                ),
            )
            for t in request.topics
        )
    session_id, session_epoch = INVALID_SESSION_ID, FINAL_EPOCH
    forgotten: tuple[ForgottenTopic, ...] = ()
    if isinstance(
        request, FetchRequestV7 | FetchRequestV8 | FetchRequestV9 | FetchRequestV10 | FetchRequestV11
    ):
        session_id, session_epoch = request.session_id, request.session_epoch
        forgotten = tuple(ForgottenTopic(t.topic, tuple(t.partitions)) for t in request.forgotten_topics_data)
    return FetchRequestV12(
        request.replica_id,
        request.max_wait,
        request.min_bytes,
        request.max_bytes,
        request.isolation_level,
        session_id,
        session_epoch,
        topics,
        forgotten,
        request.rack_id if isinstance(request, FetchRequestV11) else "",
    )


def _read_all(
    ctx: BrokerContext,
    rctx: RequestContext,
    request: FetchRequestParams,
    denied: set[str],
    pending: set[tuple[str, int]],
) -> tuple[list[FetchTopicResult], int, bool]:
    """One pass over the requested partitions: (topic responses, bytes read, any error);
    partitions of ``denied`` topics answer TOPIC_AUTHORIZATION_FAILED without a read. Adds to
    ``pending`` each partition with more to give than it returned (``LogReadResult.pending``)."""
    replica_id = request.replica_id
    is_consumer = replica_id < 0
    before_zstd = is_consumer and rctx.api_version < 10  # KIP-110: zstd batches need Fetch v10
    read_committed = is_consumer and request.isolation_level == 1
    # KIP-392 client metadata: a consumer's Fetch v11+ may read a follower and be redirected
    client_rack = request.rack_id if is_consumer and rctx.api_version >= 11 else None
    replica_manager = ctx.replica_manager
    limit_bytes = max(request.max_bytes, 0)
    if is_consumer:  # followers are bounded by their replica.fetch.response.max.bytes only
        limit_bytes = min(limit_bytes, ctx.config.fetch_max_bytes)
    min_one_message = True
    total = 0
    any_error = False
    topics_out = []
    for fetch_topic in request.topics:
        topic = fetch_topic.topic
        partitions_out = []
        for fp in fetch_topic.partitions:
            index = fp.partition
            records: bytes | memoryview | DeferredRecords = _EMPTY
            high_watermark = last_stable = log_start = -1
            diverging = None
            preferred = -1
            aborted: tuple[Any, ...] | None = () if read_committed else None
            try:
                if topic in denied:
                    raise TopicAuthorizationFailedError(f"Not authorized to read topic {topic}")
                partition_limit = min(max(fp.partition_max_bytes, 0), limit_bytes)
                # Leader checks, KIP-320 epoch fencing, KIP-595 diverging epoch, follower
                # fetch state -> HW / ISR (ReplicaManager.readFromLog).
                result = replica_manager.read_for_fetch(
                    topic,
                    index,
                    fp.fetch_offset,
                    partition_limit,
                    replica_id=replica_id,
                    current_leader_epoch=fp.current_leader_epoch,
                    last_fetched_epoch=fp.last_fetched_epoch,
                    log_start_offset=fp.log_start_offset,
                    min_one_message=min_one_message,
                    isolation_level=1 if read_committed else 0,
                    defer_above=DEFER_READ_ABOVE_BYTES,
                    client_rack=client_rack,
                )
                if before_zstd and _zstd_topic(replica_manager.partition(topic, index)):
                    raise UnsupportedCompressionTypeError(
                        f"Fetch v{rctx.api_version} cannot read {topic}-{index}: its topic is zstd-compressed "
                        "(compression.type=zstd needs Fetch v10 or later)"
                    )
                preferred = result.preferred_read_replica
                if preferred >= 0:
                    any_error = True  # answered at once, as on divergence (ReplicaManager.fetchMessages)
                high_watermark = result.high_watermark
                last_stable = result.last_stable_offset
                log_start = result.log_start_offset
                records = result.info.records
                if result.info.aborted_transactions:
                    aborted = tuple(result.info.aborted_transactions)  # producer_id, first_offset
                if result.pending:
                    pending.add((topic, index))
                diverging = result.diverging_epoch
                if diverging is not None:
                    any_error = True  # answered at once (DelayedFetch completes on divergence)
                code = ErrorCode.none
            except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
                code = error_code_for(
                    exc, f"Fetch v{rctx.api_version} of {topic}-{index} from {rctx.connection_id}"
                )
                any_error = True
                if code == ErrorCode.offset_out_of_range:
                    # Kafka's handleOffsetOutOfRangeError: the leader's offsets help the fetcher reset.
                    led = replica_manager.partition(topic, index)
                    if led is not None and led.is_leader:
                        high_watermark = led.high_watermark
                        last_stable = led.log.last_stable_offset
                        log_start = led.log.log_start_offset
            size = len(records)
            if size:
                min_one_message = False
                limit_bytes = max(0, limit_bytes - size)
                total += size
            partitions_out.append(
                FetchPartitionResult(
                    index,
                    code,
                    high_watermark,
                    last_stable,
                    log_start,
                    aborted,
                    records,
                    NO_DIVERGING_EPOCH if diverging is None else EpochEndOffset(*diverging),
                    preferred,
                )
            )
        topics_out.append(FetchTopicResult(topic, tuple(partitions_out)))
    return topics_out, total, any_error


def _zstd_topic(partition: Partition | None) -> bool:
    """True when the partition's topic has ``compression.type=zstd``."""
    return partition is not None and partition.log.config.compression_type == "zstd"


async def _load_deferred(ctx: BrokerContext, topics_out: list[FetchTopicResult]) -> None:
    """Read every :class:`~broker.log.file_slices.DeferredRecords` of ``topics_out`` into bytes
    on the request worker pool (``num.io.threads``), all concurrently, in place: a 100 MB fetch
    holds the event loop for its batch headers only (Kafka's network threads send
    ``FileRecords`` from the files; its request threads never copy them either)."""
    deferred = [
        pd for topic in topics_out for pd in topic.partitions if isinstance(pd.records, DeferredRecords)
    ]
    if not deferred:
        return
    loop = asyncio.get_running_loop()
    loaded = await asyncio.gather(
        *(loop.run_in_executor(ctx.request_workers, pd.records.load) for pd in deferred)
    )
    for pd, data in zip(deferred, loaded, strict=True):
        pd.records = data


async def handle_fetch(
    ctx: BrokerContext, rctx: RequestContext, request: FetchRequest | FetchRequestV12
) -> FetchResponseData:
    """Handle a FetchRequest (kio's entity, or the replica fetchers' v12 decoded by hand); may
    wait up to ``max_wait`` in the fetch purgatory. The answer is a :class:`FetchResponseData`
    (no kio entity per partition)."""
    version = rctx.api_version
    # KIP-227 (broker/replication/fetch_session_cache.py): an incremental fetch reads the
    # partitions of its session that are marked (named, changed or pending; request_view) and
    # answers only the changed ones; while parked it is woken by a change to any of them.
    session_context = fetch_session_cache_for(ctx).new_context(rctx.api_version, _fetch_params(request))
    if session_context.error_code != ErrorCode.none:
        return FetchResponseData(version, session_context.error_code, 0, ())
    max_wait_s = max(0.0, request.max_wait.total_seconds())
    deadline = time.monotonic() + max_wait_s
    while True:
        view = session_context.request_view
        denied = _denied_topics(ctx, rctx, view)
        keys = [(t.topic, p.partition) for t in view.topics if t.topic not in denied for p in t.partitions]
        pending: set[tuple[str, int]] = set()
        topics_out, total, any_error = _read_all(ctx, rctx, view, denied, pending)
        remaining = deadline - time.monotonic()
        if any_error or total >= request.min_bytes or remaining <= 0:
            break
        if not keys and not isinstance(session_context, IncrementalFetchContext):
            break
        rctx.park()  # no longer counts against queued.max.requests; remote time starts
        if not await session_context.wait(ctx.fetch_purgatory, keys, remaining):
            break  # expired with no change to any partition read: that read is the answer
        session_context.refresh_view()
    await _load_deferred(ctx, topics_out)
    error_code, response_session_id, topics_out = session_context.update_and_generate_response(
        topics_out, pending
    )
    if request.replica_id < 0:  # BytesOutPerSec counts consumers only (BrokerTopicStats.updateBytesOut)
        record_fetch(ctx.replica_manager.broker_topic_stats, topics_out)
    return FetchResponseData(version, error_code, response_session_id, tuple(topics_out))


def _denied_topics(ctx: BrokerContext, rctx: RequestContext, request: FetchRequestParams) -> set[str]:
    """Topics whose partitions answer TOPIC_AUTHORIZATION_FAILED (``KafkaApis.handleFetchRequest``):
    a follower (replica_id >= 0) needs CLUSTER_ACTION on the cluster for all of them, a consumer
    READ on each topic. Unauthorized partitions do not hold the long poll."""
    if ctx.authorizer is None:
        return set()
    names = {t.topic for t in request.topics}
    if request.replica_id >= 0:
        return set() if authorize_cluster(ctx, rctx, AclOperation.CLUSTER_ACTION) else names
    return names - authorized_names(ctx, rctx, AclOperation.READ, ResourceType.TOPIC, names)


def fetch_error_response(
    request: FetchRequest | FetchRequestV12, version: int, code: ErrorCode
) -> FetchResponse:
    """``FetchRequest.getErrorResponse``: the error for every requested partition (and at top
    level from v7)."""
    cls = response_class(ApiKey.FETCH, version)
    topic_cls = nested(cls, "FetchableTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=code,
        session_id=0,
        responses=tuple(
            topic_cls(
                topic=t.topic,
                partitions=tuple(
                    build(
                        partition_cls,
                        partition_index=p.partition,
                        error_code=code,
                        high_watermark=-1,
                        last_stable_offset=-1,
                        log_start_offset=-1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=_EMPTY,
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )
