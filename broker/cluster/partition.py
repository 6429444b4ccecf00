"""One partition hosted on this broker, as leader or follower (Kafka's ``Partition``).

State comes only from committed metadata (a :class:`PartitionRegistration`: leader,
leader_epoch, replicas, ISR, partition_epoch): :meth:`Partition.make_leader` /
:meth:`Partition.make_follower` apply it. As leader the partition tracks every follower
(:class:`Replica`), advances the high watermark from the ISR's log end offsets
(``maybeIncrementLeaderHW``, kafka_internals §1.2), decides ISR shrink / expansion (§1.3, sent
to the controller by the ReplicaManager), answers ``checkEnoughReplicasReachOffset`` for
``acks=all`` (§1.4) and reads records for followers (up to the LEO, with the
``DivergingEpoch`` check of KIP-595, §1.5) and consumers (up to the HW).

All methods are synchronous (one asyncio loop); wall-clock times are ms.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker.cluster.replica import Replica
from broker.controller.metadata_image import PartitionRegistration
from broker.log.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from broker.log.log_results import FetchDataInfo, LogAppendInfo
from broker.log.producer_state_entry import AppendOrigin
from broker.log.unified_log import UnifiedLog
from spark_kafkalite.protocol.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownLeaderEpochError,
)

__all__ = ["Partition", "LogReadResult", "NO_LEADER"]

logger = logging.getLogger(__name__)

NO_LEADER = -1


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class LogReadResult:
    """Outcome of :meth:`Partition.read_records` (Kafka's ``LogReadInfo``).

    Attributes:
        info: the records read (empty when diverging).
        high_watermark / log_start_offset / log_end_offset / last_stable_offset: at read time.
        diverging_epoch: (epoch, end_offset) for a follower whose last fetched epoch diverges
            from this log (Fetch v12 ``DivergingEpoch``), else None.
        pending: the fetcher has more to get here than this read returned (set by
            ``ReplicaManager.read_for_fetch``; a fetch session keeps such a partition marked).
        preferred_read_replica: KIP-392: the broker the consumer should read from instead
            (no records were read), else -1.
    """

    info: FetchDataInfo
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    diverging_epoch: tuple[int, int] | None = None
    last_stable_offset: int = -1
    pending: bool = False
    preferred_read_replica: int = -1


class Partition:
    """A partition with a local log on this broker.

    Args:
        topic / partition / topic_id: identity.
        local_broker_id: this broker.
        log: the local log.
        replica_lag_time_max_ms: ``replica.lag.time.max.ms``.
        isr_eligible: ``fn(broker_id) -> bool``: may this broker join an ISR (registered,
            unfenced; Kafka's ``isReplicaIsrEligible``).
        time_ms: wall clock (injectable for tests).
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        local_broker_id: int,
        log: UnifiedLog,
        *,
        replica_lag_time_max_ms: int = 30000,
        isr_eligible: Callable[[int], bool] | None = None,
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.local_broker_id = local_broker_id
        self.log = log
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.isr_eligible: Callable[[int], bool] = isr_eligible or (lambda _broker: True)
        self.time_ms: Callable[[], int] = time_ms or _now_ms
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()
        #: ISR proposed to the controller and not yet committed (Kafka's PendingExpandIsr /
        #: PendingShrinkIsr); None when no AlterPartition is in flight.
        self.pending_isr: tuple[int, ...] | None = None
        self.remote_replicas: dict[int, Replica] = {}
        self.leader_epoch_start_offset: int | None = None
        #: called with this partition when its ISR may need the leader's attention (its
        #: assignment changed, the leader's log grew past the ISR, a follower fetched below
        #: the log end): ISR expiration visits only such partitions (ReplicaManager).
        self.isr_watcher: Callable[[Partition], None] | None = None

    # -- identity / state ------------------------------------------------------------------
    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def maximal_isr(self) -> frozenset[int]:
        """Committed ISR plus replicas of an in-flight expansion (KIP-497): used for the HW and
        ``acks=all``, so an in-flight change can only make them stricter."""
        if self.pending_isr is None:
            return frozenset(self.isr)
        return frozenset(self.isr) | frozenset(self.pending_isr)

    @property
    def effective_min_isr(self) -> int:
        """``min(min.insync.replicas, replication factor)`` (Kafka 3.7+ ``effectiveMinIsr``)."""
        return min(self.log.config.min_insync_replicas, max(len(self.replicas), 1))

    @property
    def is_under_min_isr(self) -> bool:
        return len(self.isr) < self.effective_min_isr

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic}-{self.partition}, leader={self.leader_id}, epoch={self.leader_epoch}, "
            f"isr={list(self.isr)}, hw={self.log.high_watermark}, leo={self.log.log_end_offset})"
        )

    # -- metadata transitions ----------------------------------------------------------------
    def make_leader(self, registration: PartitionRegistration) -> bool:
        """Become (or stay) leader per ``registration`` (Kafka's ``Partition.makeLeader``).

        A new leader epoch records ``(epoch, LEO)`` as the start of the epoch in the leader
        epoch cache and resets every follower's fetch state; the same epoch with a new ISR or
        partition epoch only updates them. Returns True if this is a new leadership (epoch).
        """
        now = self.time_ms()
        is_new_epoch = not self.is_leader or registration.leader_epoch != self.leader_epoch
        self._update_assignment(registration)
        self.leader_id = self.local_broker_id
        if is_new_epoch:
            log = self.log
            self.log.leader_epoch_cache.assign(registration.leader_epoch, log.log_end_offset)
            self.leader_epoch_start_offset = log.log_end_offset
            leo = log.log_end_offset
            for broker_id, replica in self.remote_replicas.items():
                replica.reset(now, leo, broker_id in self.isr)
            logger.debug(  # one summary line per metadata delta (broker.server)
                "%s-%d: leader in epoch %d (start offset %d, ISR %s, HW %d)",
                self.topic,
                self.partition,
                self.leader_epoch,
                leo,
                list(self.isr),
                log.high_watermark,
            )
        self.maybe_increment_leader_hw(now)
        return is_new_epoch

    def make_follower(self, registration: PartitionRegistration) -> bool:
        """Become (or stay) a follower of ``registration.leader`` (Kafka's ``makeFollower``).
        Returns True if the leader or leader epoch changed (the fetcher must be (re)started)."""
        changed = self.leader_id != registration.leader or self.leader_epoch != registration.leader_epoch
        was_leader = self.is_leader
        self._update_assignment(registration)
        self.leader_id = registration.leader
        self.leader_epoch_start_offset = None
        self.remote_replicas.clear()
        if changed or was_leader:
            logger.debug(
                "%s-%d: follower of %d in epoch %d (LEO %d, HW %d)",
                self.topic,
                self.partition,
                self.leader_id,
                self.leader_epoch,
                self.log.log_end_offset,
                self.log.high_watermark,
            )
        return changed or was_leader

    def _update_assignment(self, registration: PartitionRegistration) -> None:
        self.leader_epoch = registration.leader_epoch
        self.partition_epoch = registration.partition_epoch
        self.replicas = tuple(registration.replicas)
        self.isr = tuple(registration.isr)
        self.pending_isr = None
        if self.isr_watcher is not None:
            self.isr_watcher(self)
        remote = [b for b in self.replicas if b != self.local_broker_id]
        for broker_id in list(self.remote_replicas):
            if broker_id not in remote:
                del self.remote_replicas[broker_id]
        for broker_id in remote:
            self.remote_replicas.setdefault(broker_id, Replica(broker_id))

    # -- epoch fencing -----------------------------------------------------------------------
    def check_current_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing (Kafka's ``Partition.checkCurrentLeaderEpoch``); -1 skips the check.

        Raises:
            FencedLeaderEpochError: the requester's epoch is older than ours.
            UnknownLeaderEpochError: it is newer (our metadata lags).
        """
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"leader epoch {current_leader_epoch} is older than {self.leader_epoch} for "
                f"{self.topic}-{self.partition}"
            )
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"leader epoch {current_leader_epoch} is newer than {self.leader_epoch} for "
                f"{self.topic}-{self.partition}"
            )

    def check_leader(self, current_leader_epoch: int = -1) -> None:
        """Raise unless this broker leads the partition in ``current_leader_epoch`` (-1: any).

        Raises:
            FencedLeaderEpochError / UnknownLeaderEpochError / NotLeaderOrFollowerError.
        """
        self.check_current_leader_epoch(current_leader_epoch)
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"Broker {self.local_broker_id} is not the leader of {self.topic}-{self.partition} "
                f"(leader {self.leader_id}, epoch {self.leader_epoch})"
            )

    # -- leader: appends and the high watermark ----------------------------------------------
    def append_records_to_leader(
        self,
        batch: bytearray | memoryview,
        required_acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> LogAppendInfo:
        """Append one validated batch as leader in the current epoch (Kafka's
        ``appendRecordsToLeader``); ``acks=-1`` with the ISR below ``effective_min_isr`` is
        refused before anything is written. Advances the HW (an ISR of just the leader).
        ``origin`` selects the producer-state checks (coordinators may append markers).

        Raises:
            NotLeaderOrFollowerError, NotEnoughReplicasError, errors of the log append.
        """
        self.check_leader()
        min_isr = self.effective_min_isr
        if required_acks == -1 and len(self.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {sorted(self.isr)} is insufficient to satisfy the min.isr "
                f"requirement of {min_isr} for partition {self.topic}-{self.partition}"
            )
        info = self.log.append_as_leader(batch, self.leader_epoch, origin)
        self.maybe_increment_leader_hw(self.time_ms())
        if self.isr_watcher is not None and len(self.isr) > 1:
            self.isr_watcher(self)
        return info

    def maybe_increment_leader_hw(self, now_ms: int | None = None) -> bool:
        """Advance the HW to the smallest LEO among the maximal ISR and the caught-up,
        ISR-eligible followers, never backwards, and not at all while the ISR is below
        ``effective_min_isr`` (Kafka 3.7+, KAFKA-15583). Returns True if it moved."""
        if not self.is_leader:
            return False
        if len(self.isr) < self.effective_min_isr:
            return False
        now = self.time_ms() if now_ms is None else now_ms
        log = self.log
        leo = log.log_end_offset
        new_hw = leo
        maximal = self.maximal_isr
        for broker_id, replica in self.remote_replicas.items():
            if replica.log_end_offset < new_hw and (
                broker_id in maximal
                or (
                    replica.is_caught_up(leo, now, self.replica_lag_time_max_ms)
                    and self.isr_eligible(broker_id)
                )
            ):
                new_hw = replica.log_end_offset
        old_hw = log.high_watermark
        if new_hw > old_hw:
            log.update_high_watermark(new_hw)
            return log.high_watermark > old_hw
        return False

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """(done, error) for a DelayedProduce waiting for ``required_offset`` (Kafka's
        ``checkEnoughReplicasReachOffset``): done with NONE once the HW reaches it and the
        maximal ISR has at least ``effective_min_isr`` members, NOT_ENOUGH_REPLICAS_AFTER_APPEND
        if it reached it with fewer, NOT_LEADER_OR_FOLLOWER if no longer leader."""
        if not self.is_leader:
            return True, ErrorCode.not_leader_or_follower
        if self.log.high_watermark >= required_offset:
            if self.effective_min_isr <= len(self.maximal_isr):
                return True, ErrorCode.none
            return True, ErrorCode.not_enough_replicas_after_append
        return False, ErrorCode.none

    # -- leader: followers ---------------------------------------------------------------------
    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int, now_ms: int | None = None
    ) -> bool:
        """Record a fetch by follower ``replica_id`` at ``fetch_offset`` and advance the HW.
        Returns True if the HW moved.

        Raises:
            NotLeaderOrFollowerError: ``replica_id`` is not a replica of this partition.
        """
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            raise NotLeaderOrFollowerError(
                f"Broker {replica_id} is not a follower of {self.topic}-{self.partition} "
                f"(replicas {list(self.replicas)})"
            )
        now = self.time_ms() if now_ms is None else now_ms
        old_leo = replica.log_end_offset
        replica.update_fetch_state(fetch_offset, log_start_offset, now, self.log.log_end_offset)
        if self.isr_watcher is not None and fetch_offset < self.log.log_end_offset:
            self.isr_watcher(self)
        if replica.log_end_offset != old_leo or replica_id not in self.isr:
            return self.maybe_increment_leader_hw(now)
        return False

    def isr_expansion_candidate(self, replica_id: int) -> bool:
        """Should ``replica_id`` be added to the ISR now (Kafka's ``maybeExpandIsr`` +
        ``isFollowerInSync``): not in it, no ISR change in flight, ISR-eligible, and its LEO is
        at least the HW and the start offset of the current leader epoch."""
        if not self.is_leader or self.pending_isr is not None or replica_id in self.isr:
            return False
        replica = self.remote_replicas.get(replica_id)
        if replica is None or self.leader_epoch_start_offset is None:
            return False
        leo = replica.log_end_offset
        return (
            leo >= self.log.high_watermark
            and leo >= self.leader_epoch_start_offset
            and self.isr_eligible(replica_id)
        )

    def isr_settled(self) -> bool:
        """True when ISR expiration has nothing to watch here: not the leader, or the ISR is
        every replica, none of it in flight, and every follower in it at the log end offset
        (it stays caught up until the log grows)."""
        if not self.is_leader:
            return True
        if self.pending_isr is not None or len(self.isr) < len(self.replicas):
            return False
        leo = self.log.log_end_offset
        return all(r.log_end_offset == leo for b, r in self.remote_replicas.items() if b in self.isr)

    def out_of_sync_replicas(self, now_ms: int | None = None) -> list[int]:
        """Followers in the ISR that are not caught up within ``replica.lag.time.max.ms``
        (Kafka's ``getOutOfSyncReplicas``)."""
        if not self.is_leader or self.pending_isr is not None:
            return []
        now = self.time_ms() if now_ms is None else now_ms
        leo = self.log.log_end_offset
        out = []
        for broker_id in self.isr:
            replica = self.remote_replicas.get(broker_id)
            if replica is not None and not replica.is_caught_up(leo, now, self.replica_lag_time_max_ms):
                out.append(broker_id)
        return out

    # -- reads -----------------------------------------------------------------------------
    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        is_follower: bool,
        current_leader_epoch: int = -1,
        last_fetched_epoch: int = -1,
        min_one_message: bool = True,
        isolation_level: int = 0,
        defer_above: int | None = None,
        fetch_only_from_leader: bool = True,
    ) -> LogReadResult:
        """Read as leader (Kafka's ``Partition.fetchRecords`` / ``readRecords``): followers up
        to the LEO, consumers up to the HW, or with ``isolation_level`` 1 (read_committed) up to
        the last stable offset with the aborted transactions of the range read
        (``FetchIsolation.TXN_COMMITTED``). With ``last_fetched_epoch`` (Fetch v12+) a
        divergence from this log returns no records and the ``diverging_epoch`` to truncate to.
        ``fetch_only_from_leader`` False (a consumer's fetch with KIP-392 client metadata) reads
        this replica whether it leads or follows, up to its own HW / LSO.

        Raises:
            NotLeaderOrFollowerError, FencedLeaderEpochError, UnknownLeaderEpochError,
            OffsetOutOfRangeError.
        """
        if fetch_only_from_leader:
            self.check_leader(current_leader_epoch)
        else:
            self.check_current_leader_epoch(current_leader_epoch)
        log = self.log
        hw = log.high_watermark
        lso = log.last_stable_offset
        if last_fetched_epoch >= 0:
            epoch, end_offset = log.leader_epoch_cache.end_offset_for(last_fetched_epoch, log.log_end_offset)
            if epoch == UNDEFINED_EPOCH or end_offset == UNDEFINED_EPOCH_OFFSET:
                raise OffsetOutOfRangeError(
                    f"Could not determine the end offset of the last fetched epoch {last_fetched_epoch} "
                    f"of {self.topic}-{self.partition}"
                )
            if fetch_offset < log.log_start_offset:
                raise OffsetOutOfRangeError(
                    f"{self.topic}-{self.partition}: fetch offset {fetch_offset} is below the log start "
                    f"offset {log.log_start_offset}"
                )
            if epoch < last_fetched_epoch or end_offset < fetch_offset:
                return LogReadResult(
                    FetchDataInfo(b""), hw, log.log_start_offset, log.log_end_offset, (epoch, end_offset), lso
                )
        if is_follower:
            info = log.read(fetch_offset, max_bytes, None, min_one_message, defer_above=defer_above)
        elif isolation_level == 1:
            info = log.read(
                fetch_offset,
                max_bytes,
                lso,
                min_one_message,
                include_aborted_txns=True,
                defer_above=defer_above,
            )
        else:
            info = log.read(fetch_offset, max_bytes, hw, min_one_message, defer_above=defer_above)
        return LogReadResult(info, hw, log.log_start_offset, log.log_end_offset, None, lso)

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for ``leader_epoch`` from the leader epoch cache (Kafka's
        ``Partition.lastOffsetForLeaderEpoch``, served by the leader only).

        Raises:
            NotLeaderOrFollowerError, FencedLeaderEpochError, UnknownLeaderEpochError.
        """
        self.check_leader(current_leader_epoch)
        return self.log.leader_epoch_cache.end_offset_for(leader_epoch, self.log.log_end_offset)

    # -- follower --------------------------------------------------------------------------------
    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower's HW: ``min(leader HW, own LEO)`` (never above the LEO). Returns True if
        it changed."""
        old = self.log.high_watermark
        return self.log.update_high_watermark(leader_high_watermark) != old
