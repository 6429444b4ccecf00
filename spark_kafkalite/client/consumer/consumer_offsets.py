"""Offsets of a consumer group member (the offset half of Java's ``ConsumerCoordinator``):
OffsetCommit (sync with retries, async with callbacks run on the consumer thread, auto-commit
every ``auto.commit.interval.ms``), OffsetFetch (``committed``) and positions of newly assigned
partitions initialised from committed offsets (Java ``initWithCommittedOffsetsIfNeeded``).

Error mapping (Java's): a commit while the group rebalances -> ``RebalanceInProgressError``;
a KIP-848 member's commit answered STALE_MEMBER_EPOCH is retried by ``commit_sync`` when the
member's epoch changed meanwhile, else raised (``StaleMemberEpochError``);
by a member whose generation is gone (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, or not joined) ->
``CommitFailedError``; coordinator errors, COORDINATOR_LOAD_IN_PROGRESS and connection errors are
retried by ``commit_sync`` / ``fetch_committed_offsets`` until their deadline.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from spark_kafkalite.client.consumer.group_requests import (
    OffsetAndMetadata,
    offset_commit_request,
    offset_fetch_request,
    parse_offset_commit_response,
    parse_offset_fetch_response,
)
from spark_kafkalite.client.consumer.group_state import (
    NO_GENERATION,
    Generation,
    SubscriptionType,
    is_retriable_group_error,
)
from spark_kafkalite.client.errors import COORDINATOR_MOVED_ERRORS
from spark_kafkalite.client.request_future import RequestFuture
from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    error_for_code,
)

if TYPE_CHECKING:
    from spark_kafkalite.client.consumer.subscription_state import SubscriptionState
    from spark_kafkalite.client.network_client import NetworkClient

__all__ = [
    "ConsumerOffsets",
    "GroupMember",
    "CommitFailedError",
    "RebalanceInProgressError",
    "OffsetCommitCallback",
]

log = logging.getLogger(__name__)

OffsetCommitCallback = Callable[[dict[TopicPartition, OffsetAndMetadata], "BaseException | None"], None]


class CommitFailedError(KafkaError):
    """The commit cannot complete because the member is no longer part of the group: its
    generation is gone (e.g. a rebalance finished without it after ``max.poll.interval.ms``).
    Java ``CommitFailedException``; not retriable: ``poll`` rejoins."""

    error_code = -1
    retriable = False

    def _format(self, message: str | None) -> str:
        return f"COMMIT_FAILED: {message}" if message else "COMMIT_FAILED"


class GroupMember(Protocol):
    """What ``ConsumerOffsets`` needs of its group member (``ConsumerCoordinator``): identity,
    generation, coordinator lookup and requests to it."""

    group_id: str
    group_instance_id: str | None
    subscription_type: SubscriptionType

    @property
    def generation(self) -> Generation: ...

    @property
    def request_timeout_ms(self) -> int: ...
    @property
    def close_deadline(self) -> float: ...
    def now_ms(self) -> float: ...
    def is_auto_subscribed(self) -> bool: ...
    def generation_if_stable(self) -> Generation | None: ...
    def is_current_generation(self, generation: Generation) -> bool: ...
    def rebalance_in_progress(self) -> bool: ...
    def coordinator(self) -> int | None: ...
    def mark_coordinator_unknown(self, reason: str) -> None: ...
    def request_rejoin(self, reason: str) -> None: ...
    def reset_generation(self, reason: str, reset_member_id: bool) -> None: ...
    def set_fatal_error(self, exc: KafkaError) -> None: ...
    def ensure_coordinator_ready(self, deadline: float) -> bool: ...
    def send_to_coordinator(self, builder: Any, timeout_ms: float | None = None) -> RequestFuture: ...
    def watch_coordinator_errors(self, future: RequestFuture) -> None: ...
    def wait_for(self, future: RequestFuture, deadline: float) -> bool: ...
    def backoff(self, deadline: float) -> None: ...
    def set_coordinator(self, found: tuple[int, str, int]) -> None: ...
    def send_find_coordinator(self, client: NetworkClient, group_id: str) -> RequestFuture: ...


class ConsumerOffsets:
    """Offset commits and fetches of a group member (see module docstring): the offset manager
    a ``ConsumerCoordinator`` owns. Runs on the application thread.

    Args:
        member: the coordinator whose generation the commits carry.
        client: the application thread's network client.
        subscriptions: the consumer's assignment and positions.
        auto_commit_enabled: ``enable.auto.commit``; auto_commit_interval_ms: ``auto.commit.interval.ms``.
    """

    def __init__(
        self,
        member: GroupMember,
        client: NetworkClient,
        subscriptions: SubscriptionState,
        auto_commit_enabled: bool,
        auto_commit_interval_ms: float,
        member_epoch_in_offset_fetch: bool = False,
    ) -> None:
        self._member = member
        #: KIP-848 members send OffsetFetch v9 with their member id and epoch
        self.member_epoch_in_offset_fetch = member_epoch_in_offset_fetch
        self._client = client
        self._subscriptions = subscriptions
        self.auto_commit_enabled = auto_commit_enabled
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.next_auto_commit_ms = member.now_ms() + auto_commit_interval_ms
        self._pending_committed: tuple[frozenset[TopicPartition], RequestFuture] | None = None
        self._completed_commits: deque[
            tuple[OffsetCommitCallback | None, dict[TopicPartition, OffsetAndMetadata], BaseException | None]
        ] = deque()

    @property
    def group_id(self) -> str:
        return self._member.group_id

    def reset_auto_commit_timer(self) -> None:
        """Next auto-commit one ``auto.commit.interval.ms`` from now (after a rebalance)."""
        self.next_auto_commit_ms = self._member.now_ms() + self.auto_commit_interval_ms

    # ------------------------------------------------------------------ offsets
    def all_consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The position of every assigned partition that has one (what auto-commit commits)."""
        out = {}
        for tp in self._subscriptions.assigned_partitions():
            state = self._subscriptions.state(tp)
            if state.position is not None:
                epoch = getattr(state, "offset_epoch", None)
                out[tp] = OffsetAndMetadata(
                    int(state.position), leader_epoch=-1 if epoch is None else int(epoch)
                )
        return out

    def maybe_auto_commit(self) -> None:
        if not self.auto_commit_enabled or self._member.subscription_type is SubscriptionType.NONE:
            return
        now = self._member.now_ms()
        if now < self.next_auto_commit_ms:
            return
        self.next_auto_commit_ms = now + self.auto_commit_interval_ms
        if self._member.is_auto_subscribed() and self._member.generation_if_stable() is None:
            return
        offsets = self.all_consumed_offsets()
        if offsets:
            self.commit_async(offsets, self._log_auto_commit)

    def _log_auto_commit(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], exc: BaseException | None
    ) -> None:
        if exc is not None:
            log.warning("group %s: auto-commit of %s failed: %s", self.group_id, offsets, exc)
        else:
            log.debug("group %s: auto-committed %s", self.group_id, offsets)

    def commit_quietly(self, offsets: dict[TopicPartition, OffsetAndMetadata], when: str) -> None:
        if not offsets:
            return
        try:
            self.commit_sync(
                offsets,
                min(self._member.now_ms() + self._member.request_timeout_ms, self._member.close_deadline),
            )
        except KafkaError as exc:
            log.warning("group %s: auto-commit %s failed: %s", self.group_id, when, exc)

    def _send_offset_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> RequestFuture:
        outer = RequestFuture()
        if self._member.is_auto_subscribed():
            generation = self._member.generation_if_stable()
            instance_id = self._member.group_instance_id
            if generation is None:
                if self._member.rebalance_in_progress():
                    outer.failure(
                        RebalanceInProgressError(
                            "offset commit cannot be completed since the consumer is undergoing a rebalance; "
                            "call poll() to complete it and retry"
                        )
                    )
                else:
                    outer.failure(
                        CommitFailedError(
                            "offset commit cannot be completed since the consumer is not part of an active group; "
                            "it was likely kicked out of the group"
                        )
                    )
                return outer
        else:
            generation, instance_id = NO_GENERATION, None
        builder = offset_commit_request(
            self.group_id, generation.generation_id, generation.member_id, instance_id, offsets
        )
        future = self._member.send_to_coordinator(builder)
        self._member.watch_coordinator_errors(future)

        def done(f: RequestFuture) -> None:
            if f.failed():
                outer.failure(f.exception or KafkaError("OffsetCommit failed"))
                return
            for tp, code in sorted(parse_offset_commit_response(f.value).items()):
                if code == ErrorCode.none:
                    continue
                where = f"OffsetCommit of {tp.topic}-{tp.partition} for group {self.group_id}"
                if code in (
                    ErrorCode.coordinator_not_available,
                    ErrorCode.not_coordinator,
                    ErrorCode.request_timed_out,
                ):
                    self._member.mark_coordinator_unknown(error_for_code(code).name)
                elif code == ErrorCode.rebalance_in_progress:
                    self._member.request_rejoin("OffsetCommit: REBALANCE_IN_PROGRESS")
                    outer.failure(RebalanceInProgressError(where))
                    return
                elif code in (ErrorCode.unknown_member_id, ErrorCode.illegal_generation):
                    current = self._member.is_current_generation(generation)
                    if current and generation is not NO_GENERATION:
                        self._member.reset_generation(
                            f"OffsetCommit: {error_for_code(code).name}",
                            reset_member_id=code == ErrorCode.unknown_member_id,
                        )
                    outer.failure(
                        CommitFailedError(
                            f"{where}: {error_for_code(code).name}; the group has "
                            "rebalanced and assigned the partitions to another member"
                        )
                    )
                    return
                elif code == ErrorCode.fenced_instance_id:
                    self._member.set_fatal_error(error_for_code(code, where))
                outer.failure(error_for_code(code, where))
                return
            outer.success(None)

        future.add_callback(done)
        return outer

    def commit_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], deadline: float) -> None:
        """Commit and wait, retrying retriable errors until ``deadline``.

        Raises:
            CommitFailedError, RebalanceInProgressError, KafkaTimeoutError, KafkaError
            (e.g. OFFSET_METADATA_TOO_LARGE, GROUP_AUTHORIZATION_FAILED).
        """
        self.invoke_completed_commit_callbacks()
        if not offsets:
            return
        last: BaseException | None = None
        while True:
            if not self._member.ensure_coordinator_ready(deadline):
                raise KafkaTimeoutError(
                    f"offset commit for group {self.group_id} timed out finding the coordinator"
                )
            sent = self._member.generation
            future = self._send_offset_commit(offsets)
            if not self._member.wait_for(future, deadline):
                raise KafkaTimeoutError(f"offset commit for group {self.group_id} timed out")
            if future.succeeded():
                return
            last = future.error()
            if isinstance(last, StaleMemberEpochError):
                # KIP-848 (Java CommitRequestManager): retried once the heartbeat brought a newer
                # member epoch, else the member is no longer in the group
                self._member.backoff(deadline)
                if self._member.generation != sent and self._member.now_ms() < deadline:
                    continue
                raise last
            if isinstance(
                last, (CommitFailedError, RebalanceInProgressError)
            ) or not is_retriable_group_error(last):
                raise last
            self._member.backoff(deadline)
            if self._member.now_ms() >= deadline:
                raise KafkaTimeoutError(
                    f"offset commit for group {self.group_id} timed out (last error: {last})"
                )

    def commit_async(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], callback: OffsetCommitCallback | None
    ) -> None:
        """Send the commit; ``callback(offsets, exception or None)`` runs in a later ``poll``,
        ``commit_*`` or ``close`` on this thread."""
        snapshot = dict(offsets)

        def finish(exc: BaseException | None) -> None:
            self._completed_commits.append((callback, snapshot, exc))

        if not snapshot:
            finish(None)
            return
        if self._member.coordinator() is not None:
            self._send_offset_commit(snapshot).add_callback(
                lambda f: finish(f.exception if f.failed() else None)
            )
            return

        def found(f: RequestFuture) -> None:
            if f.failed():
                finish(f.exception)
                return
            self._member.set_coordinator(f.value)
            self._send_offset_commit(snapshot).add_callback(
                lambda g: finish(g.exception if g.failed() else None)
            )

        self._member.send_find_coordinator(self._client, self.group_id).add_callback(found)

    def invoke_completed_commit_callbacks(self) -> None:
        while self._completed_commits:
            callback, offsets, exc = self._completed_commits.popleft()
            if callback is None:
                if exc is not None:
                    log.warning("group %s: async commit of %s failed: %s", self.group_id, offsets, exc)
                continue
            try:
                callback(offsets, exc)
            except Exception:
                log.exception("group %s: offset commit callback failed", self.group_id)

    def _send_offset_fetch(self, partitions: Iterable[TopicPartition]) -> RequestFuture:
        tps = sorted(set(partitions))
        outer = RequestFuture()
        member = None
        if self.member_epoch_in_offset_fetch:  # KIP-848 (Java CommitRequestManager): id and epoch
            generation = self._member.generation_if_stable()
            if generation is not None:
                member = (generation.member_id, generation.generation_id)
        future = self._member.send_to_coordinator(offset_fetch_request(self.group_id, tps, member=member))
        self._member.watch_coordinator_errors(future)

        def done(f: RequestFuture) -> None:
            if f.failed():
                outer.failure(f.exception or KafkaError("OffsetFetch failed"))
                return
            top, found = parse_offset_fetch_response(f.value)
            if top != ErrorCode.none:
                if top in COORDINATOR_MOVED_ERRORS:
                    self._member.mark_coordinator_unknown(error_for_code(top).name)
                outer.failure(error_for_code(top, f"OffsetFetch for group {self.group_id}"))
                return
            result: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for tp in tps:
                om, code = found.get(tp, (None, 0))
                if code in (ErrorCode.none, ErrorCode.unknown_topic_or_partition):
                    result[tp] = om
                else:
                    if code in COORDINATOR_MOVED_ERRORS:
                        self._member.mark_coordinator_unknown(error_for_code(code).name)
                    outer.failure(error_for_code(code, f"OffsetFetch of {tp.topic}-{tp.partition}"))
                    return
            outer.success(result)

        future.add_callback(done)
        return outer

    def fetch_committed_offsets(
        self, partitions: Iterable[TopicPartition], deadline: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets (None where nothing is committed), retrying retriable errors.

        Raises:
            KafkaTimeoutError, KafkaError (e.g. GROUP_AUTHORIZATION_FAILED).
        """
        tps = list(partitions)
        if not tps:
            return {}
        while True:
            if not self._member.ensure_coordinator_ready(deadline):
                raise KafkaTimeoutError(f"cannot find the coordinator of group {self.group_id} in time")
            future = self._send_offset_fetch(tps)
            if not self._member.wait_for(future, deadline):
                raise KafkaTimeoutError(f"OffsetFetch for group {self.group_id} timed out")
            if future.succeeded():
                result: dict[TopicPartition, OffsetAndMetadata | None] = future.value
                return result
            exc = future.error()
            if not is_retriable_group_error(exc) and not isinstance(exc, StaleMemberEpochError):
                raise exc  # STALE_MEMBER_EPOCH: retried with the epoch the heartbeat brings (Java)
            self._member.backoff(deadline)
            if self._member.now_ms() >= deadline:
                raise KafkaTimeoutError(
                    f"OffsetFetch for group {self.group_id} timed out (last error: {exc})"
                )

    def refresh_committed_offsets_if_needed(self, deadline: float) -> bool:
        """Seek partitions without a position to their committed offsets (Java
        ``initWithCommittedOffsetsIfNeeded``); partitions with none are left for
        ``auto.offset.reset``. False when ``deadline`` passed first (positions untouched)."""
        while True:
            missing = frozenset(self._subscriptions.partitions_missing_position())
            if not missing:
                return True
            pending = self._pending_committed
            if pending is None or pending[0] != missing:
                if not self._member.ensure_coordinator_ready(deadline):
                    return False
                pending = (missing, self._send_offset_fetch(missing))
                self._pending_committed = pending
            if not self._member.wait_for(pending[1], deadline):
                return False
            self._pending_committed = None
            future = pending[1]
            if future.failed():
                exc = future.error()
                if not is_retriable_group_error(exc) and not isinstance(exc, StaleMemberEpochError):
                    raise exc
                self._member.backoff(deadline)
                if self._member.now_ms() >= deadline:
                    return False
                continue
            for tp, om in future.value.items():
                if (
                    om is not None
                    and self._subscriptions.is_assigned(tp)
                    and self._subscriptions.position(tp) is None
                ):
                    log.info(
                        "group %s: setting offset of %s-%s to the committed offset %d",
                        self.group_id,
                        tp.topic,
                        tp.partition,
                        om.offset,
                    )
                    self._subscriptions.seek(tp, om.offset)
            return True
