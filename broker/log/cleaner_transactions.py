"""What log cleaning does with transactions and producer state (KIP-98, KIP-534): Kafka's
``CleanedTransactionMetadata`` and the batch-retention decision of ``Cleaner.cleanInto`` (its
``RecordFilter.checkBatchRetention``) with ``MemoryRecords.filterTo``.

The cleaner walks the cleanable range in offset order, once to build the key map and once to
copy, each walk with its own :class:`CleanedTransactionMetadata` fed with the aborted
transactions (``.txnindex`` entries) overlapping the range:

* a transactional data batch of an aborted transaction can be discarded (and never enters the
  key map);
* an ABORT marker can be discarded once no batch of its transaction was seen in this walk (they
  were all dropped by earlier passes); while one was, the marker stays and its ``.txnindex``
  entry is written to the cleaned segment's index, else the entry is dropped;
* a COMMIT marker can be discarded once no batch of its transaction was seen in this walk (all
  its records were compacted away and their emptied batches dropped by earlier passes);
* a control batch without records (left by cleaning) can be discarded.

A discardable marker is not dropped at once: as Kafka since KIP-534 does, the first pass that
finds it discardable stores a *delete horizon* = now + ``delete.retention.ms`` in the batch
(``deleteHorizonMs`` in the base timestamp, attribute bit 6) and a later pass at or past that
time removes it. So a read_committed consumer that has read the transaction's data has
``delete.retention.ms`` to read the marker too. The same horizon delays the tombstones of data
batches (:mod:`broker.log.cleaner_batches`).

Whatever the above says, the batch holding a producer's last data offset (or, for a producer
with no data since its last epoch bump, its marker of the current epoch) is kept, emptied of
records if they all go (``BatchRetention.RETAIN_EMPTY``): a replica or a restart that rebuilds
producer state from the log keeps the producer's epoch and last sequence (idempotence, fencing).
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from spark_kafkalite.protocol.control_records import ControlRecordType
from spark_kafkalite.protocol.record_batch import BatchHeader

from .cleaner_batches import delete_horizon_passed
from .transaction_index import AbortedTxn

__all__ = [
    "BatchRetention",
    "BatchRetentionResult",
    "CleanedTransactionMetadata",
    "LastRecord",
    "check_batch_retention",
]


class BatchRetention(enum.Enum):
    """Kafka's ``MemoryRecords.RecordFilter.BatchRetention``."""

    DELETE = "delete"  # drop the batch without looking at its records
    RETAIN_EMPTY = "retain_empty"  # keep the batch, header only if no record stays
    DELETE_EMPTY = "delete_empty"  # keep the batch if a record stays


@dataclass(frozen=True, slots=True)
class LastRecord:
    """An active producer as the cleaner sees it (Kafka's ``LastRecord``): the offset of its
    last data record (None when it has none since its last epoch bump) and its epoch."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class BatchRetentionResult:
    """The decision for one batch: ``retention``; ``discard_records``: no record of it stays
    (the batch is at most kept as an empty header); ``set_delete_horizon``: it is a discardable
    marker that must carry a delete horizon when kept (Kafka's ``containsMarkerForEmptyTxn``)."""

    retention: BatchRetention
    discard_records: bool
    set_delete_horizon: bool


class _AbortedState:
    __slots__ = ("txn", "last_observed_batch_offset")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """Transaction state along one walk of the cleaner over the log, in offset order (Kafka's
    ``CleanedTransactionMetadata``).

    Args:
        aborted: the aborted transactions overlapping the walked range (each once).

    Attributes:
        cleaned_index: where the ``.txnindex`` entries of the markers kept go (the caller sets
            a fresh list per cleaned segment; None: not collected).
    """

    def __init__(self, aborted: Iterable[AbortedTxn] = ()) -> None:
        self._pending: list[tuple[int, int, AbortedTxn]] = []  # min-heap by first offset
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, _AbortedState] = {}
        self.cleaned_index: list[AbortedTxn] | None = None
        self.add_aborted_transactions(aborted)

    def add_aborted_transactions(self, aborted: Iterable[AbortedTxn]) -> None:
        for txn in aborted:
            heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _consume_aborted_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            txn = heapq.heappop(pending)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedState(txn))

    def on_control_batch_read(self, header: BatchHeader, control_type: int | None) -> bool:
        """A control batch was reached (``control_type`` of its record, None if it has none);
        True if it may be discarded (see the module docstring)."""
        self._consume_aborted_up_to(header.last_offset)
        if control_type is None:  # emptied by an earlier pass
            return True
        pid = header.producer_id
        if control_type == ControlRecordType.ABORT:
            state = self._ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed_batch_offset is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if pid in self._ongoing_committed:
                self._ongoing_committed.discard(pid)
                return False
            return True
        return False  # another control type (KRaft's): kept

    def on_batch_read(self, header: BatchHeader) -> bool:
        """A data batch was reached; True if it belongs to an aborted transaction (discard it,
        keep it out of the key map)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        state = self._ongoing_aborted.get(header.producer_id)
        if state is not None:
            state.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False


def check_batch_retention(
    header: BatchHeader,
    can_discard: bool,
    last_records: Mapping[int, LastRecord],
    now_ms: int,
) -> BatchRetentionResult:
    """Kafka's ``Cleaner.cleanInto`` ``checkBatchRetention`` for a batch that
    :class:`CleanedTransactionMetadata` judged discardable or not (``can_discard``), given the
    active producers (``last_records``, producer id -> :class:`LastRecord`) and the time of the
    pass (``now_ms``). A marker's records go only once its delete horizon has passed."""
    if header.is_control:
        discard_records = can_discard and delete_horizon_passed(header, now_ms)
    else:
        discard_records = can_discard
    last = last_records.get(header.producer_id) if header.producer_id >= 0 else None
    if last is None:
        is_last_of_producer = False
    elif last.last_data_offset is not None:
        is_last_of_producer = header.last_offset == last.last_data_offset
    else:
        is_last_of_producer = header.is_control and header.producer_epoch == last.producer_epoch
    if is_last_of_producer:
        retention = BatchRetention.RETAIN_EMPTY
    elif discard_records:
        retention = BatchRetention.DELETE
    else:
        retention = BatchRetention.DELETE_EMPTY
    return BatchRetentionResult(retention, discard_records, can_discard and header.is_control)
