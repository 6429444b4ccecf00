"""The transactions of one partition that are not yet stable (Kafka's ``ProducerStateManager``
fields ``ongoingTxns`` and ``unreplicatedTxns``, with ``TxnMetadata`` and ``CompletedTxn``;
KIP-98).

* An *ongoing* transaction began with the first transactional batch of a producer and has no
  marker yet.
* A *completed* transaction got its COMMIT/ABORT marker; until the high watermark passes the
  marker it stays *unreplicated* (a leader change could still lose the marker), so the LSO does
  not move past its first offset.

``first_unstable_offset`` = the smallest first offset among both; the log's last stable offset
is ``min(first_unstable_offset, high_watermark)`` (``UnifiedLog.lastStableOffset``).
Dicts are keyed by first offset: they are tiny (one entry per open transaction), so the minimum
is computed on demand.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CompletedTxn", "OngoingTransactions"]


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker at ``last_offset`` (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class OngoingTransactions:
    """Ongoing and unreplicated transactions of one partition (see module docstring)."""

    __slots__ = ("ongoing", "unreplicated")

    def __init__(self) -> None:
        #: first offset -> producer id of each transaction without a marker.
        self.ongoing: dict[int, int] = {}
        #: first offset -> transaction whose marker is not below the high watermark yet.
        self.unreplicated: dict[int, CompletedTxn] = {}

    def begin(self, producer_id: int, first_offset: int) -> None:
        """A producer's first transactional batch at ``first_offset``."""
        self.ongoing[first_offset] = producer_id

    def last_stable_offset_for(self, txn: CompletedTxn) -> int:
        """The LSO right after ``txn``'s marker: the first offset of the earliest other ongoing
        transaction, else the offset after the marker (Kafka's
        ``ProducerStateManager.lastStableOffset(CompletedTxn)``; stored in the txn index)."""
        others = [first for first, pid in self.ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def complete(self, txn: CompletedTxn) -> None:
        """``txn``'s marker was appended: it moves from ongoing to unreplicated."""
        self.ongoing.pop(txn.first_offset, None)
        self.unreplicated[txn.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below ``high_watermark``."""
        if self.unreplicated:
            for first, txn in list(self.unreplicated.items()):
                if txn.last_offset < high_watermark:
                    del self.unreplicated[first]

    def first_unstable_offset(self) -> int | None:
        """The smallest first offset of an ongoing or unreplicated transaction, or None."""
        if not self.ongoing and not self.unreplicated:
            return None
        return min(min(self.ongoing, default=2**63 - 1), min(self.unreplicated, default=2**63 - 1))
