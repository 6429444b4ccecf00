"""Partition leader election and ISR changes (Kafka's ``PartitionChangeBuilder``, pre-ELR).

Pure functions over a :class:`PartitionRegistration` and a liveness predicate:

* ONLINE election: keep the current leader if it is alive and in the target ISR, else the first
  replica *in assignment order* that is in the target ISR and alive.
* PREFERRED election: ``replicas[0]`` if it is in the target ISR and alive, else as ONLINE.
* UNCLEAN: when no ISR member is electable and unclean election is enabled, the first alive
  replica in assignment order; the ISR becomes just that leader (acknowledged records may be lost).
* No electable replica: leader -1 (the partition is offline until an ISR member returns).

Every leader change bumps the leader epoch; every change of leader or ISR bumps the partition
epoch. When a broker is removed from the ISR and it was the last member, the ISR keeps it (KRaft
without ELR does the same), so that it is the one elected when it comes back.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import replace

from broker.controller.metadata_image import PartitionRegistration

__all__ = ["Election", "NO_LEADER", "change_partition", "remove_from_isr"]

NO_LEADER = -1


class Election(enum.IntEnum):
    """ElectLeaders ``ElectionType`` ids (0 = preferred, 1 = unclean) plus ONLINE (ours)."""

    PREFERRED = 0
    UNCLEAN = 1
    ONLINE = 2


def _elect(
    reg: PartitionRegistration,
    isr: Sequence[int],
    alive: Callable[[int], bool],
    election: Election,
    unclean_enabled: bool,
    not_leader: int | None,
) -> tuple[int, tuple[int, ...]]:
    def eligible(b: int) -> bool:
        return alive(b) and b != not_leader

    if (
        election is Election.PREFERRED
        and reg.replicas
        and reg.replicas[0] in isr
        and eligible(reg.replicas[0])
    ):
        return reg.replicas[0], tuple(isr)
    if reg.leader != NO_LEADER and reg.leader in isr and eligible(reg.leader):
        return reg.leader, tuple(isr)
    for b in reg.replicas:
        if b in isr and eligible(b):
            return b, tuple(isr)
    if unclean_enabled or election is Election.UNCLEAN:
        for b in reg.replicas:
            if eligible(b):
                return b, (b,)
    return NO_LEADER, tuple(isr)


def change_partition(
    reg: PartitionRegistration,
    alive: Callable[[int], bool],
    *,
    target_isr: Sequence[int] | None = None,
    election: Election = Election.ONLINE,
    unclean_enabled: bool = False,
    not_leader: int | None = None,
) -> PartitionRegistration | None:
    """The new registration after an ISR change and/or an election, or None when nothing changes.

    Args:
        reg: the current registration.
        alive: whether a broker is registered and unfenced.
        target_isr: the wanted ISR (default: the current one); order is kept as given.
        election: ONLINE (keep a valid leader), PREFERRED or UNCLEAN.
        unclean_enabled: ``unclean.leader.election.enable`` of the topic.
        not_leader: a broker that must not stay / become leader (controlled shutdown).
    """
    isr = tuple(reg.isr if target_isr is None else target_isr)
    leader, new_isr = _elect(reg, isr, alive, election, unclean_enabled, not_leader)
    if leader == reg.leader and new_isr == reg.isr:
        return None
    leader_epoch = reg.leader_epoch + 1 if leader != reg.leader else reg.leader_epoch
    return replace(
        reg, leader=leader, isr=new_isr, leader_epoch=leader_epoch, partition_epoch=reg.partition_epoch + 1
    )


def remove_from_isr(
    reg: PartitionRegistration,
    broker: int,
    alive: Callable[[int], bool],
    *,
    unclean_enabled: bool = False,
) -> PartitionRegistration | None:
    """Take ``broker`` (being fenced or shut down) out of the ISR and out of leadership
    (``ReplicationControlManager.generateLeaderAndIsrUpdates``); None when nothing changes. The
    last ISR member stays in the ISR (the partition then has no leader)."""
    if broker not in reg.isr and reg.leader != broker:
        return None
    isr = tuple(b for b in reg.isr if b != broker)
    if not isr:
        isr = reg.isr
    return change_partition(reg, alive, target_isr=isr, unclean_enabled=unclean_enabled, not_leader=broker)
