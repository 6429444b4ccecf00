"""Fetch (key 1), v4-v12, sessionless (KIP-227 "minimal compliant implementation").

* Sessions: every response has SessionId 0 (no session is ever created), so clients keep sending
  full requests; a request naming a session (id != 0) with epoch > 0 gets the top-level error
  ``FETCH_SESSION_ID_NOT_FOUND`` and an empty partition list.
* Reads (``ReplicaManager.readFromLog``): consumers (replica_id < 0) read up to the high
  watermark (read_committed: the last stable offset, equal to it without transactions); brokers
  (replica_id >= 0) up to the log end. Per partition at most ``partition_max_bytes``; in total at
  most min(``max_bytes``, ``fetch.max.bytes``), except that the first partition with data always
  returns at least one whole batch (KIP-74).
* Long poll (``DelayedFetch``): if fewer than ``min_bytes`` bytes are available and no partition
  has an error, the request parks in the fetch purgatory until an append wakes it and enough data
  is there, or until ``max_wait_ms``; then it answers with what is available.
"""

from __future__ import annotations

import time
from typing import Any

from broker.apis.context import BrokerContext
from broker.apis.entities import ZERO_DURATION, build, nested
from broker.apis.errors import error_code_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["handle_fetch", "fetch_error_response"]

_EMPTY = b""


def _read_all(
    ctx: BrokerContext, rctx: RequestContext, request: Any, cls: type[Any]
) -> tuple[list[Any], int, bool]:
    """One pass over the requested partitions: (topic responses, bytes read, any error)."""
    topic_cls = nested(cls, "FetchableTopicResponse")
    partition_cls = nested(cls, "PartitionData")
    is_consumer = request.replica_id < 0
    limit_bytes = min(max(request.max_bytes, 0), ctx.config.fetch_max_bytes)
    min_one_message = True
    total = 0
    any_error = False
    topics_out = []
    for fetch_topic in request.topics:
        topic = fetch_topic.topic
        partitions_out = []
        for fp in fetch_topic.partitions:
            index = fp.partition
            records = _EMPTY
            high_watermark = last_stable = log_start = -1
            try:
                _registration, log = ctx.leader_log(topic, index, getattr(fp, "current_leader_epoch", -1))
                high_watermark = log.high_watermark
                last_stable = high_watermark
                log_start = log.log_start_offset
                max_offset = high_watermark if is_consumer else None
                partition_limit = min(max(fp.partition_max_bytes, 0), limit_bytes)
                info = log.read(fp.fetch_offset, partition_limit, max_offset, min_one_message)
                records = info.records
                code = ErrorCode.none
            except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
                code = error_code_for(
                    exc, f"Fetch v{rctx.api_version} of {topic}-{index} from {rctx.connection_id}"
                )
                any_error = True
            size = len(records)
            if size:
                min_one_message = False
                limit_bytes = max(0, limit_bytes - size)
                total += size
            partitions_out.append(
                build(
                    partition_cls,
                    partition_index=index,
                    error_code=code,
                    high_watermark=high_watermark,
                    last_stable_offset=last_stable,
                    log_start_offset=log_start,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=records,
                )
            )
        topics_out.append(topic_cls(topic=topic, partitions=tuple(partitions_out)))
    return topics_out, total, any_error


async def handle_fetch(ctx: BrokerContext, rctx: RequestContext, request: Any) -> Any:
    """Handle a FetchRequest; may wait up to ``max_wait`` in the fetch purgatory."""
    cls = response_class(ApiKey.FETCH, rctx.api_version)
    session_id = getattr(request, "session_id", 0)
    session_epoch = getattr(request, "session_epoch", -1)
    if session_id != 0 and session_epoch > 0:
        return build(
            cls,
            throttle_time=ZERO_DURATION,
            error_code=ErrorCode.fetch_session_id_not_found,
            session_id=0,
            responses=(),
        )
    max_wait_s = max(0.0, request.max_wait.total_seconds())
    deadline = time.monotonic() + max_wait_s
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    while True:
        topics_out, total, any_error = _read_all(ctx, rctx, request, cls)
        remaining = deadline - time.monotonic()
        if any_error or not keys or total >= request.min_bytes or remaining <= 0:
            break
        await ctx.fetch_purgatory.wait(keys, remaining)
    return build(
        cls, throttle_time=ZERO_DURATION, error_code=ErrorCode.none, session_id=0, responses=tuple(topics_out)
    )


def fetch_error_response(request: Any, version: int, code: ErrorCode) -> Any:
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
