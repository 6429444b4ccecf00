"""Per-partition sequence bookkeeping of an idempotent or transactional producer (Java
``TxnPartitionMap`` / ``TxnPartitionEntry`` and ``ProducerIdAndEpoch``; KIP-98), used by the
``TransactionManager``."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_kafkalite.client.producer.producer_batch import ProducerBatch

__all__ = [
    "ProducerIdAndEpoch",
    "TxnPartitionEntry",
    "increment_sequence",
    "NONE",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "MAX_EPOCH",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_INT32_MAX = 2**31 - 1
MAX_EPOCH = 2**15 - 1


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0


NONE = ProducerIdAndEpoch()


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past ``Int.MAX_VALUE`` to 0 (Java ``incrementSequence``)."""
    if sequence > _INT32_MAX - increment:
        return increment - (_INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass(slots=True)
class TxnPartitionEntry:
    """One partition's sequence state (Java ``TxnPartitionEntry``): the producer id/epoch its
    sequences belong to, the next sequence, the last acknowledged one and the batches in flight
    in sequence order."""

    producer_id_and_epoch: ProducerIdAndEpoch
    next_sequence: int = 0
    last_acked_sequence: int = -1
    in_flight: list[ProducerBatch] = field(default_factory=list)  # sorted by base_sequence

    def add(self, batch: ProducerBatch) -> None:
        keys = [b.base_sequence for b in self.in_flight]
        self.in_flight.insert(bisect.bisect_right(keys, batch.base_sequence), batch)

    def remove(self, batch: ProducerBatch) -> None:
        try:
            self.in_flight.remove(batch)
        except ValueError:
            pass
