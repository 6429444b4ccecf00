"""``SubscriptionState``: assigned partitions and their fetch state (Java ``SubscriptionState``).

Per partition: the position (next offset to fetch and return), the leader epoch of the last
record returned (``offset_epoch``) and the leader epoch the position was last validated against
(``current_leader_epoch``), the last known high watermark / log start / last stable offset, a
pending offset reset (earliest / latest), a pending position validation (KIP-320: after a leader
change the position is checked with OffsetForLeaderEpoch before fetching resumes) and whether it is
paused. Single-threaded (consumer thread).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.errors import InvalidConfigError

__all__ = ["OffsetResetStrategy", "TopicPartitionState", "SubscriptionState"]


class OffsetResetStrategy(enum.IntEnum):
    """``auto.offset.reset``; the values are ListOffsets' special timestamps."""

    LATEST = -1
    EARLIEST = -2
    NONE = 0

    @classmethod
    def parse(cls, value: str) -> OffsetResetStrategy:
        """``"earliest"`` / ``"latest"`` / ``"none"`` (Kafka's spellings; ``smallest`` /
        ``largest`` accepted as librdkafka does).

        Raises:
            InvalidConfigError: any other value.
        """
        text = str(value).strip().lower()
        if text in ("earliest", "smallest", "beginning"):
            return cls.EARLIEST
        if text in ("latest", "largest", "end"):
            return cls.LATEST
        if text == "none":
            return cls.NONE
        raise InvalidConfigError(f"invalid auto.offset.reset {value!r}: use earliest, latest or none")


class TopicPartitionState:
    """Mutable fetch state of one assigned partition."""

    __slots__ = (
        "position",
        "high_watermark",
        "log_start_offset",
        "last_stable_offset",
        "reset_strategy",
        "reset_in_flight",
        "next_reset_attempt_ms",
        "paused",
        "offset_epoch",
        "current_leader_epoch",
        "awaiting_validation",
        "validation_in_flight",
        "next_validation_attempt_ms",
        "preferred_read_replica",
        "preferred_read_replica_expire_ms",
    )

    def __init__(self) -> None:
        self.position: int | None = None
        self.high_watermark: int = -1
        self.log_start_offset: int = -1
        self.last_stable_offset: int = -1
        self.reset_strategy: OffsetResetStrategy | None = None
        self.reset_in_flight = False
        self.next_reset_attempt_ms = 0.0
        self.paused = False
        self.offset_epoch: int | None = None
        self.current_leader_epoch: int | None = None
        self.awaiting_validation = False
        self.validation_in_flight = False
        self.next_validation_attempt_ms = 0.0
        #: KIP-392: the replica the leader told us to read from, until the expiry (ms)
        self.preferred_read_replica: int | None = None
        self.preferred_read_replica_expire_ms = 0.0

    def set_validated_position(self, offset: int, offset_epoch: int | None = None) -> None:
        """A new position that needs no validation (seek, reset, truncation handled)."""
        self.position = offset
        self.offset_epoch = offset_epoch
        self.reset_strategy = None
        self.reset_in_flight = False
        self.awaiting_validation = False
        self.validation_in_flight = False


