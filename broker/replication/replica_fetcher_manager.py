"""``ReplicaFetcherManager``: one :class:`ReplicaFetcher` per (source broker, fetcher id)
(Kafka's ``AbstractFetcherManager.addFetcherForPartitions``).

``fetcher id = abs(31 * topic.hashCode() + partition) % num.replica.fetchers`` (Java's
``String.hashCode`` with int32 overflow), so with the default ``num.replica.fetchers=1`` there is
one fetcher per source broker, each fetching all partitions led there in one request per round.
Fetchers left with no partitions are shut down (``shutdownIdleFetcherThreads``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.replication.replica_fetcher import FetcherSettings, PartitionFetchState, ReplicaFetcher
from spark_kafkalite.protocol.types import TopicPartitionKey

if TYPE_CHECKING:
    from broker.cluster.partition import Partition

__all__ = ["ReplicaFetcherManager", "java_string_hash", "fetcher_id_for"]

logger = logging.getLogger(__name__)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, int32 arithmetic)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return _int32(h)


def fetcher_id_for(topic: str, partition: int, num_fetchers: int) -> int:
    """Kafka's ``AbstractFetcherManager.getFetcherId``."""
    return abs(_int32(31 * java_string_hash(topic) + partition)) % max(num_fetchers, 1)


class ReplicaFetcherManager:
    """Owns the replica fetchers of this broker.

    Args:
        node_id: this broker.
        num_fetchers: ``num.replica.fetchers``.
        settings: fetch configs.
        endpoint: ``fn(broker_id) -> (host, port) | None`` from the current metadata.
        partition_lookup: ``fn(key) -> Partition | None``.
        on_appended: passed to the fetchers.
    """

    def __init__(
        self,
        node_id: int,
        num_fetchers: int,
        settings: FetcherSettings,
        endpoint: Callable[[int], tuple[str, int] | None],
        partition_lookup: Callable[[TopicPartitionKey], Partition | None],
        on_appended: Callable[[Partition], None] | None = None,
    ) -> None:
        self.node_id = node_id
        self.num_fetchers = max(num_fetchers, 1)
        self.settings = settings
        self._endpoint = endpoint
        self._lookup = partition_lookup
        self._on_appended = on_appended
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._fetcher_of: dict[TopicPartitionKey, tuple[int, int]] = {}

    def add_fetcher_for_partitions(self, partitions: dict[TopicPartitionKey, tuple[int, int]]) -> None:
        """Fetch ``{key: (leader_id, leader_epoch)}`` from their leaders (moving a partition
        away from a fetcher of another leader first). Must run on the event loop."""
        by_fetcher: dict[tuple[int, int], dict[TopicPartitionKey, PartitionFetchState]] = {}
        for key, (leader_id, leader_epoch) in partitions.items():
            fetcher_key = (leader_id, fetcher_id_for(key[0], key[1], self.num_fetchers))
            old = self._fetcher_of.get(key)
            if old is not None and old != fetcher_key and old in self.fetchers:
                self.fetchers[old].remove_partitions([key])
            by_fetcher.setdefault(fetcher_key, {})[key] = PartitionFetchState(key[0], key[1], leader_epoch)
            self._fetcher_of[key] = fetcher_key
        for fetcher_key, states in by_fetcher.items():
            fetcher = self.fetchers.get(fetcher_key)
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    self.node_id,
                    fetcher_key[0],
                    fetcher_key[1],
                    self._endpoint,
                    self._lookup,
                    self.settings,
                    self._on_appended,
                )
                self.fetchers[fetcher_key] = fetcher
                fetcher.start()
            fetcher.add_partitions(states)
            logger.info(
                "added fetcher to broker %d (fetcher %d) for %s",
                fetcher_key[0],
                fetcher_key[1],
                sorted(f"{t}-{p}@{s.leader_epoch}" for (t, p), s in states.items()),
            )

    def remove_fetcher_for_partitions(self, keys: set[TopicPartitionKey] | list[TopicPartitionKey]) -> None:
        for key in keys:
            fetcher_key = self._fetcher_of.pop(key, None)
            if fetcher_key is not None and fetcher_key in self.fetchers:
                self.fetchers[fetcher_key].remove_partitions([key])

    def fetching(self, key: TopicPartitionKey) -> tuple[int, int] | None:
        """(source broker, fetcher id) fetching ``key``, or None."""
        return self._fetcher_of.get(key)

    async def shutdown_idle_fetchers(self) -> None:
        """Kafka's ``shutdownIdleFetcherThreads``. The idle fetchers are taken out of
        :attr:`fetchers` in one step with no ``await`` in between (Kafka holds
        ``fetcherThreadMap``'s lock): two interleaved runs once both saw the same idle fetcher
        and the second ``del`` raised ``KeyError`` (issue #14); a fetcher given partitions
        meanwhile is a new one."""
        idle = [(key, fetcher) for key, fetcher in self.fetchers.items() if not fetcher.partitions]
        for key, _fetcher in idle:
            del self.fetchers[key]
        for _key, fetcher in idle:
            await fetcher.shutdown()

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self._fetcher_of.clear()
        for fetcher in fetchers:
            await fetcher.shutdown()
