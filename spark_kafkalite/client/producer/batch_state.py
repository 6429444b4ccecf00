"""Base classes holding the per-record fields of the producer's ``RecordAccumulator``,
``ProducerBatch`` and ``FutureRecordMetadata`` (issue #10): the pure-Python reference of the
compiled ``_batch_state``, whose fields are C members so that the compiled ``_send_path`` appends
a record (Java ``RecordAccumulator.append`` -> ``ProducerBatch.tryAppend``) without a Python
attribute lookup. The producer's modules load it with ``protocol.native.load_twin`` (the
compiled module unless ``KAFKALITE_PURE_PYTHON`` is set or it was not built)."""

from __future__ import annotations

from typing import Any

__all__ = ["AccumulatorState", "BatchState", "FutureState", "IMPLEMENTATION"]

IMPLEMENTATION = "python"


class AccumulatorState:
    """Base of ``RecordAccumulator``: bytes charged to ``buffer.memory``, closed flag, and the
    per-partition deques of batches."""

    __slots__ = ("_used_bytes", "_closed", "_batches")

    def __init__(self) -> None:
        self._used_bytes = 0
        self._closed = False
        self._batches: dict[Any, Any] = {}


class BatchState:
    """Base of ``ProducerBatch``: its records builder, record count, estimated size, and the
    closed / in-retry / done flags."""

    __slots__ = ("builder", "count", "size_bytes", "closed", "in_retry", "done")

    builder: Any
    count: int
    size_bytes: int
    closed: bool
    in_retry: bool
    done: bool


class FutureState:
    """Base of ``FutureRecordMetadata``: its batch, index in the batch, CreateTime and the
    Java-style ``callback(metadata, exception)`` given to ``send`` (or None)."""

    __slots__ = ("_batch", "_index", "_timestamp_ms", "_record_callback")

    _batch: Any
    _index: int
    _timestamp_ms: int
    _record_callback: Any