class SubscriptionState:
    """Assigned partitions and positions (see module docstring).

    Args:
        default_reset_strategy: applied when a partition has no position or its position is out
            of range (``auto.offset.reset``).
    """

    def __init__(self, default_reset_strategy: OffsetResetStrategy = OffsetResetStrategy.LATEST) -> None:
        self.default_reset_strategy = default_reset_strategy
        self._assignment: dict[TopicPartition, TopicPartitionState] = {}

    # -------------------------------------------------------------- assignment

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Replace the assignment; partitions kept from the old one keep their state."""
        new: dict[TopicPartition, TopicPartitionState] = {}
        for tp in partitions:
            tp = TopicPartition(str(tp[0]), int(tp[1]))
            new[tp] = self._assignment.get(tp) or TopicPartitionState()
        self._assignment = new

    def unsubscribe(self) -> None:
        """Drop the whole assignment with its positions (Java ``SubscriptionState.unsubscribe``)."""
        self._assignment = {}

    def assigned_partitions(self) -> set[TopicPartition]:
        """A copy of the assigned partitions (Java ``assignedPartitions``)."""
        return set(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        """True while ``tp`` is assigned (Java ``isAssigned``)."""
        return tp in self._assignment

    def state(self, tp: TopicPartition) -> TopicPartitionState:
        """State of an assigned partition.

        Raises:
            KeyError: ``tp`` is not assigned (callers turn it into a clear error).
        """
        return self._assignment[tp]

    def topics(self) -> set[str]:
        """The topics of the assigned partitions."""
        return {tp.topic for tp in self._assignment}

    # -------------------------------------------------------------- positions

    def seek(self, tp: TopicPartition, offset: int, offset_epoch: int | None = None) -> None:
        """Set the position and cancel any pending reset or validation. With ``offset_epoch``
        (the leader epoch of the record before ``offset``, e.g. from a committed offset), the
        position is validated against the leader first (Java ``seekUnvalidated``)."""
        state = self._assignment[tp]
        state.set_validated_position(int(offset), offset_epoch)
        if offset_epoch is not None and offset_epoch >= 0:
            state.awaiting_validation = True
            state.next_validation_attempt_ms = 0.0

    def position(self, tp: TopicPartition) -> int | None:
        """The next offset to fetch for ``tp``, or None until it is known.

        Raises:
            KeyError: ``tp`` is not assigned."""
        return self._assignment[tp].position

    def set_position(self, tp: TopicPartition, offset: int) -> None:
        """Advance the position after records were handed out (keeps pending resets)."""
        state = self._assignment.get(tp)
        if state is not None:
            state.position = offset

    def has_valid_position(self, tp: TopicPartition) -> bool:
        """A position that may be fetched from: set, no reset pending, validated."""
        state = self._assignment[tp]
        return state.position is not None and state.reset_strategy is None and not state.awaiting_validation

    def request_offset_reset(self, tp: TopicPartition, strategy: OffsetResetStrategy | None = None) -> None:
        """Reset ``tp`` to earliest/latest on the next poll (``None`` = the default strategy)."""
        state = self._assignment[tp]
        state.reset_strategy = strategy if strategy is not None else self.default_reset_strategy
        state.reset_in_flight = False
        state.next_reset_attempt_ms = 0.0
        state.awaiting_validation = False
        state.validation_in_flight = False

    def is_offset_reset_needed(self, tp: TopicPartition) -> bool:
        """True while a reset to earliest / latest is pending for ``tp`` (Java
        ``isOffsetResetNeeded``).

        Raises:
            KeyError: ``tp`` is not assigned."""
        return self._assignment[tp].reset_strategy is not None

    def partitions_missing_position(self) -> list[TopicPartition]:
        """Assigned partitions with neither a position nor a pending reset."""
        return [tp for tp, s in self._assignment.items() if s.position is None and s.reset_strategy is None]

    def partitions_needing_reset(self, now_ms: float) -> list[TopicPartition]:
        """Partitions whose reset should be sent now (not in flight, not backing off)."""
        return [
            tp
            for tp, s in self._assignment.items()
            if s.reset_strategy is not None and not s.reset_in_flight and now_ms >= s.next_reset_attempt_ms
        ]

    def next_reset_delay_ms(self, now_ms: float) -> float:
        """Milliseconds until a pending reset may be (re)sent; inf when none waits."""
        delay = float("inf")
        for s in self._assignment.values():
            if s.reset_strategy is not None and not s.reset_in_flight:
                delay = min(delay, max(0.0, s.next_reset_attempt_ms - now_ms))
        return delay

    def set_reset_pending(self, tps: Iterable[TopicPartition], next_attempt_ms: float) -> None:
        """A ListOffsets for the reset of ``tps`` was sent: no other until it is answered or
        ``next_attempt_ms`` (ms) passes (Java ``setNextAllowedRetry``)."""
        for tp in tps:
            state = self._assignment.get(tp)
            if state is not None:
                state.reset_in_flight = True
                state.next_reset_attempt_ms = next_attempt_ms

    def reset_failed(self, tp: TopicPartition, next_attempt_ms: float) -> None:
        """The reset ListOffsets for ``tp`` failed: retry it at ``next_attempt_ms`` (ms; Java
        ``requestFailed``)."""
        state = self._assignment.get(tp)
        if state is not None:
            state.reset_in_flight = False
            state.next_reset_attempt_ms = next_attempt_ms

    def maybe_complete_reset(self, tp: TopicPartition, strategy: OffsetResetStrategy, offset: int) -> bool:
        """Install a reset result unless the partition was reassigned, sought or reset
        differently meanwhile. Returns True when the position was set."""
        state = self._assignment.get(tp)
        if state is None or state.reset_strategy is not strategy or not state.reset_in_flight:
            return False
        state.set_validated_position(offset)
        return True

    # -------------------------------------------------------------- validation (KIP-320)

    def maybe_validate_position_for_current_leader(self, tp: TopicPartition, leader_epoch: int) -> bool:
        """Metadata says the leader epoch of ``tp`` is ``leader_epoch``. If it is newer than the
        one the position was validated against and the position knows the epoch of its last
        record, the partition stops fetching until validated (Java
        ``maybeValidatePositionForCurrentLeader``). Returns True when validation is needed."""
        state = self._assignment.get(tp)
        if state is None or state.position is None or state.reset_strategy is not None or leader_epoch < 0:
            return False
        known = state.current_leader_epoch
        if known is None or leader_epoch <= known:
            if known is None:
                state.current_leader_epoch = leader_epoch
            return state.awaiting_validation
        state.current_leader_epoch = leader_epoch
        if state.offset_epoch is None or state.offset_epoch < 0:
            return state.awaiting_validation  # nothing to validate against (Java: no offset epoch)
        state.awaiting_validation = True
        state.validation_in_flight = False
        state.next_validation_attempt_ms = 0.0
        return True

    def partitions_needing_validation(self, now_ms: float) -> list[TopicPartition]:
        """Partitions awaiting validation whose OffsetForLeaderEpoch should be sent now."""
        return [
            tp
            for tp, s in self._assignment.items()
            if s.awaiting_validation
            and s.reset_strategy is None
            and not s.validation_in_flight
            and now_ms >= s.next_validation_attempt_ms
        ]

    def set_validation_pending(self, tps: Iterable[TopicPartition], next_attempt_ms: float) -> None:
        """An OffsetForLeaderEpoch for ``tps`` was sent (KIP-320): no other until it is
        answered or ``next_attempt_ms`` (ms) passes."""
        for tp in tps:
            state = self._assignment.get(tp)
            if state is not None:
                state.validation_in_flight = True
                state.next_validation_attempt_ms = next_attempt_ms

    def validation_failed(self, tp: TopicPartition, next_attempt_ms: float) -> None:
        """The OffsetForLeaderEpoch for ``tp`` failed: retry it at ``next_attempt_ms`` (ms)."""
        state = self._assignment.get(tp)
        if state is not None:
            state.validation_in_flight = False
            state.next_validation_attempt_ms = next_attempt_ms

    def complete_validation(self, tp: TopicPartition, position: int, offset_epoch: int | None) -> bool:
        """The position ``(position, offset_epoch)`` that was validated is still current:
        fetching resumes. Returns False if the partition was reassigned, sought or reset since."""
        state = self._assignment.get(tp)
        if (
            state is None
            or not state.awaiting_validation
            or state.position != position
            or state.offset_epoch != offset_epoch
        ):
            return False
        state.awaiting_validation = False
        state.validation_in_flight = False
        return True

    def next_validation_delay_ms(self, now_ms: float) -> float:
        """Milliseconds until a pending validation may be (re)sent; inf when none waits."""
        delay = float("inf")
        for s in self._assignment.values():
            if s.awaiting_validation and not s.validation_in_flight:
                delay = min(delay, max(0.0, s.next_validation_attempt_ms - now_ms))
        return delay

    # -------------------------------------------------------------- fetching

    def fetchable_partitions(self) -> list[TopicPartition]:
        """Partitions with a valid position that are not paused."""
        return [
            tp
            for tp, s in self._assignment.items()
            if s.position is not None
            and s.reset_strategy is None
            and not s.paused
            and not s.awaiting_validation
        ]

    def pause(self, tp: TopicPartition) -> None:
        """Stop fetching ``tp`` until :meth:`resume` (Java ``pause``); its position stays.

        Raises:
            KeyError: ``tp`` is not assigned."""
        self._assignment[tp].paused = True

    def resume(self, tp: TopicPartition) -> None:
        """Fetch ``tp`` again after :meth:`pause` (Java ``resume``).

        Raises:
            KeyError: ``tp`` is not assigned."""
        self._assignment[tp].paused = False

    def paused_partitions(self) -> set[TopicPartition]:
        """The assigned partitions that are paused (Java ``pausedPartitions``)."""
        return {tp for tp, s in self._assignment.items() if s.paused}

    def update_preferred_read_replica(self, tp: TopicPartition, node_id: int, expire_ms: float) -> None:
        """KIP-392: read ``tp`` from ``node_id`` until ``expire_ms`` (Java
        ``SubscriptionState.updatePreferredReadReplica``)."""
        state = self._assignment.get(tp)
        if state is not None:
            state.preferred_read_replica = node_id
            state.preferred_read_replica_expire_ms = expire_ms

    def preferred_read_replica(self, tp: TopicPartition, now_ms: float) -> int | None:
        """The replica to read ``tp`` from, None once it expired (then it is cleared) or when
        there is none (read from the leader)."""
        state = self._assignment.get(tp)
        if state is None or state.preferred_read_replica is None:
            return None
        if now_ms > state.preferred_read_replica_expire_ms:
            state.preferred_read_replica = None
            return None
        return state.preferred_read_replica

    def clear_preferred_read_replica(self, tp: TopicPartition) -> int | None:
        """Forget ``tp``'s preferred read replica (back to the leader); returns the one
        cleared, if any."""
        state = self._assignment.get(tp)
        if state is None or state.preferred_read_replica is None:
            return None
        cleared, state.preferred_read_replica = state.preferred_read_replica, None
        return cleared

    def update_fetch_metadata(
        self, tp: TopicPartition, high_watermark: int, log_start_offset: int, last_stable_offset: int
    ) -> None:
        """Record what a fetch response said of ``tp``: its high watermark, and the log start
        offset and Last Stable Offset when the broker sent them (>= 0). Ignored for a partition no
        longer assigned."""
        state = self._assignment.get(tp)
        if state is not None:
            state.high_watermark = high_watermark
            if log_start_offset >= 0:
                state.log_start_offset = log_start_offset
            if last_stable_offset >= 0:
                state.last_stable_offset = last_stable_offset
