"""``CompletedFetch``: one partition's part of a fetch response, handed out incrementally by the
``Fetcher`` (Java ``CompletedFetch``): the raw records, the position reached in them, the batch
being handed out and, under ``read_committed``, the ``AbortedTransactions`` filter."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.control_records import ControlRecordType, control_record_type
from spark_kafkalite.protocol.record_batch import BatchHeader, Buffer, DecodedBatch

__all__ = ["CompletedFetch", "AbortedTransactions"]


class AbortedTransactions:
    """Which batches of a ``read_committed`` fetch belong to aborted transactions (Java
    ``CompletedFetch.nextFetchedRecord`` / ``consumeAbortedTransactionsUpTo`` /
    ``isBatchAborted`` / ``containsAbortMarker``; KIP-98).

    The fetch response lists ``(producer_id, first_offset)`` of every aborted transaction that
    overlaps the fetched range. Batches are offered in offset order (every batch, including
    those below the position): before a batch with a producer id is judged, every listed
    transaction starting at or below its last offset marks its producer as aborted; a
    transactional data batch of an aborted producer is skipped whole; that producer's ABORT
    marker ends the aborted run. Control batches are never data (the caller skips them).
    """

    __slots__ = ("_pending", "_aborted_producer_ids")

    def __init__(self, aborted: Iterable[tuple[int, int]]) -> None:
        # min-heap by first offset, as Java's PriorityQueue<FetchResponseData.AbortedTransaction>
        self._pending = [(int(first_offset), int(producer_id)) for producer_id, first_offset in aborted]
        heapq.heapify(self._pending)
        self._aborted_producer_ids: set[int] = set()

    def is_aborted(self, buf: Buffer, pos: int, header: BatchHeader) -> bool:
        """True if the batch at ``pos`` (``header``) is aborted data to skip; updates the
        aborted producer set (an ABORT marker removes its producer).

        Raises:
            CorruptRecordError / InvalidRecordError: a control batch that does not decode.
        """
        producer_id = header.producer_id
        if producer_id < 0:
            return False
        pending = self._pending
        last_offset = header.last_offset
        while pending and pending[0][0] <= last_offset:
            self._aborted_producer_ids.add(heapq.heappop(pending)[1])
        if header.is_control:
            if control_record_type(buf, pos, header) == ControlRecordType.ABORT:
                self._aborted_producer_ids.discard(producer_id)
            return False
        return header.is_transactional and producer_id in self._aborted_producer_ids


class CompletedFetch:
    """One partition's part of a fetch response, consumed incrementally."""

    __slots__ = (
        "tp",
        "fetch_offset",
        "error_code",
        "high_watermark",
        "log_start_offset",
        "last_stable_offset",
        "records",
        "next_fetch_offset",
        "consumed",
        "batch",
        "index",
        "headers_iter",
        "saw_batch",
        "end_offset",
        "failed_header",
        "batch_item",
        "pending_item",
        "aborted_transactions",
        "preferred_read_replica",
    )

    def __init__(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        error_code: int,
        high_watermark: int,
        log_start_offset: int,
        last_stable_offset: int,
        records: bytes | memoryview | None,
        aborted_transactions: AbortedTransactions | None = None,
        preferred_read_replica: int = -1,
    ) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.log_start_offset = log_start_offset
        self.last_stable_offset = last_stable_offset
        self.records = records
        self.next_fetch_offset = fetch_offset
        self.consumed = False
        self.batch: DecodedBatch | None = None
        self.index = 0
        self.headers_iter: Iterator[tuple[int, BatchHeader]] | None = None
        self.saw_batch = False
        self.end_offset: int | None = None
        # A batch that failed to decode: retried (and raising again) on the next poll.
        self.failed_header: tuple[int, BatchHeader] | None = None
        # (position, header) of ``batch``, and a batch that ``_fetch_columns`` left part of.
        self.batch_item: tuple[int, BatchHeader] | None = None
        self.pending_item: tuple[int, BatchHeader] | None = None
        # read_committed only: the response's AbortedTransactions (None under read_uncommitted)
        self.aborted_transactions = aborted_transactions
        # KIP-392: the replica the leader says to read from (-1: keep reading here)
        self.preferred_read_replica = preferred_read_replica
