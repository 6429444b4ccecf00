"""``CompletedFetch``: one partition's part of a fetch response, handed out incrementally by the
``Fetcher`` (Java ``CompletedFetch``): the raw records, the position reached in them, and the batch
being handed out."""

from __future__ import annotations

from collections.abc import Iterator

from spark_kafkalite.client.types import TopicPartition
from spark_kafkalite.protocol.record_batch import BatchHeader, DecodedBatch

__all__ = ["CompletedFetch"]


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
