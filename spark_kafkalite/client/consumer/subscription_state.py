"""``SubscriptionState``: assigned partitions and their fetch state (Java ``SubscriptionState``).

Per partition: the position (next offset to fetch and return), the last known high watermark /
log start / last stable offset, a pending offset reset (earliest / latest) and whether it is
paused. Manual assignment only (no group subscription yet). Single-threaded (consumer thread).
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
        "position", "high_watermark", "log_start_offset", "last_stable_offset",
        "reset_strategy", "reset_in_flight", "next_reset_attempt_ms", "paused",
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
        self._assignment = {}

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self._assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._assignment

    def state(self, tp: TopicPartition) -> TopicPartitionState:
        """State of an assigned partition.

        Raises:
            KeyError: ``tp`` is not assigned (callers turn it into a clear error).
        """
        return self._assignment[tp]

    def topics(self) -> set[str]:
        return {tp.topic for tp in self._assignment}

    # -------------------------------------------------------------- positions

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Set the position and cancel any pending reset."""
        state = self._assignment[tp]
        state.position = int(offset)
        state.reset_strategy = None
        state.reset_in_flight = False

    def position(self, tp: TopicPartition) -> int | None:
        return self._assignment[tp].position

    def set_position(self, tp: TopicPartition, offset: int) -> None:
        """Advance the position after records were handed out (keeps pending resets)."""
        state = self._assignment.get(tp)
        if state is not None:
            state.position = offset

    def has_valid_position(self, tp: TopicPartition) -> bool:
        state = self._assignment[tp]
        return state.position is not None and state.reset_strategy is None

    def request_offset_reset(self, tp: TopicPartition, strategy: OffsetResetStrategy | None = None) -> None:
        """Reset ``tp`` to earliest/latest on the next poll (``None`` = the default strategy)."""
        state = self._assignment[tp]
        state.reset_strategy = strategy if strategy is not None else self.default_reset_strategy
        state.reset_in_flight = False
        state.next_reset_attempt_ms = 0.0

    def is_offset_reset_needed(self, tp: TopicPartition) -> bool:
        return self._assignment[tp].reset_strategy is not None

    def partitions_missing_position(self) -> list[TopicPartition]:
        """Assigned partitions with neither a position nor a pending reset."""
        return [tp for tp, s in self._assignment.items() if s.position is None and s.reset_strategy is None]

    def partitions_needing_reset(self, now_ms: float) -> list[TopicPartition]:
        """Partitions whose reset should be sent now (not in flight, not backing off)."""
        return [
            tp for tp, s in self._assignment.items()
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
        for tp in tps:
            state = self._assignment.get(tp)
            if state is not None:
                state.reset_in_flight = True
                state.next_reset_attempt_ms = next_attempt_ms

    def reset_failed(self, tp: TopicPartition, next_attempt_ms: float) -> None:
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
        state.position = offset
        state.reset_strategy = None
        state.reset_in_flight = False
        return True

    # -------------------------------------------------------------- fetching

    def fetchable_partitions(self) -> list[TopicPartition]:
        """Partitions with a valid position that are not paused."""
        return [
            tp for tp, s in self._assignment.items()
            if s.position is not None and s.reset_strategy is None and not s.paused
        ]

    def pause(self, tp: TopicPartition) -> None:
        self._assignment[tp].paused = True

    def resume(self, tp: TopicPartition) -> None:
        self._assignment[tp].paused = False

    def paused_partitions(self) -> set[TopicPartition]:
        return {tp for tp, s in self._assignment.items() if s.paused}

    def update_fetch_metadata(
        self, tp: TopicPartition, high_watermark: int, log_start_offset: int, last_stable_offset: int
    ) -> None:
        state = self._assignment.get(tp)
        if state is not None:
            state.high_watermark = high_watermark
            if log_start_offset >= 0:
                state.log_start_offset = log_start_offset
            if last_stable_offset >= 0:
                state.last_stable_offset = last_stable_offset
