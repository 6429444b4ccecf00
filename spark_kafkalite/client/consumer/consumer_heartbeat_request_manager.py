"""ConsumerGroupHeartbeat (API key 68, KIP-848) of a ``group.protocol=consumer`` member (Java
``org.apache.kafka.clients.consumer.internals.ConsumerHeartbeatRequestManager``).

Requests carry every field when the member joins (epoch 0) or after an error, and otherwise
only the fields that changed since the last one sent (Java
``ConsumerHeartbeatRequestManager.HeartbeatState``): the subscribed topic names or regex, the
server assignor and the owned partitions are sent as null when unchanged; the rack and
rebalance timeout only on a full request; the instance id of a static member in every request
(the coordinator tells a static leave, epoch -2, by it). One heartbeat is in flight at a time; the
next leaves after the interval the coordinator gave (``heartbeat_interval``), or at once when
the member joins, acknowledges a reconciliation or leaves.

Errors (Java ``onErrorResponse``): NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE -> coordinator
looked up again; COORDINATOR_LOAD_IN_PROGRESS and connection errors -> retried after
``retry.backoff.ms`` with a full request; FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID -> the member is
fenced (partitions lost, rejoin at epoch 0); anything else (GROUP_AUTHORIZATION_FAILED,
UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
GROUP_MAX_SIZE_REACHED, INVALID_REQUEST, UNSUPPORTED_VERSION ...) is fatal and raised from
``poll``; TOPIC_AUTHORIZATION_FAILED is raised from ``poll`` once and the member keeps
heartbeating.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spark_kafkalite.client.consumer.consumer_membership_manager import (
    ConsumerMembershipManager,
    MemberState,
    TopicIdAssignment,
)
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.requests import RequestBuilder
from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build as make
from spark_kafkalite.protocol.entities import nested
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError, error_for_code

__all__ = ["ConsumerHeartbeatRequestManager", "HeartbeatState", "HeartbeatFields", "HeartbeatResult"]

log = logging.getLogger(__name__)

_COORDINATOR_MOVED = frozenset((ErrorCode.not_coordinator, ErrorCode.coordinator_not_available))
_FENCED = frozenset((ErrorCode.fenced_member_epoch, ErrorCode.unknown_member_id))


@dataclass(frozen=True, slots=True)
class HeartbeatFields:
    """The optional fields of one heartbeat; None = not sent (unchanged since the last one)."""

    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: tuple[str, ...] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """A parsed ConsumerGroupHeartbeat response."""

    error: int
    message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: TopicIdAssignment | None


class HeartbeatState:
    """What the last heartbeat sent, to send only changes (Java ``HeartbeatState``).

    Args:
        rebalance_timeout_ms: ``max.poll.interval.ms``; rack_id: ``client.rack`` or None;
        server_assignor: ``group.remote.assignor`` or None (the broker's default)."""

    def __init__(self, rebalance_timeout_ms: int, rack_id: str | None, server_assignor: str | None) -> None:
        self._rebalance_timeout_ms = rebalance_timeout_ms
        self._rack_id = rack_id
        self._server_assignor = server_assignor
        self.reset()

    def reset(self) -> None:
        """Forget what was sent: the next heartbeat carries every field (after an error)."""
        self._sent_names: tuple[str, ...] | None = None
        self._sent_regex: str | None = None
        self._sent_partitions: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
        self._sent_assignor = False

    def build(
        self,
        membership: ConsumerMembershipManager,
        topic_names: tuple[str, ...] | None,
        topic_regex: str | None,
    ) -> HeartbeatFields:
        """The fields of the next heartbeat of ``membership`` subscribed to ``topic_names``
        (sorted) or ``topic_regex``; what it returns counts as sent."""
        full = membership.state is MemberState.JOINING
        if full:
            self.reset()
        names = None
        if topic_names is not None and (full or topic_names != self._sent_names):
            names = self._sent_names = topic_names
        regex = None
        if topic_regex is not None and (full or topic_regex != self._sent_regex):
            regex = self._sent_regex = topic_regex
        assignor = None
        if self._server_assignor is not None and (full or not self._sent_assignor):
            assignor, self._sent_assignor = self._server_assignor, True
        owned = tuple(
            (topic_id, tuple(sorted(parts)))
            for topic_id, parts in sorted(membership.current_assignment.items(), key=lambda kv: str(kv[0]))
        )
        partitions = None
        if full or owned != self._sent_partitions:
            partitions = self._sent_partitions = owned
        return HeartbeatFields(
            member_epoch=membership.member_epoch,
            instance_id=membership.group_instance_id,  # every request, as Java (the leave included)
            rack_id=self._rack_id if full else None,
            rebalance_timeout_ms=self._rebalance_timeout_ms if full else -1,
            subscribed_topic_names=names,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=partitions,
        )


def consumer_group_heartbeat_request(
    group_id: str, member_id: str, fields: HeartbeatFields
) -> RequestBuilder:
    """ConsumerGroupHeartbeat v0-1 (v1, KIP-1082: the member id is the client's)."""

    def build(version: int) -> Any:
        cls = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT, version)
        tp_cls = nested(cls, "TopicPartitions")
        partitions = None
        if fields.topic_partitions is not None:
            partitions = tuple(tp_cls(topic_id=t, partitions=parts) for t, parts in fields.topic_partitions)
        return make(
            cls,
            group_id=group_id,
            member_id=member_id,
            member_epoch=fields.member_epoch,
            instance_id=fields.instance_id,
            rack_id=fields.rack_id,
            rebalance_timeout=fields.rebalance_timeout_ms,
            subscribed_topic_names=fields.subscribed_topic_names,
            subscribed_topic_regex=fields.subscribed_topic_regex,
            server_assignor=fields.server_assignor,
            topic_partitions=partitions,
        )

    return RequestBuilder(ApiKey.CONSUMER_GROUP_HEARTBEAT, build)


