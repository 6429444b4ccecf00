"""The leader's view of one follower replica (Kafka's ``Replica`` / ``ReplicaState``).

The leader learns a follower's log end offset from the ``fetch_offset`` of its Fetch requests
and tracks when it was last caught up (``lastCaughtUpTimeMs``), which decides ISR shrink
(``replica.lag.time.max.ms``) and ISR expansion (kafka_internals §1.3).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Replica"]

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class Replica:
    """State of a remote replica as seen by the leader.

    Attributes:
        broker_id: the follower's node id.
        log_end_offset: its LEO (the last fetch offset), -1 until it fetched.
        log_start_offset: its log start offset as sent in its fetch (-1 unknown).
        last_caught_up_time_ms: last wall-clock ms at which it had reached the leader's LEO.
        last_fetch_leader_log_end_offset: the leader's LEO at its previous fetch.
        last_fetch_time_ms: time of its previous fetch (0: never).
        broker_epoch: from ReplicaState (Fetch v15+), -1 unknown.
    """

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    broker_epoch: int = -1

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int, leader_end_offset: int
    ) -> None:
        """Record a fetch from this follower (Kafka's ``Replica.updateFetchStateOrThrow``):
        its LEO becomes ``fetch_offset``; it is caught up "now" if it reached the leader's
        current LEO, or "as of the previous fetch" if it reached the LEO the leader had then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset >= 0:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_end_offset
        self.last_fetch_time_ms = fetch_time_ms

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """``Replica.isCaughtUp``: at the leader's LEO, or caught up within ``max_lag_ms``."""
        return self.log_end_offset == leader_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def reset(self, now_ms: int, leader_end_offset: int, in_isr: bool) -> None:
        """Forget the fetch state (Kafka's ``resetReplicaState`` on becoming leader): ISR members
        start as caught up now, others as never caught up."""
        self.log_end_offset = UNKNOWN_OFFSET
        self.log_start_offset = UNKNOWN_OFFSET
        self.last_caught_up_time_ms = now_ms if in_isr else 0
        self.last_fetch_leader_log_end_offset = leader_end_offset if in_isr else UNKNOWN_OFFSET
        self.last_fetch_time_ms = now_ms if in_isr else 0
