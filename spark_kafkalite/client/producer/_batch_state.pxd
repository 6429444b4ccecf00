# The per-record fields of the producer's accumulator, batches and record futures, read and
# written at C speed by _send_path.pyx (see _batch_state.pyx / batch_state.py).

cdef class AccumulatorState:
    cdef public Py_ssize_t _used_bytes
    cdef public bint _closed
    cdef public dict _batches


cdef class BatchState:
    cdef public object builder
    cdef public Py_ssize_t count
    cdef public Py_ssize_t size_bytes
    cdef public bint closed
    cdef public bint in_retry
    cdef public bint done


cdef class FutureState:
    cdef public object _batch
    cdef public Py_ssize_t _index
    cdef public object _timestamp_ms
    cdef public object _record_callback
