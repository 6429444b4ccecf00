"""OffsetForLeaderEpoch (key 23), v2-v4 (``Partition.lastOffsetForLeaderEpoch``).

Answers (largest epoch <= the requested one, its end offset). On a single node every batch is
written in leader epoch 0, so: requested epoch 0..current -> (current epoch, log end offset);
a requested epoch above the current one or below 0 -> (-1, -1) (UNDEFINED_EPOCH /
UNDEFINED_EPOCH_OFFSET). ``current_leader_epoch`` is validated as in Fetch (KIP-320).
"""

from __future__ import annotations

from typing import Any

from broker.apis.context import BrokerContext
from broker.apis.entities import ZERO_DURATION, build, nested
from broker.apis.errors import error_code_for
from broker.network.request_context import RequestContext
from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["handle_offset_for_leader_epoch", "offset_for_leader_epoch_error_response"]


async def handle_offset_for_leader_epoch(ctx: BrokerContext, rctx: RequestContext, request: Any) -> Any:
    cls = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, rctx.api_version)
    topic_cls = nested(cls, "OffsetForLeaderTopicResult")
    partition_cls = nested(cls, "EpochEndOffset")
    topics_out = []
    for t in request.topics:
        partitions_out = []
        for p in t.partitions:
            epoch, end_offset = -1, -1
            try:
                registration, log = ctx.leader_log(t.topic, p.partition, p.current_leader_epoch)
                if 0 <= p.leader_epoch <= registration.leader_epoch:
                    epoch, end_offset = registration.leader_epoch, log.log_end_offset
                code = ErrorCode.none
            except Exception as exc:  # noqa: BLE001 - mapped to a wire error code
                code = error_code_for(exc, f"OffsetForLeaderEpoch of {t.topic}-{p.partition}")
            partitions_out.append(
                build(
                    partition_cls,
                    error_code=code,
                    partition=p.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics_out.append(topic_cls(topic=t.topic, partitions=tuple(partitions_out)))
    return build(cls, throttle_time=ZERO_DURATION, topics=tuple(topics_out))


def offset_for_leader_epoch_error_response(request: Any, version: int, code: ErrorCode) -> Any:
    cls = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    topic_cls = nested(cls, "OffsetForLeaderTopicResult")
    partition_cls = nested(cls, "EpochEndOffset")
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        topics=tuple(
            topic_cls(
                topic=t.topic,
                partitions=tuple(
                    build(
                        partition_cls, error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1
                    )
                    for p in t.partitions
                ),
            )
            for t in request.topics
        ),
    )
