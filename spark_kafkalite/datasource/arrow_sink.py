"""Arrow batch -> producer batches for the ``kafkalite`` sink (issue #10 item 3), per Arrow batch
and never per row in Python:

1. topic of each row: the ``topic`` option, else the ``topic`` column (dictionary-encoded);
2. partition of each row, as Spark's Kafka sink gets it from the Java producer: an explicit
   ``partition`` column value wins; else ``toPositive(murmur2(key)) % numPartitions``
   (``BuiltInPartitioner.partitionForKey``; hashed natively for the whole key column); else
   (null key) the producer's sticky partition for the topic (KIP-480/KIP-794), switched after
   ``batch.size`` bytes;
3. rows grouped by (topic, partition), keeping their order, and encoded into RecordBatch v2
   builders of at most ``batch.size`` bytes (``protocol.record_encoding.encode_rows``: compiled
   when built). A partition's last builder stays open for the rows of the next Arrow batch, as
   the Java producer's open batch per partition does, so every batch but the last of each
   partition is full (Spark's 10k-row Arrow batches would otherwise end each partition's rows
   with a small batch: more batches, requests and broker appends per row);
4. each full builder handed to ``KafkaProducer.send_batch`` (accumulator, ``linger.ms``,
   ``buffer.memory`` back-pressure, idempotent sequences, retries), the open ones by
   :meth:`SinkBatchEncoder.finish` once the input ends.

Errors name the column and the row (index within the task's input, counting from 0).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafkalite.datasource.client_protocols import SinkProducer
from spark_kafkalite.datasource.errors import KafkaLiteWriteError
from spark_kafkalite.protocol.errors import InvalidPartitionsError, MessageTooLargeError
from spark_kafkalite.protocol.record_encoding import (
    ArrowRecordColumns,
    RecordTooLargeError,
    encode_rows,
    key_hashes,
)

__all__ = ["SinkBatchEncoder", "column"]

#: Kafka's per-record framing upper bound (``DefaultRecord``), used for sticky switching.
_RECORD_OVERHEAD = 21


def column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    """The column ``name`` (case-insensitive, as Spark resolves sink columns), or None."""
    index = batch.schema.get_field_index(name)
    if index < 0:
        lowered = [n.lower() for n in batch.schema.names]
        if name not in lowered:
            return None
        index = lowered.index(name)
    return batch.column(index)


def _first_true(mask: np.ndarray) -> int:
    return int(np.argmax(mask))


class SinkBatchEncoder:
    """Turns the Arrow batches of one write task into ``(topic, partition, builder)`` triples.

    Args:
        producer: a ``KafkaProducer`` (``partitions_for``, ``sticky_partition_runs``, ``config``).
        topic_option: the sink's ``topic`` option (wins over the column), or None.
        has_key / has_partition / has_headers / has_timestamp: which optional columns exist.
    """

    def __init__(
        self,
        producer: SinkProducer,
        topic_option: str | None,
        *,
        has_key: bool,
        has_partition: bool,
        has_headers: bool,
        has_timestamp: bool,
    ) -> None:
        self.producer = producer
        self.topic_option = topic_option
        self.has_key = has_key
        self.has_partition = has_partition
        self.has_headers = has_headers
        self.has_timestamp = has_timestamp
        config = producer.config
        self.max_request_bytes = int(config["max.request.size"])
        self.max_batch_bytes = min(int(config["batch.size"]), self.max_request_bytes)
        self.rows_seen = 0  # rows of earlier batches (row numbers in errors count across batches)
        self._open: dict[tuple[str, int], Any] = {}  # the last, not yet full builder per partition
        # Open builders are not yet in the accumulator, so ``buffer.memory`` does not see them:
        # past half of it (many partitions), they are handed over after the Arrow batch.
        self.max_open_bytes = int(config["buffer.memory"]) // 2

    def finish(self) -> Iterator[tuple[str, int, Any]]:
        """Yield ``(topic, partition, builder)`` for the builders still open (call once the input
        ended; they hold each partition's last rows)."""
        open_builders, self._open = self._open, {}
        for (topic, partition), builder in open_builders.items():
            yield topic, partition, builder

    def encode(self, batch: pa.RecordBatch) -> Iterator[tuple[str, int, Any]]:
        """Yield ``(topic, partition, builder)`` for the full builders of ``batch``, in row order
        per partition; each partition's last builder stays open for the next batch (see
        :meth:`finish`).

        Raises:
            KafkaLiteWriteError: a null topic without the ``topic`` option, or a null header key.
            InvalidPartitionsError: a ``partition`` value outside the topic's partitions.
            MessageTooLargeError: a record larger than ``max.request.size``.
            KafkaError: the topic's metadata (unknown topic, timeout).
        """
        n = batch.num_rows
        first_row = self.rows_seen
        self.rows_seen += n
        if n == 0:
            return
        topics, topic_idx = self._topics(batch, first_row)
        counts = np.array([len(self.producer.partitions_for(t)) for t in topics], dtype=np.int64)
        row_counts = counts[topic_idx]
        parts = np.full(n, -1, dtype=np.int64)
        keys = column(batch, "key") if self.has_key else None
        if keys is not None:
            hashes = np.asarray(key_hashes(keys), dtype=np.int64)
            keyed = hashes >= 0
            parts[keyed] = hashes[keyed] % row_counts[keyed]
        if self.has_partition:
            self._explicit_partitions(batch, parts, row_counts, topics, topic_idx, first_row)
        values = column(batch, "value")
        if values is None:  # checked on the driver (plan_write) too
            raise KafkaLiteWriteError("the rows to write have no value column")
        unassigned = parts < 0
        if unassigned.any():
            self._sticky(values, parts, unassigned, topics, topic_idx)
        try:
            columns = ArrowRecordColumns(
                values,
                keys,
                column(batch, "timestamp") if self.has_timestamp else None,
                column(batch, "headers") if self.has_headers else None,
                default_timestamp_ms=int(time.time() * 1000),
            )
        except ValueError as exc:
            raise KafkaLiteWriteError(
                f"column 'headers': {exc} (rows {first_row}..{first_row + n - 1})"
            ) from exc
        group = topic_idx.astype(np.int64) * (int(counts.max()) + 1) + parts
        order = np.argsort(group, kind="stable")
        sorted_groups = group[order]
        bounds = np.flatnonzero(sorted_groups[1:] != sorted_groups[:-1]) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.concatenate((bounds, [n]))
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            row0 = int(order[s])
            topic, partition = topics[int(topic_idx[row0])], int(parts[row0])
            key = (topic, partition)
            try:
                builders = encode_rows(
                    columns,
                    order[s:e],
                    self.max_batch_bytes,
                    self.max_request_bytes,
                    self._open.pop(key, None),
                )
            except RecordTooLargeError as exc:
                raise MessageTooLargeError(
                    f"row {first_row + exc.row} (columns key, value, headers): the record is {exc.size_bytes} "
                    f"bytes, larger than max.request.size={self.max_request_bytes}"
                ) from exc
            if builders:
                self._open[key] = builders.pop()
            for builder in builders:
                yield topic, partition, builder
        if sum(builder.size_bytes for builder in self._open.values()) > self.max_open_bytes:
            yield from self.finish()

    def _topics(self, batch: pa.RecordBatch, first_row: int) -> tuple[list[str], np.ndarray]:
        n = batch.num_rows
        if self.topic_option is not None:
            return [self.topic_option], np.zeros(n, dtype=np.int64)
        col = column(batch, "topic")
        if col is None or col.null_count:
            row = 0 if col is None else _first_true(np.asarray(col.is_null().to_numpy(zero_copy_only=False)))
            raise KafkaLiteWriteError(
                "[KAFKA_NULL_TOPIC_IN_DATA] The Kafka message data sent to the producer contains a null "
                f"topic (column 'topic', row {first_row + row}). Use the `topic` option for setting a "
                "default topic."
            )
        encoded = col.dictionary_encode()
        return (
            encoded.dictionary.to_pylist(),
            encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64),
        )

    def _explicit_partitions(
        self,
        batch: pa.RecordBatch,
        parts: np.ndarray,
        row_counts: np.ndarray,
        topics: list[str],
        topic_idx: np.ndarray,
        first_row: int,
    ) -> None:
        col = column(batch, "partition")
        if col is None:
            return
        given = col.is_valid().to_numpy(zero_copy_only=False)
        if not given.any():
            return
        values = col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        bad = given & ((values < 0) | (values >= row_counts))
        if bad.any():
            row = _first_true(bad)
            raise InvalidPartitionsError(
                f"partition {int(values[row])} is not in the range [0, {int(row_counts[row])}) of topic "
                f"{topics[int(topic_idx[row])]} (column 'partition', row {first_row + row})"
            )
        parts[given] = values[given]

    def _sticky(
        self,
        values: pa.Array,
        parts: np.ndarray,
        unassigned: np.ndarray,
        topics: list[str],
        topic_idx: np.ndarray,
    ) -> None:
        lengths = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        sizes = lengths + _RECORD_OVERHEAD
        for t, topic in enumerate(topics):
            rows = np.flatnonzero(unassigned & (topic_idx == t))
            if not len(rows):
                continue
            cumulative = np.cumsum(sizes[rows])
            start = 0
            for end, partition in self.producer.sticky_partition_runs(topic, cumulative):
                parts[rows[start:end]] = partition
                start = end
