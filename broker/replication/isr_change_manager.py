"""ISR changes requested by this broker's leaders and the watch that drives them: Kafka's
``ReplicaManager`` ``isr-expiration`` task (``maybeShrinkIsr``), the AlterPartition submission of
``Partition.maybeExpandIsr`` / ``maybeShrinkIsr`` (``Partition.submitAlterPartition``, KIP-497)
with its retry backoff, and the under-replicated-partition warning.

A round costs in proportion to the partitions whose ISR or log changed (the watch), not to the
partitions hosted: a partition enters the watch through ``Partition.isr_watcher`` and leaves it
once ``Partition.isr_settled``. The controller's answer comes back as committed metadata
(``ReplicaManager.apply_delta``); this module only asks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broker.cluster.partition import Partition
from broker.metrics.meters import IsrChangeMeters
from spark_kafkalite.protocol.errors import ErrorCode
from spark_kafkalite.protocol.types import TopicPartitionKey

__all__ = ["IsrChangeManager"]

logger = logging.getLogger(__name__)

_ISR_RETRY_BACKOFF_MS = 200


class IsrChangeManager:
    """The ISR watch, AlterPartition requests and under-replicated warnings of the partitions
    led here.

    Args:
        node_id: this broker.
        replica_lag_time_max_ms: ``replica.lag.time.max.ms``: a follower not caught up for this
            long leaves the ISR; the expiration round runs every half of it.
        partition: ``fn(key) -> Partition | None``, the partitions hosted here.
        image: ``fn() -> MetadataImage`` (this broker's epoch for AlterPartition).
        controller: ``fn() -> controller`` (``alter_partition`` is used when it has it).
        time_ms: the wall clock in ms.
        spawn: ``spawn(coro, name)`` runs a background task owned by the replica manager.
        on_isr_changed: ``fn(key)`` after an AlterPartition round trip (the ISR, so the high
            watermark and min.insync.replicas checks, may have changed).
        meters: IsrShrinksPerSec / IsrExpandsPerSec, marked per accepted change.

    Attributes:
        urp_warn_after_ms: an under-replicated partition led here is logged as a WARNING after
            this long, then again every this long (2 x ``replica.lag.time.max.ms``, >= 10 s).
    """

    def __init__(
        self,
        node_id: int,
        replica_lag_time_max_ms: int,
        *,
        partition: Callable[[TopicPartitionKey], Partition | None],
        image: Callable[[], Any],
        controller: Callable[[], Any],
        time_ms: Callable[[], int],
        spawn: Callable[[Any, str], None],
        on_isr_changed: Callable[[TopicPartitionKey], None],
        meters: IsrChangeMeters,
    ) -> None:
        self.node_id = node_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self._partition = partition
        self._image = image
        self._controller = controller
        self.time_ms = time_ms
        self._spawn = spawn
        self._on_isr_changed = on_isr_changed
        self._meters = meters
        self._isr_retry_at_ms: dict[TopicPartitionKey, int] = {}
        self.urp_warn_after_ms = max(2 * replica_lag_time_max_ms, 10_000)
        self._urp_since_ms: dict[TopicPartitionKey, int] = {}
        self._urp_warned_ms: dict[TopicPartitionKey, int] = {}
        self._isr_watch: set[TopicPartitionKey] = set()

    def watch(self, p: Partition) -> None:
        """Put ``p`` in the watch (``Partition.isr_watcher``: its ISR or log changed)."""
        self._isr_watch.add(p.key)

    def alter_isr(self, p: Partition, new_isr: tuple[int, ...], reason: str) -> None:
        """Ask the controller to make ``new_isr`` the ISR of ``p`` (led here) with
        AlterPartition (KIP-497; a compare-and-set on the partition epoch), in the background.
        Skipped without a controller that offers ``alter_partition``, and for
        ``_ISR_RETRY_BACKOFF_MS`` after a rejected request for the same partition."""
        # getattr: without a controller that alters partitions, no ISR change is sent
        alter = getattr(self._controller(), "alter_partition", None)
        if alter is None or p.topic_id is None:
            return
        now = self.time_ms()
        if self._isr_retry_at_ms.get(p.key, 0) > now:
            return
        p.pending_isr = new_isr
        self._spawn(
            self._send_alter_partition(alter, p, new_isr, reason), f"alter-partition-{p.topic}-{p.partition}"
        )

    async def _send_alter_partition(
        self, alter: Any, p: Partition, new_isr: tuple[int, ...], reason: str
    ) -> None:
        epoch, partition_epoch, old_isr_size = p.leader_epoch, p.partition_epoch, len(p.isr)
        broker = self._image().brokers.get(self.node_id)
        broker_epoch = broker.epoch if broker is not None else -1
        logger.info(
            "%s-%d: %s ISR %s -> %s (leader epoch %d, partition epoch %d)",
            p.topic,
            p.partition,
            reason,
            list(p.isr),
            list(new_isr),
            epoch,
            partition_epoch,
        )
        code: Any = ErrorCode.unknown_server_error
        try:
            code, _registration = await alter(
                self.node_id, broker_epoch, p.topic_id, p.partition, epoch, new_isr, partition_epoch
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - retried by the next fetch / expiration round
            logger.info("%s-%d: AlterPartition failed: %r", p.topic, p.partition, exc)
        finally:
            # Success: the committed registration was already applied (apply_delta cleared it).
            if p.pending_isr == new_isr and p.partition_epoch == partition_epoch:
                p.pending_isr = None
        if code != ErrorCode.none:
            logger.info(
                "%s-%d: AlterPartition %s -> %s", p.topic, p.partition, list(new_isr), ErrorCode(code).name
            )
            self._isr_retry_at_ms[p.key] = self.time_ms() + _ISR_RETRY_BACKOFF_MS
        else:
            self._isr_retry_at_ms.pop(p.key, None)
            self._meters.record(old_isr_size, len(new_isr))
        # The ISR (and so the HW / min.isr checks) may have changed.
        p.maybe_increment_leader_hw()
        self._on_isr_changed(p.key)

    def maybe_shrink_isr(self) -> None:
        """One ISR-expiration round (Kafka's ``maybeShrinkIsr``) over the watched partitions:
        a follower leaves the ISR only after the leader's log grew past it (or it fetched below
        the log end, or the assignment changed), each of which puts the partition in the watch."""
        now = self.time_ms()
        for key in list(self._isr_watch):
            p = self._partition(key)
            if p is None or not p.is_leader:
                continue
            out = p.out_of_sync_replicas(now)
            if out:
                new_isr = tuple(b for b in p.isr if b not in out)
                logger.info(
                    "%s-%d: followers %s not caught up within %d ms",
                    p.topic,
                    p.partition,
                    out,
                    self.replica_lag_time_max_ms,
                )
                self.alter_isr(p, new_isr, "shrink")

    def check_under_replicated(self) -> list[TopicPartitionKey]:
        """Log loudly every partition led here whose ISR has been short of its replicas for
        longer than :attr:`urp_warn_after_ms` (a follower that never heals must not go unseen:
        issue #14), again every :attr:`urp_warn_after_ms`; log when it heals. Returns the keys
        warned about in this round."""
        now = self.time_ms()
        warned: list[TopicPartitionKey] = []
        for key in list(self._isr_watch | self._urp_since_ms.keys()):
            p = self._partition(key)
            if p is None:  # no longer hosted here
                self._urp_since_ms.pop(key, None)
                self._urp_warned_ms.pop(key, None)
                continue
            if not p.is_leader or len(p.isr) >= len(p.replicas):
                if self._urp_since_ms.pop(key, None) is not None and self._urp_warned_ms.pop(key, 0):
                    logger.warning(
                        "%s-%d: under-replicated partition healed: ISR %s", key[0], key[1], list(p.isr)
                    )
                continue
            since = self._urp_since_ms.setdefault(key, now)
            last = self._urp_warned_ms.get(key)
            if now - since < self.urp_warn_after_ms or (
                last is not None and now - last < self.urp_warn_after_ms
            ):
                continue
            self._urp_warned_ms[key] = now
            warned.append(key)
            lagging = {
                b: (r.log_end_offset, r.last_caught_up_time_ms)
                for b, r in p.remote_replicas.items()
                if b not in p.isr
            }
            logger.warning(
                "%s-%d: UNDER-REPLICATED for %.1f s: ISR %s of replicas %s; leader LEO %d, out-of-sync "
                "replicas (LEO, last caught up ms ago): %s",
                key[0],
                key[1],
                (now - since) / 1000,
                list(p.isr),
                list(p.replicas),
                p.log.log_end_offset,
                {b: (leo, now - t if t else None) for b, (leo, t) in lagging.items()},
            )
        return warned

    async def run(self) -> None:
        """The ``isr-expiration`` task: every ``replica.lag.time.max.ms / 2`` (at least 50 ms)
        a shrink round, an under-replicated check and a pruning of the watch. Runs until
        cancelled."""
        interval_s = max(self.replica_lag_time_max_ms / 2, 50) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.maybe_shrink_isr()
                self.check_under_replicated()
                self.forget_settled()
            except Exception:
                logger.exception("ISR expiration failed")

    def forget_settled(self) -> None:
        """Drop from the ISR watch the partitions with nothing left to watch
        (``Partition.isr_settled``); a change puts them back."""
        for key in list(self._isr_watch):
            p = self._partition(key)
            if p is None or p.isr_settled():
                self._isr_watch.discard(key)
