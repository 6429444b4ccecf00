"""Shared group-membership state of the client (Java ``AbstractCoordinator.MemberState`` /
``Generation``) and the error classes the coordinator retries. Pure, no I/O."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from spark_kafkalite.client.errors import COORDINATOR_RETRY_ERRORS
from spark_kafkalite.protocol.errors import ErrorCode, KafkaConnectionError, KafkaError, KafkaTimeoutError

__all__ = [
    "MemberState",
    "Generation",
    "NO_GENERATION",
    "RETRIABLE_GROUP_ERRORS",
    "coordinator_node_id",
    "is_retriable_group_error",
    "SubscriptionType",
]
#: errors after which a join / lookup is simply retried (after the backoff unless noted)
RETRIABLE_GROUP_ERRORS = COORDINATOR_RETRY_ERRORS | {
    ErrorCode.rebalance_in_progress,
    ErrorCode.unknown_member_id,
    ErrorCode.illegal_generation,
    ErrorCode.member_id_required,
    ErrorCode.request_timed_out,
}


class MemberState(enum.Enum):
    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


@dataclass(frozen=True, slots=True)
class Generation:
    """The member's identity in one generation of the group."""

    generation_id: int
    member_id: str
    protocol_name: str | None


NO_GENERATION = Generation(-1, "", None)


def coordinator_node_id(broker_id: int) -> int:
    """The pseudo node id of the coordinator connection (Java: ``Integer.MAX_VALUE - id``)."""
    return 2**31 - 1 - int(broker_id)


def is_retriable_group_error(exc: BaseException) -> bool:
    if isinstance(exc, (KafkaConnectionError, KafkaTimeoutError)):
        return True
    return isinstance(exc, KafkaError) and (exc.error_code in RETRIABLE_GROUP_ERRORS or exc.retriable)


class SubscriptionType(enum.Enum):
    """How the consumer got its partitions (Java ``SubscriptionState.SubscriptionType``)."""

    NONE = "NONE"
    AUTO_TOPICS = "AUTO_TOPICS"
    AUTO_PATTERN = "AUTO_PATTERN"
    USER_ASSIGNED = "USER_ASSIGNED"
