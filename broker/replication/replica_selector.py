"""KIP-392 fetch from the closest replica: the replica a consumer should read a partition from.

A consumer that names its rack (Fetch v11+ ``rack_id``, the client's ``client.rack``) and
fetches from the leader may be told to read from another replica instead: the leader answers
with no records and ``preferred_read_replica`` set, and the consumer fetches from that replica
until its metadata ages out (``metadata.max.age.ms``) or the replica answers with an error.

* Which replicas qualify (Kafka's ``ReplicaManager.findPreferredReadReplica``): the leader, and
  each follower that is in the ISR, registered (it has an endpoint) and holds the fetch offset
  (``log_start_offset <= fetch_offset <= log_end_offset``). Only consumers' fetches get a
  preferred replica, never followers'.
* Which one is picked (``org.apache.kafka.common.replica.RackAwareReplicaSelector``): with no
  client rack, or no qualifying replica in the client's rack, or the leader in it: the leader;
  else the replica of the client's rack with the highest log end offset, ties going to the one
  caught up most recently (``ReplicaView.comparator``). The leader is never sent as a preferred
  replica (-1 means "keep reading here").
* ``replica.selector.class`` unset (Kafka's default) keeps every consumer on the leader; the
  rack-aware selector is its only other value (``broker/server_configs.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.cluster.partition import Partition

__all__ = [
    "ReplicaView",
    "preferred_read_replica",
    "rack_aware_select",
]


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica (Kafka's ``ReplicaView``): its broker, that broker's rack
    (``broker.rack``, None when unset), its log end offset, and how long ago (ms) it was last
    caught up with the leader (0 for the leader itself)."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


def rack_aware_select(client_rack: str, leader: ReplicaView, replicas: Sequence[ReplicaView]) -> ReplicaView:
    """The replica a consumer in ``client_rack`` should read from, among ``replicas`` (which
    include ``leader``), as Kafka's ``RackAwareReplicaSelector.select`` picks it."""
    if not client_rack:
        return leader
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack or leader in same_rack:
        return leader
    # ReplicaView.comparator: highest log end offset, then the most recently caught up
    return max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms))


def preferred_read_replica(
    partition: Partition,
    client_rack: str,
    fetch_offset: int,
    rack_of: Callable[[int], tuple[bool, str | None]],
    now_ms: int,
) -> int | None:
    """The broker a consumer should read ``partition`` (led here) from, or None to read from
    the leader (Kafka's ``ReplicaManager.findPreferredReadReplica`` with the rack-aware
    selector). ``rack_of(broker_id) -> (registered, rack)``: a broker without a registration
    has no endpoint a client could use and is left out."""
    leader = ReplicaView(
        partition.local_broker_id, rack_of(partition.local_broker_id)[1], partition.log.log_end_offset, 0
    )
    candidates = [leader]
    isr = partition.isr
    for broker_id, replica in partition.remote_replicas.items():
        if broker_id not in isr or not replica.log_start_offset <= fetch_offset <= replica.log_end_offset:
            continue
        registered, rack = rack_of(broker_id)
        if registered:
            candidates.append(
                ReplicaView(broker_id, rack, replica.log_end_offset, now_ms - replica.last_caught_up_time_ms)
            )
    chosen = rack_aware_select(client_rack, leader, candidates)
    return None if chosen is leader else chosen.broker_id
