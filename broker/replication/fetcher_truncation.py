"""How a follower finds where its log diverges from the leader's and truncates it (Kafka's
``AbstractFetcherThread.truncateOnFetchResponse`` / ``getOffsetTruncationState``, KIP-320 and
KIP-595), and the ListOffsets it sends the leader when its fetch offset is out of range
(``RemoteLeaderEndPoint.fetchLatestOffset`` / ``fetchEarliestOffset``, used by
``fetchOffsetAndTruncate``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from spark_kafkalite.protocol.api_keys import ApiKey, request_class
from spark_kafkalite.protocol.entities import build, nested
from spark_kafkalite.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.cluster.partition import Partition
    from broker.log.unified_log import UnifiedLog
    from broker.replication.broker_connection import BrokerConnection
    from broker.replication.replica_fetcher import PartitionFetchState

__all__ = [
    "truncation_offset",
    "truncate_on_diverging",
    "fetch_leader_offset",
    "LATEST_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
]

logger = logging.getLogger(__name__)

LIST_OFFSETS_VERSION = 7
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def truncation_offset(log: UnifiedLog, leader_epoch: int, leader_end_offset: int) -> tuple[int | None, bool]:
    """Where to truncate given the leader's (epoch, end offset) for our last epoch (Kafka's
    ``AbstractFetcherThread.getOffsetTruncationState``). Returns (offset or None for "no
    truncation", complete); when not complete, the next fetch re-checks with our new last epoch."""
    leo = log.log_end_offset
    if leader_end_offset < 0:
        return None, True
    if leader_epoch < 0:
        return min(leader_end_offset, leo), True
    follower_epoch, follower_end = log.leader_epoch_cache.end_offset_for(leader_epoch, leo)
    if follower_end < 0:
        return min(leader_end_offset, leo), True
    if follower_epoch != leader_epoch:
        return min(follower_end, leo), False
    return min(leader_end_offset, follower_end, leo), True


def truncate_on_diverging(
    partition: Partition,
    epoch: int,
    end_offset: int,
    state: PartitionFetchState | None = None,
    *,
    name: str,
    backoff_ms: int,
) -> None:
    """Kafka's ``AbstractFetcherThread.truncateOnFetchResponse``: truncate to the offset
    ``truncation_offset`` gives. Truncation at or past the log end removes no record but
    still drops leader-epoch entries starting at the log end (``UnifiedLog.truncateTo``),
    so the next fetch carries the epoch the leader knows.

    The same answer twice for an unchanged log (log end, last epoch) means this did not
    help: never loop silently. As ``AbstractFetcherThread`` does when the divergence point
    cannot be determined, fall back to truncating to the high watermark, log an error and
    back the partition off (``backoff_ms``: ``replica.fetch.backoff.ms``). ``name`` names the
    fetcher in the log. The caller wakes what waits on the follower (its log changed)."""
    log = partition.log
    answer = (epoch, end_offset, log.log_end_offset, log.leader_epoch_cache.latest_epoch)
    if state is not None and state.last_diverging == answer:
        target = min(log.high_watermark, end_offset) if end_offset >= 0 else log.high_watermark
        logger.error(
            "%s: %s-%d: the leader answered diverging epoch (%d, %d) twice for LEO %d and last "
            "epoch %s (epoch cache %s); falling back to truncating to the high watermark %d and "
            "backing off %d ms",
            name,
            partition.topic,
            partition.partition,
            epoch,
            end_offset,
            log.log_end_offset,
            answer[3],
            log.leader_epoch_cache.entries()[-3:],
            target,
            backoff_ms,
        )
        state.diverging_repeats += 1
        state.last_diverging = None
        state.delayed_until = time.monotonic() + backoff_ms / 1000
        log.truncate_to(max(target, log.log_start_offset))
        return
    offset, complete = truncation_offset(log, epoch, end_offset)
    if offset is None or offset >= log.log_end_offset:
        # Kafka calls truncate here too (offset = the fetch offset when the leader's end
        # offset is undefined): it drops an empty trailing epoch (see above).
        log.truncate_to(log.log_end_offset)
        logger.info(
            "%s: %s-%d: diverging epoch (%d, %d) removes no record at LEO %d (epoch cache now ends %s)",
            name,
            partition.topic,
            partition.partition,
            epoch,
            end_offset,
            log.log_end_offset,
            log.leader_epoch_cache.entries()[-2:],
        )
    else:
        logger.warning(
            "%s: %s-%d: truncating from %d to %d (leader's end of epoch %d is %d%s)",
            name,
            partition.topic,
            partition.partition,
            log.log_end_offset,
            offset,
            epoch,
            end_offset,
            "" if complete else "; will check again",
        )
        log.truncate_to(offset)
    if state is not None:
        state.last_diverging = (
            epoch,
            end_offset,
            log.log_end_offset,
            log.leader_epoch_cache.latest_epoch,
        )


async def fetch_leader_offset(
    connection: BrokerConnection,
    node_id: int,
    partition: Partition,
    leader_epoch: int,
    timestamp: int,
    *,
    name: str,
) -> int | None:
    """ListOffsets v7 to the leader for one partition (Kafka's
    ``RemoteLeaderEndPoint.fetchLatestOffset`` / ``fetchEarliestOffset``): the offset for
    ``timestamp`` (:data:`LATEST_TIMESTAMP`, :data:`EARLIEST_TIMESTAMP`), or None when the
    leader answers an error (logged). ``name`` names the fetcher in the log.

    Raises:
        BrokerConnectionError: the request failed.
    """
    cls = request_class(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION)
    topic_cls = nested(cls, "ListOffsetsTopic")
    part_cls = nested(cls, "ListOffsetsPartition")
    request = build(
        cls,
        replica_id=node_id,
        isolation_level=0,
        topics=(
            topic_cls(
                name=partition.topic,
                partitions=(
                    build(
                        part_cls,
                        partition_index=partition.partition,
                        current_leader_epoch=leader_epoch,
                        timestamp=timestamp,
                    ),
                ),
            ),
        ),
    )
    response = await connection.send(request)
    for t in response.topics:
        for p in t.partitions:
            if p.error_code == ErrorCode.none:
                return int(p.offset)
            logger.info(
                "%s: ListOffsets %s-%d: %s",
                name,
                t.name,
                p.partition_index,
                ErrorCode(p.error_code).name,
            )
    return None
