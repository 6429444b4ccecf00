"""The share partitions and share sessions of one broker (KIP-932; Kafka's
``SharePartitionManager`` and ``ShareSessionCache``).

* :class:`SharePartitionManager` holds one :class:`~broker.coordinator.share.share_partition.SharePartition`
  per (group id, topic id, partition) this broker leads and has served a ShareFetch for. A new
  one starts at ``share.auto.offset.reset`` (``latest``: the high watermark; ``earliest``: the
  log start offset), unless ``initial_state`` (the persister) knows its state.
* A share session is keyed by (group id, member id) and carries the partitions the member
  fetches and the epoch the next request must carry: 0 opens (or replaces) the session, -1
  closes it (its acknowledgements are applied, the member's acquired records released), any
  other epoch must equal the session's (INVALID_SHARE_SESSION_EPOCH; SHARE_SESSION_NOT_FOUND
  without a session); each accepted request moves the epoch on by one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.coordinator.share.share_partition import SharePartition
from spark_kafkalite.protocol.errors import ErrorCode

__all__ = ["SharePartitionManager", "ShareSession", "SharePartitionKey", "FINAL_SHARE_SESSION_EPOCH"]

#: (group id, topic id, partition)
SharePartitionKey = tuple[str, uuid.UUID, int]

INITIAL_SHARE_SESSION_EPOCH = 0
FINAL_SHARE_SESSION_EPOCH = -1
_INT32_MAX = 2**31 - 1


@dataclass(slots=True)
class ShareSession:
    """One member's share session: the partitions it fetches and the next expected epoch."""

    group_id: str
    member_id: str
    epoch: int = 1
    partitions: set[tuple[uuid.UUID, int]] = field(default_factory=set)


class SharePartitionManager:
    """See the module docstring.

    Args:
        now_ms: the clock.
        max_sessions: ``share.session.cache.size`` analogue (SHARE_SESSION_LIMIT_REACHED beyond).
        on_change: called with the key of a share partition whose state changed (the persister).
    """

    def __init__(
        self,
        now_ms: Callable[[], int],
        *,
        max_sessions: int = 1000,
        on_change: Callable[[SharePartitionKey, SharePartition], None] | None = None,
    ) -> None:
        self.now_ms = now_ms
        self.max_sessions = max_sessions
        self.on_change = on_change
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    # -- sessions -------------------------------------------------------------------------------
    def session_for(self, group_id: str, member_id: str, epoch: int) -> tuple[ErrorCode, ShareSession | None]:
        """Validate ``epoch`` against the member's session; open a new one on epoch 0, remove it
        on -1. Returns (error, session); the session's epoch is moved on for the next request."""
        key = (group_id, member_id)
        session = self.sessions.get(key)
        if epoch == INITIAL_SHARE_SESSION_EPOCH:
            if session is not None:
                self.release_session(session)
            elif len(self.sessions) >= self.max_sessions:
                return ErrorCode.share_session_limit_reached, None
            session = self.sessions[key] = ShareSession(group_id, member_id)
            return ErrorCode.none, session
        if session is None:
            return ErrorCode.share_session_not_found, None
        if epoch == FINAL_SHARE_SESSION_EPOCH:
            del self.sessions[key]
            return ErrorCode.none, session
        if epoch != session.epoch:
            return ErrorCode.invalid_share_session_epoch, None
        session.epoch = 1 if session.epoch >= _INT32_MAX else session.epoch + 1
        return ErrorCode.none, session

    def release_session(self, session: ShareSession) -> None:
        """Release the records the session's member holds in the session's partitions."""
        for topic_id, partition in session.partitions:
            key = (session.group_id, topic_id, partition)
            sp = self.partitions.get(key)
            if sp is not None and sp.release_member(session.member_id):
                self.changed(key, sp)

    # -- share partitions -----------------------------------------------------------------------
    def get(self, key: SharePartitionKey) -> SharePartition | None:
        return self.partitions.get(key)

    def get_or_create(
        self,
        key: SharePartitionKey,
        start_offset: int,
        *,
        lock_duration_ms: int,
        delivery_count_limit: int,
        max_in_flight: int,
    ) -> SharePartition:
        """The share partition of ``key``, created at ``start_offset`` if new; its lock duration
        follows the group's current ``share.record.lock.duration.ms``."""
        sp = self.partitions.get(key)
        if sp is None:
            sp = self.partitions[key] = SharePartition(
                start_offset,
                lock_duration_ms=lock_duration_ms,
                delivery_count_limit=delivery_count_limit,
                max_in_flight=max_in_flight,
            )
        else:
            sp.lock_duration_ms = lock_duration_ms
        return sp

    def changed(self, key: SharePartitionKey, sp: SharePartition) -> None:
        if self.on_change is not None:
            self.on_change(key, sp)

    def forget_partitions(self, keys: Iterable[tuple[uuid.UUID, int]]) -> None:
        """Leadership moved away or the topic was deleted: drop the state of those
        (topic id, partition)s of every group (the new leader loads the persisted state)."""
        gone = set(keys)
        for key in [k for k in self.partitions if (k[1], k[2]) in gone]:
            del self.partitions[key]

    def forget_group(self, group_id: str) -> None:
        """The group was deleted: drop its share partitions and sessions on this broker."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
        for session_key in [k for k in self.sessions if k[0] == group_id]:
            del self.sessions[session_key]

    def groups(self) -> set[str]:
        return {k[0] for k in self.partitions}
