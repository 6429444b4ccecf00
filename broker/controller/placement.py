"""Replica placement for new partitions (Kafka's rack-unaware assignment,
``AdminUtils.assignReplicasToBrokersRackUnaware``; KRaft's ``StripedReplicaPlacer`` gives the same
spread without racks).

Partition ``p``'s first replica is ``brokers[(p + start_index) % n]``; the followers are shifted by
``replica_shift``, which grows by one every ``n`` partitions, so leaders and followers are spread
evenly and the same pairs of brokers are not always together. ``start_index`` and
``replica_shift`` are random in Kafka; here the caller draws them (the controller proposes them
with the command so that every Raft node applies the same placement).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["assign_replicas", "random_placement_seed"]


def random_placement_seed() -> int:
    """A seed for :func:`assign_replicas` (drawn by the proposer, never inside Raft apply)."""
    return random.getrandbits(31)


def assign_replicas(
    brokers: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    *,
    seed: int,
    start_partition: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists for partitions ``start_partition .. start_partition + num_partitions - 1``.

    Args:
        brokers: the usable (live) broker ids; sorted here.
        num_partitions: how many partitions to place (>= 0).
        replication_factor: replicas per partition, 1 <= rf <= len(brokers).
        seed: chooses ``start_index`` and the initial ``replica_shift`` deterministically.
        start_partition: index of the first new partition (CreatePartitions).

    Raises:
        ValueError: no brokers, or a replication factor out of range.
    """
    ordered = sorted(brokers)
    n = len(ordered)
    if n == 0:
        raise ValueError("no brokers to place replicas on")
    if not 1 <= replication_factor <= n:
        raise ValueError(f"replication factor {replication_factor} not in 1..{n}")
    rng = random.Random(seed)
    start_index = rng.randrange(n)
    replica_shift = rng.randrange(n)
    out: list[tuple[int, ...]] = []
    for partition in range(start_partition, start_partition + num_partitions):
        if partition > 0 and partition % n == 0:
            replica_shift += 1
        first = (partition + start_index) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            shift = 1 + (replica_shift + j) % (n - 1)
            replicas.append(ordered[(first + shift) % n])
        out.append(tuple(replicas))
    return out
