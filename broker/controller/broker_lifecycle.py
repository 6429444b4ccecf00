"""Broker registration, heartbeats, fencing and controlled shutdown as pure record builders
(Kafka's ``ClusterControlManager`` + ``BrokerHeartbeatManager`` + the fencing half of
``ReplicationControlManager``, KIP-631).

* A broker registers with its endpoints and gets a **broker epoch** (the metadata offset of its
  ``RegisterBrokerRecord``). It registers *fenced*. Re-registering (a restart) first fences the
  previous incarnation, moving its leaderships away.
* Heartbeats carry the broker's metadata offset; a fenced broker whose offset has reached its
  registration is caught up and is unfenced (then leaderless partitions it can lead get a leader).
* The active controller fences a broker whose heartbeats lapse for ``broker.session.timeout.ms``
  (timing lives in :mod:`broker.controller.quorum_controller`; here only the records): it leaves
  every ISR (unless it is the last member) and loses its leaderships.
* Controlled shutdown (a heartbeat with ``want_shutdown``) does the same at once, so leadership
  moves before the process exits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from broker.controller.election import Election, change_partition, remove_from_isr
from broker.controller.metadata_image import (
    BrokerRegistrationChangeRecord,
    MetadataImage,
    MetadataRecord,
    PartitionRecord,
    PartitionRegistration,
    RegisterBrokerRecord,
)

__all__ = [
    "partition_record",
    "register_broker_records",
    "fence_broker_records",
    "unfence_broker_records",
    "elect_leaderless_records",
    "alive_after",
]

UncleanLookup = Callable[[str], bool]


def partition_record(image: MetadataImage, topic: str, reg: PartitionRegistration) -> PartitionRecord:
    """The record that sets ``reg`` (KRaft's ``PartitionChangeRecord``, sent whole here)."""
    topic_image = image.topics[topic]
    return PartitionRecord(
        topic_image.topic_id,
        reg.partition,
        reg.replicas,
        reg.isr,
        reg.leader,
        reg.leader_epoch,
        reg.partition_epoch,
    )


def alive_after(image: MetadataImage, changes: Mapping[int, bool]) -> Callable[[int], bool]:
    """Liveness predicate of ``image`` with ``changes`` (broker -> fenced) applied."""

    def alive(b: int) -> bool:
        if b in changes:
            return not changes[b]
        return image.is_alive(b)

    return alive


def fence_broker_records(image: MetadataImage, node_id: int, unclean: UncleanLookup) -> list[MetadataRecord]:
    """Fence ``node_id`` (if registered and unfenced) and move its leaderships / ISR slots away.
    Empty when it is already fenced or unknown."""
    broker = image.brokers.get(node_id)
    if broker is None or broker.fenced:
        return []
    records: list[MetadataRecord] = [BrokerRegistrationChangeRecord(node_id, broker.epoch, True)]
    alive = alive_after(image, {node_id: True})
    for name in sorted(image.topics):  # sorted: the same record order on every node
        unclean_enabled = unclean(name)
        for reg in image.topics[name].partitions.values():
            new = remove_from_isr(reg, node_id, alive, unclean_enabled=unclean_enabled)
            if new is not None:
                records.append(partition_record(image, name, new))
    return records


def register_broker_records(
    image: MetadataImage,
    node_id: int,
    endpoints: Mapping[str, tuple[str, int]],
    rack: str | None,
    unclean: UncleanLookup,
) -> tuple[list[MetadataRecord], int]:
    """Records registering ``node_id`` (fenced) and its new broker epoch (the offset of the
    registration record). A live previous incarnation is fenced first."""
    records = fence_broker_records(image, node_id, unclean)
    epoch = image.offset + len(records)
    records.append(RegisterBrokerRecord(node_id, dict(endpoints), rack, epoch, True))
    return records, epoch


def elect_leaderless_records(
    image: MetadataImage, alive: Callable[[int], bool], unclean: UncleanLookup
) -> list[MetadataRecord]:
    """Elect a leader for every partition without one that now has an electable replica
    (``ReplicationControlManager.handleBrokerUnfenced``)."""
    records: list[MetadataRecord] = []
    for name in sorted(image.topics):
        unclean_enabled = unclean(name)
        for reg in image.topics[name].partitions.values():
            if reg.leader >= 0:
                continue
            new = change_partition(reg, alive, election=Election.ONLINE, unclean_enabled=unclean_enabled)
            if new is not None and new.leader >= 0:
                records.append(partition_record(image, name, new))
    return records


def unfence_broker_records(
    image: MetadataImage, node_id: int, unclean: UncleanLookup
) -> list[MetadataRecord]:
    """Unfence ``node_id`` and elect leaders for leaderless partitions it can lead."""
    broker = image.brokers.get(node_id)
    if broker is None or not broker.fenced:
        return []
    records: list[MetadataRecord] = [BrokerRegistrationChangeRecord(node_id, broker.epoch, False)]
    records.extend(elect_leaderless_records(image, alive_after(image, {node_id: False}), unclean))
    return records
