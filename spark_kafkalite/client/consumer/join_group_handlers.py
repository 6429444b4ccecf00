"""JoinGroup and SyncGroup of the classic group protocol for ``AbstractCoordinator`` (Java
``AbstractCoordinator.sendJoinGroupRequest`` / ``JoinGroupResponseHandler`` /
``sendSyncGroupRequest`` / ``SyncGroupResponseHandler``).

``send_join_group`` sends JoinGroup and returns a future that completes with the member's
assignment bytes once SyncGroup answers, or fails with the group error: a JoinGroup success
makes the leader compute the assignment (``on_leader_elected``) and every member send
SyncGroup. MEMBER_ID_REQUIRED (KIP-394) keeps the assigned member id for the immediate rejoin;
UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION reset the generation; NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE forget the coordinator; FENCED_INSTANCE_ID (KIP-345) is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from spark_kafkalite.client.consumer.group_requests import (
    join_group_request,
    rebalance_request_timeout_ms,
    sync_group_request,
)
from spark_kafkalite.client.consumer.group_state import Generation
from spark_kafkalite.client.errors import COORDINATOR_MOVED_ERRORS
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.protocol.errors import ErrorCode, KafkaError, error_for_code

if TYPE_CHECKING:
    from spark_kafkalite.client.consumer.abstract_coordinator import AbstractCoordinator

__all__ = ["send_join_group", "JoinGroupResponseHandler", "SyncGroupResponseHandler"]

log = logging.getLogger(__name__)


def _as_kafka_error(exc: BaseException | None) -> KafkaError:
    return exc if isinstance(exc, KafkaError) else KafkaError(str(exc))


def send_join_group(coordinator: AbstractCoordinator) -> RequestFuture:
    """Send JoinGroup to ``coordinator``'s coordinator (Java ``sendJoinGroupRequest``), with
    ``session.timeout.ms``, the rebalance timeout ``max.poll.interval.ms``, the member id,
    ``group.instance.id`` and the protocols of ``metadata_protocols``. Returns a future of the
    member's assignment bytes (after SyncGroup) that fails with the JoinGroup / SyncGroup error
    (a ``KafkaError``); the request timeout covers the rebalance timeout."""
    member_id, reason = coordinator.begin_join()
    outer = RequestFuture()
    builder = join_group_request(
        coordinator.group_id,
        coordinator.session_timeout_ms,
        coordinator.rebalance_timeout_ms,
        member_id,
        coordinator.group_instance_id,
        coordinator.protocol_type(),
        coordinator.metadata_protocols(),
        reason,
    )
    log.info(
        "group %s: (re-)joining group (member id %r, reason: %s)", coordinator.group_id, member_id, reason
    )
    future = coordinator.send_to_coordinator(
        builder,
        rebalance_request_timeout_ms(coordinator.rebalance_timeout_ms, coordinator.request_timeout_ms),
    )
    coordinator.watch_coordinator_errors(future)
    future.add_callback(JoinGroupResponseHandler(coordinator, outer))
    return outer


class JoinGroupResponseHandler:
    """Handles one JoinGroup response (Java ``JoinGroupResponseHandler``): on success records the
    generation, runs the leader's assignment and sends SyncGroup; on error updates the member
    (see module docstring) and fails ``outer``."""

    __slots__ = ("_coordinator", "_outer")

    def __init__(self, coordinator: AbstractCoordinator, outer: RequestFuture) -> None:
        self._coordinator = coordinator
        self._outer = outer

    def __call__(self, f: RequestFuture) -> None:
        c, outer = self._coordinator, self._outer
        if f.failed():
            c.fail_join(outer, _as_kafka_error(f.exception))
            return
        r = f.value
        code = int(r.error_code)
        if code == ErrorCode.none:
            protocol_type = getattr(r, "protocol_type", None)
            if protocol_type is not None and protocol_type != c.protocol_type():
                c.fail_join(
                    outer,
                    error_for_code(
                        ErrorCode.inconsistent_group_protocol,
                        f"JoinGroup answered protocol type {protocol_type!r}",
                    ),
                )
                return
            if not c.joined(Generation(int(r.generation_id), str(r.member_id), r.protocol_name)):
                c.fail_join(
                    outer, error_for_code(ErrorCode.unknown_member_id, "left the group during the join")
                )
                return
            is_leader = str(r.leader) == str(r.member_id)
            log.info(
                "group %s: joined generation %s as %s (%s) with protocol %s",
                c.group_id,
                r.generation_id,
                r.member_id,
                "leader" if is_leader else "follower",
                r.protocol_name,
            )
            try:
                assignments: dict[str, bytes] = {}
                if is_leader:
                    members = [
                        (str(m.member_id), getattr(m, "group_instance_id", None), bytes(m.metadata))
                        for m in r.members
                    ]
                    assignments = c.on_leader_elected(
                        str(r.protocol_name), members, bool(getattr(r, "skip_assignment", False))
                    )
            except KafkaError as assign_error:
                c.fail_join(outer, assign_error)
                return
            send_sync_group(c, outer, assignments)
            return
        exc = error_for_code(code, f"JoinGroup of group {c.group_id}")
        if code == ErrorCode.member_id_required:
            c.set_member_id(str(r.member_id))  # KIP-394: rejoin at once with this id
        elif code == ErrorCode.unknown_member_id:
            c.reset_generation("JoinGroup: unknown member id", reset_member_id=True)
        elif code == ErrorCode.illegal_generation:
            c.reset_generation("JoinGroup: illegal generation", reset_member_id=False)
        elif code in COORDINATOR_MOVED_ERRORS:
            c.mark_coordinator_unknown(exc.name)
        elif code == ErrorCode.fenced_instance_id:
            log.error(
                "group %s: static member %s was fenced by another instance", c.group_id, c.group_instance_id
            )
        c.fail_join(outer, exc)


def send_sync_group(
    coordinator: AbstractCoordinator, outer: RequestFuture, assignments: Mapping[str, bytes]
) -> None:
    """Send SyncGroup for the current generation (Java ``sendSyncGroupRequest``);
    ``assignments`` is ``{member_id: assignment bytes}`` from the leader, empty for a
    follower. ``outer`` completes with this member's assignment bytes or fails."""
    with coordinator.lock:
        generation = coordinator.generation
    builder = sync_group_request(
        coordinator.group_id,
        generation.generation_id,
        generation.member_id,
        coordinator.group_instance_id,
        coordinator.protocol_type(),
        generation.protocol_name or "",
        assignments,
    )
    future = coordinator.send_to_coordinator(builder)
    coordinator.watch_coordinator_errors(future)
    future.add_callback(SyncGroupResponseHandler(coordinator, outer, generation))


