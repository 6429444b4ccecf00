"""The response of the KIP-848 style group heartbeats: ConsumerGroupHeartbeat (KIP-848) and
ShareGroupHeartbeat (KIP-932) answer with the same fields (Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` / ``shareGroupHeartbeat`` build them alike):
an error code and message, the member's id and epoch, the heartbeat interval and the
assignment as topic ids with their partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from spark_kafkalite.protocol.api_keys import ApiKey, response_class
from spark_kafkalite.protocol.entities import ZERO_DURATION, build, nested
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["HeartbeatAnswer", "heartbeat_response"]


class HeartbeatAnswer(Protocol):
    """What a group coordinator answers a heartbeat with (``assignment`` None: not sent)."""

    @property
    def error(self) -> int: ...
    @property
    def message(self) -> str | None: ...
    @property
    def member_id(self) -> str | None: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def heartbeat_interval_ms(self) -> int: ...
    @property
    def assignment(self) -> Mapping[uuid.UUID, frozenset[int]] | None: ...


def heartbeat_response(api_key: ApiKey, version: int, result: HeartbeatAnswer) -> Any:
    """``api_key``'s response (CONSUMER_GROUP_HEARTBEAT or SHARE_GROUP_HEARTBEAT) of ``version``
    for ``result``; the assignment lists topics by id (sorted) and leaves out topics with no
    partition."""
    cls = response_class(api_key, version)
    assignment = None
    if result.assignment is not None:
        tp_cls = nested(cls, "TopicPartitions")
        assignment = nested(cls, "Assignment")(
            topic_partitions=tuple(
                tp_cls(topic_id=topic_id, partitions=tuple(sorted(parts)))
                for topic_id, parts in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
                if parts
            )
        )
    return build(
        cls,
        throttle_time=ZERO_DURATION,
        error_code=ErrorCode(result.error),
        error_message=result.message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=result.heartbeat_interval_ms,
        assignment=assignment,
    )