def parse_consumer_group_heartbeat_response(response: Any) -> HeartbeatResult:
    """A ConsumerGroupHeartbeat response as a ``HeartbeatResult`` (assignment None = unchanged)."""
    assignment = None
    if response.assignment is not None:
        assignment = {
            tp.topic_id: frozenset(int(p) for p in tp.partitions)
            for tp in response.assignment.topic_partitions
            if tp.topic_id is not None
        }
    return HeartbeatResult(
        error=int(response.error_code),
        message=response.error_message,
        member_id=response.member_id,
        member_epoch=int(response.member_epoch),
        heartbeat_interval_ms=int(response.heartbeat_interval.total_seconds() * 1000),
        assignment=assignment,
    )


class ConsumerHeartbeatRequestManager:
    """Sends the member's heartbeats and applies their responses to the membership (see the
    module docstring). Application thread only.

    Args:
        group_id: ``group.id``; membership: the member's state machine; state: what was sent.
        send: sends a request to the coordinator (a failed future when none is known).
        mark_coordinator_unknown: forget the coordinator (looked up again by the caller).
        retry_backoff_ms: ``retry.backoff.ms``; clock: milliseconds.
    """

    def __init__(
        self,
        group_id: str,
        membership: ConsumerMembershipManager,
        state: HeartbeatState,
        send: Callable[[RequestBuilder], RequestFuture],
        mark_coordinator_unknown: Callable[[str], None],
        retry_backoff_ms: float,
        clock: Callable[[], float],
    ) -> None:
        self._group_id = group_id
        self._membership = membership
        self.state = state
        self._send = send
        self._mark_coordinator_unknown = mark_coordinator_unknown
        self._retry_backoff_ms = retry_backoff_ms
        self._clock = clock
        self._in_flight: RequestFuture | None = None
        self._next_heartbeat_ms = 0.0
        self._backoff_until_ms = 0.0
        self.fatal_error: KafkaError | None = None
        self.error_to_raise: KafkaError | None = None

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    def time_to_next_heartbeat_ms(self, now: float) -> float:
        """0 when a heartbeat is due now; while one is in flight, the retry backoff."""
        if self._in_flight is not None:
            return self._retry_backoff_ms
        if now < self._backoff_until_ms:
            return self._backoff_until_ms - now
        if self._membership.send_heartbeat_now():
            return 0.0
        return max(0.0, self._next_heartbeat_ms - now)

    def maybe_send(
        self, topic_names: tuple[str, ...] | None, topic_regex: str | None
    ) -> RequestFuture | None:
        """Send the next heartbeat if one is due (and none in flight); returns its future."""
        leaving = self._membership.state is MemberState.LEAVING
        if not self._membership.in_group() or (self._in_flight is not None and not leaving):
            return None
        now = self._clock()
        if now < self._backoff_until_ms and not leaving:
            return None
        if not self._membership.send_heartbeat_now() and now < self._next_heartbeat_ms:
            return None
        fields = self.state.build(self._membership, topic_names, topic_regex)
        future = self._send(
            consumer_group_heartbeat_request(self._group_id, self._membership.member_id, fields)
        )
        self._membership.on_heartbeat_sent()
        interval = self._membership.heartbeat_interval_ms or self._retry_backoff_ms
        self._next_heartbeat_ms = now + interval
        if leaving:  # Java does not wait for the answer to a leave heartbeat either
            return future
        self._in_flight = future
        future.add_callback(self._on_response)
        return future

    def _on_response(self, future: RequestFuture) -> None:
        self._in_flight = None
        if future.failed():
            log.debug("group %s: heartbeat failed: %s", self._group_id, future.exception)
            self._retry_full(str(future.exception))
            return
        result = parse_consumer_group_heartbeat_response(future.value)
        code = result.error
        if code == ErrorCode.none:
            self._membership.on_heartbeat_success(
                result.member_id, result.member_epoch, result.heartbeat_interval_ms, result.assignment
            )
            self._next_heartbeat_ms = self._clock() + result.heartbeat_interval_ms
            return
        name = error_for_code(code).name
        where = f"ConsumerGroupHeartbeat of group {self._group_id}" + (
            f": {result.message}" if result.message else ""
        )
        if code in _COORDINATOR_MOVED:
            self._mark_coordinator_unknown(name)
            self._retry_full(name)
        elif code == ErrorCode.coordinator_load_in_progress:
            self._retry_full(name)
        elif code in _FENCED:
            log.info("group %s: member %s fenced (%s)", self._group_id, self._membership.member_id, name)
            self.state.reset()
            self._membership.on_fenced()
        elif code == ErrorCode.topic_authorization_failed:
            self.error_to_raise = error_for_code(code, where)
            self._retry_full(name)
        else:
            log.error("group %s: fatal heartbeat error %s", self._group_id, where)
            self.fatal_error = error_for_code(code, where)
            self._membership.on_fatal()

    def _retry_full(self, reason: str) -> None:
        self.state.reset()
        self._backoff_until_ms = self._next_heartbeat_ms = self._clock() + self._retry_backoff_ms
        log.debug("group %s: heartbeat retried after %s", self._group_id, reason)
