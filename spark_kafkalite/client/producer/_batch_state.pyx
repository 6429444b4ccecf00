# cython: language_level=3, binding=True, embedsignature=True, embedsignature.format=python
"""Compiled twin of ``batch_state.py`` (issue #10): the same three base classes, with their
fields (declared in ``_batch_state.pxd``) as C members so that the compiled ``_send_path`` appends
a record without a Python attribute lookup. Python code sees ordinary attributes."""

__all__ = ["AccumulatorState", "BatchState", "FutureState", "IMPLEMENTATION"]

IMPLEMENTATION = "native"


cdef class AccumulatorState:
    """Base of ``RecordAccumulator``: bytes charged to ``buffer.memory``, closed flag, and the
    per-partition deques of batches."""

    def __cinit__(self, *args, **kwargs):
        self._used_bytes = 0
        self._closed = False
        self._batches = {}


cdef class BatchState:
    """Base of ``ProducerBatch``: its records builder, record count, estimated size, and the
    closed / in-retry / done flags."""

    def __cinit__(self, *args, **kwargs):
        self.builder = None
        self.count = 0
        self.size_bytes = 0
        self.closed = False
        self.in_retry = False
        self.done = False


cdef class FutureState:
    """Base of ``FutureRecordMetadata``: its batch, index in the batch, CreateTime and the
    Java-style ``callback(metadata, exception)`` given to ``send`` (or None)."""

    def __cinit__(self, *args, **kwargs):
        self._batch = None
        self._index = 0
        self._timestamp_ms = None
        self._record_callback = None