class SyncGroupResponseHandler:
    """Handles one SyncGroup response (Java ``SyncGroupResponseHandler``): on success the
    member is STABLE and ``outer`` completes with its assignment bytes; REBALANCE_IN_PROGRESS
    when the generation changed during the sync; other errors update the member (see module
    docstring) and fail ``outer``."""

    __slots__ = ("_coordinator", "_outer", "_generation")

    def __init__(
        self, coordinator: AbstractCoordinator, outer: RequestFuture, generation: Generation
    ) -> None:
        self._coordinator = coordinator
        self._outer = outer
        self._generation = generation

    def __call__(self, f: RequestFuture) -> None:
        c, outer = self._coordinator, self._outer
        if f.failed():
            c.fail_join(outer, _as_kafka_error(f.exception))
            return
        r = f.value
        code = int(r.error_code)
        if code == ErrorCode.none:
            if not c.synced(self._generation):
                c.fail_join(
                    outer, error_for_code(ErrorCode.rebalance_in_progress, "generation changed during sync")
                )
                return
            outer.success(bytes(r.assignment or b""))
            return
        exc = error_for_code(code, f"SyncGroup of group {c.group_id}")
        if code == ErrorCode.unknown_member_id:
            c.reset_generation("SyncGroup: unknown member id", reset_member_id=True)
        elif code == ErrorCode.illegal_generation:
            c.reset_generation("SyncGroup: illegal generation", reset_member_id=False)
        elif code in COORDINATOR_MOVED_ERRORS:
            c.mark_coordinator_unknown(exc.name)
        c.fail_join(outer, exc)
