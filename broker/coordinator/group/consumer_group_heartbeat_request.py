"""ConsumerGroupHeartbeat as the coordinator sees it (KIP-848): the request and answer shapes,
the broker's consumer group config, and the request checks that need no group state (Kafka's
``throwIfConsumerGroupHeartbeatRequestIsInvalid``) or only the member
(``throwIfMemberEpochIsInvalid``)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass

from broker.coordinator.group.consumer_group import compile_regex
from broker.coordinator.group.consumer_group_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroupMember,
)
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = [
    "ConsumerGroupConfig",
    "HeartbeatRequest",
    "HeartbeatResult",
    "HeartbeatError",
    "Owned",
    "validate_heartbeat_request",
    "check_member_epoch",
]

E = ErrorCode
#: the partitions a heartbeat reports as owned: [(topic id, [partition, ...])]
Owned = list[tuple[uuid.UUID, list[int]]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """Broker keys: ``group.consumer.assignors`` (names, the first is the default) and
    ``group.consumer.max.size``."""

    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat's fields (None = unchanged since the last heartbeat), the
    client's id and host, and the group's session timeout and heartbeat interval (ms)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    owned: Owned | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    heartbeat_interval_ms: int


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """The answer: an error code (+ message) or the member's id, epoch, heartbeat interval and
    assignment (None = not sent)."""

    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


class HeartbeatError(Exception):
    """A heartbeat answered with ``code`` (an ErrorCode) and ``message``."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = int(code)


def validate_heartbeat_request(r: HeartbeatRequest, assignors: Collection[str]) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (v1: the client makes the
    member id)."""
    if r.instance_id == "":
        raise HeartbeatError(E.invalid_request, "InstanceId can't be empty.")
    if r.rack_id == "":
        raise HeartbeatError(E.invalid_request, "RackId can't be empty.")
    if not r.member_id:
        raise HeartbeatError(E.invalid_request, "MemberId can't be empty.")
    if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if r.rebalance_timeout_ms == -1:
            raise HeartbeatError(E.invalid_request, "RebalanceTimeoutMs must be provided in first request.")
        if r.owned is None or r.owned:
            raise HeartbeatError(E.invalid_request, "TopicPartitions must be empty when (re-)joining.")
        if not r.subscribed_topic_names and r.subscribed_topic_regex is None:
            raise HeartbeatError(
                E.invalid_request,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            )
    elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if r.instance_id is None:
            raise HeartbeatError(E.invalid_request, "InstanceId can't be null.")
    elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise HeartbeatError(E.invalid_request, "MemberEpoch is invalid.")
    if r.server_assignor is not None and r.server_assignor not in assignors:
        raise HeartbeatError(
            E.unsupported_assignor,
            f"ServerAssignor {r.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(assignors)}.",
        )
    if r.subscribed_topic_regex:
        try:
            compile_regex(r.subscribed_topic_regex)
        except re.error as exc:
            raise HeartbeatError(
                E.invalid_regular_expression,
                f"SubscribedTopicRegex {r.subscribed_topic_regex} is invalid: {exc}",
            ) from None


def check_member_epoch(member: ConsumerGroupMember, received: int, owned: Owned | None) -> None:
    """Kafka's ``throwIfMemberEpochIsInvalid``."""
    if received > member.member_epoch:
        raise HeartbeatError(
            E.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one known "
            f"by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if received < member.member_epoch:
        subset = owned is not None and all(
            p in member.assigned_partitions.get(t, frozenset()) for t, parts in owned for p in parts
        )
        if received != member.previous_member_epoch or not subset:
            raise HeartbeatError(
                E.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({received}) than the one known "
                f"by the group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
